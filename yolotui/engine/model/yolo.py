"""YoloModel: the layers a YAML describes, run in order with skip connections, ending in a detection head."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from yolotui.engine.model.heads import HEAD_TYPES, REG_MAX

INPUT = -1  # a resolved source index that means "the input image"


class YoloModel(nn.Module):
    """A YOLOv9 / GELAN detector built from an official-format model YAML (see `build_model`).

    Attributes: `model` (nn.Sequential of layers; each has `.i`, `.f`, `.type`), `nc`, `stride` (tensor of
    the head's level strides), `reg_max`, `yaml` (the config dict, nc filled in), `backbone_layers`,
    `detect` (the head). State-dict keys are `model.<i>.<submodule>...`, as in the official models.
    """

    def __init__(self, layers: list[nn.Module], yaml_dict: dict, backbone_layers: int) -> None:
        super().__init__()
        self.model = nn.Sequential(*layers)
        self.yaml = yaml_dict
        self.nc = int(yaml_dict["nc"])
        self.reg_max = REG_MAX
        self.backbone_layers = backbone_layers
        self.names = [str(i) for i in range(self.nc)]
        self.register_buffer("stride", torch.zeros(self.detect.nl), persistent=False)
        self.stride_values: list[float] = []  # the strides as plain numbers (readable on the meta device)
        self.save = self._saved_outputs()

    def set_strides(self, strides: list[float]) -> None:
        """Record the head's level strides (model and head buffers, plain copy)."""
        self.stride_values = [float(s) for s in strides]
        device = self.stride.device
        self.stride = torch.tensor(self.stride_values, device=device)
        self.detect.stride = torch.tensor(self.stride_values, device=device)
        self.detect.stride_values = list(self.stride_values)
        self.detect._anchor_cache = None

    def materialize(self, device: str | torch.device = "cpu") -> YoloModel:
        """Give a model built on the meta device real (uninitialised) storage on `device`, in place.

        Values are garbage until a state dict is loaded; shapes, FLOPs and layer wiring are usable at once.
        """
        empty_storage(self, device)
        self.set_strides(self.stride_values)
        return self


    @property
    def detect(self) -> nn.Module:
        """The detection head (the last layer)."""
        head = self.model[-1]
        if not isinstance(head, HEAD_TYPES):
            raise TypeError(f"the last layer is {type(head).__name__}, not a detection head")
        return head

    def _saved_outputs(self) -> set[int]:
        # Outputs read by a later layer other than through "previous layer" stay alive during forward.
        saved: set[int] = set()
        for layer in self.model:
            if isinstance(layer.sources, list):
                saved.update(layer.sources)
            elif layer.sources != layer.i - 1:
                saved.add(layer.sources)
        saved.discard(INPUT)
        return saved

    def forward(self, x: Tensor):
        """Training: head maps (a list per level; `[aux, main]` for a dual head). Eval: `(decoded, maps)`."""
        image = x
        outputs: list = []
        for layer in self.model:
            x = self._gather(layer, x, image, outputs)
            x = layer(x)
            outputs.append(x if layer.i in self.save else None)
        return x

    @staticmethod
    def _gather(layer: nn.Module, previous, image: Tensor, outputs: list):
        sources = layer.sources
        if isinstance(sources, list):
            return [image if j == INPUT else outputs[j] for j in sources]
        if sources == layer.i - 1:
            return previous
        return image if sources == INPUT else outputs[sources]

    def forward_maps(self, x: Tensor):
        """The head's raw maps in any mode (no decoding; the structure of the training output)."""
        image = x
        outputs: list = []
        last = len(self.model) - 1
        for layer in self.model:
            x = self._gather(layer, x, image, outputs)
            x = layer.forward_maps(x) if layer.i == last else layer(x)
            outputs.append(x if layer.i in self.save else None)
        return x


def empty_storage(module: nn.Module, device: str | torch.device) -> nn.Module:
    """Like `Module.to_empty`, but fast from the meta device (to_empty goes through slow reference ops)."""
    for sub in module.modules():
        for name, param in sub._parameters.items():
            if param is not None:
                fresh = torch.empty(param.shape, dtype=param.dtype, device=device)
                sub._parameters[name] = nn.Parameter(fresh, requires_grad=param.requires_grad)
        for name, buf in sub._buffers.items():
            if buf is not None:
                sub._buffers[name] = torch.empty(buf.shape, dtype=buf.dtype, device=device)
    return module
