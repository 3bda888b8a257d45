"""The parity checks of an export: does the converted model (or the ONNX graph) give the training model's output?

What "the same output" means. Fusing Conv+BN and merging RepConvN change the order of
float operations, so the two models' raw head outputs (the logits before decoding) differ by rounding, and
that difference is relative to how large the logits are: measured, up to ~1e-4 of a level's largest logit in
float32. A barely trained model has large logits (hundreds, after one short epoch) and near-ties between DFL
distance bins, where a rounding-sized change of two logits moves a box by a good fraction of a bin (a pixel
or more at stride 32); its class scores near 0.5 move by a quarter of the logit change. A fixed tolerance
on the decoded output therefore failed a correct export of a freshly trained run. So each decoded value is
allowed what rounding of the raw outputs can do to it there: an absolute floor plus `RELATIVE_ROUNDING`
times the level's logit scale times the decode's local sensitivity (for a box coordinate, the stride times
twice the spread of its DFL bin distribution; for a score, sigmoid'(logit)). Confident anchors keep the
floor, ties get room. The converted model's raw logits must also agree within `RELATIVE_ROUNDING` of their
scale, level by level: that is what a fusing mistake breaks (by far more than rounding), whatever decoding
does with it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

# The floor of what still counts as a match in the decoded output (scores 0..1, boxes in pixels), keyed by --half.
_SCORE_TOLERANCE = {False: 1e-3, True: 2e-2}
_BOX_TOLERANCE_PX = {False: 0.05, True: 1.0}
# Rounding's share of a level's largest raw logit that two correct computations may differ by: float32 was
# measured at up to 1e-4 (gelan-t and yolov9-t, trained 1-3 epochs at 64 px); fp16 weights alone move it by
# a few 1e-2 on a barely trained model. A conversion mistake is off by tens of percent.
RELATIVE_ROUNDING = {False: 1e-3, True: 5e-2}


@dataclass
class Parity:
    """How two outputs compare over the samples: the max abs differences of the decoded output (boxes in pixels,
    scores), `worst`: the largest difference as a share of what rounding allows there (at most 1 is a match),
    `logits`: for the converted model, the largest raw-logit difference as a share of its level's scale."""

    box: float
    score: float
    ok: bool
    worst: float = 0.0
    logits: float | None = None

    def text(self) -> str:
        """'max abs diff: boxes 1.2e-05 px, scores 3.4e-07; 0.02 of the rounding allowance (ok)'."""
        verdict = "ok" if self.ok else "MISMATCH"
        logits = f", raw logits {self.logits:.2g} of their scale" if self.logits is not None else ""
        return (f"max abs diff: boxes {self.box:.3g} px, scores {self.score:.3g}{logits}; "
                f"{self.worst:.2g} of what float rounding allows ({verdict})")


@dataclass
class HeadOutputs:
    """A model's decoded output `[N, 4 + nc, A]` on the samples, and how much rounding can move each value:
    `box_sens [N, A]` (pixels) and `score_sens [N, nc, A]` per unit of relative rounding of the raw logits;
    `maps`: the raw logits, levels concatenated `[N, 4 * reg_max + nc, A]`, and `scales [N, 2, A]`: the largest
    |box logit| and |class logit| of each anchor's level in its image."""

    decoded: Tensor
    box_sens: Tensor
    score_sens: Tensor
    maps: Tensor
    scales: Tensor


def _main_maps(out) -> list[Tensor]:
    maps = out[1] if isinstance(out, (list, tuple)) and len(out) > 1 else out
    return list(maps[-1] if isinstance(maps[0], (list, tuple)) else maps)  # a dual head: its main branch


@torch.no_grad()
def head_outputs(model: nn.Module, images: Tensor) -> HeadOutputs:
    """Run `model` on `images` one at a time (so batch-norm-free and static shapes agree); see HeadOutputs."""
    param = next(model.parameters())
    head = model.model[-1]
    reg_max, strides = int(head.reg_max), list(head.stride_values or head.stride.tolist())
    bins = torch.arange(reg_max, dtype=torch.float32)
    decoded_all, box_sens, score_sens, maps_all, scales_all = [], [], [], [], []
    for image in images:
        out = model(image[None].to(param.device, param.dtype))
        decoded_all.append((out[0] if isinstance(out, (list, tuple)) else out).float().cpu())
        levels = [m.float().cpu().flatten(2) for m in _main_maps(out)]
        level_box, level_score, level_scales = [], [], []
        for level, stride in zip(levels, strides):
            box, cls = level[:, : 4 * reg_max], level[:, 4 * reg_max:]
            p = box.view(1, 4, reg_max, -1).softmax(2)
            mean = (p * bins.view(1, 1, -1, 1)).sum(2, keepdim=True)
            spread = (p * (bins.view(1, 1, -1, 1) - mean).abs()).sum(2)  # [1, 4, HW]: dE/dlogit summed
            box_scale, cls_scale = box.abs().max(), (cls.abs().max() if cls.numel() else torch.tensor(0.0))
            level_box.append(2.0 * float(stride) * spread.amax(1) * box_scale)
            score = cls.sigmoid()
            level_score.append(score * (1 - score) * cls_scale)
            level_scales.append(torch.stack((box_scale, cls_scale)).view(1, 2, 1).expand(1, 2, level.shape[2]))
        box_sens.append(torch.cat(level_box, 1))
        score_sens.append(torch.cat(level_score, 2))
        maps_all.append(torch.cat(levels, 2))
        scales_all.append(torch.cat(level_scales, 2))
    return HeadOutputs(torch.cat(decoded_all), torch.cat(box_sens), torch.cat(score_sens), torch.cat(maps_all),
                       torch.cat(scales_all))


def compare_outputs(expected: HeadOutputs, got: Tensor | HeadOutputs, half: bool) -> Parity:
    """Compare `got` (a decoded output, or HeadOutputs to compare the raw logits too) with `expected`: each
    decoded value within its rounding allowance (see the module docstring), the raw logits within
    RELATIVE_ROUNDING of their level's scale."""
    rtol = RELATIVE_ROUNDING[half]
    got_decoded = got.decoded if isinstance(got, HeadOutputs) else got
    diff = (expected.decoded.float() - got_decoded.float()).abs()
    box_diff, score_diff = diff[:, :4], diff[:, 4:]
    box = float(box_diff.max()) if box_diff.numel() else 0.0
    score = float(score_diff.max()) if score_diff.numel() else 0.0
    box_allowed = _BOX_TOLERANCE_PX[half] + rtol * expected.box_sens.unsqueeze(1)
    score_allowed = _SCORE_TOLERANCE[half] + rtol * expected.score_sens
    worst = max(float((box_diff / box_allowed).max()) if box_diff.numel() else 0.0,
                float((score_diff / score_allowed).max()) if score_diff.numel() else 0.0)
    logits = None
    if isinstance(got, HeadOutputs):
        reg4 = expected.maps.shape[1] - (expected.decoded.shape[1] - 4)
        scale = torch.cat((expected.scales[:, :1].expand(-1, reg4, -1), expected.scales[:, 1:].expand(
            -1, expected.maps.shape[1] - reg4, -1)), 1).clamp_min(1e-6)
        logits = float(((expected.maps - got.maps).abs() / scale).max())
    ok = worst <= 1.0 and (logits is None or logits <= rtol)
    return Parity(box=box, score=score, ok=ok, worst=worst, logits=logits)
