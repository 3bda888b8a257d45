"""Export the deployable model: the converted inference checkpoint and, optionally, an ONNX file.

The converted model is the training model with the auxiliary (PGI) branch dropped, every Conv+BN fused and
every RepConvN merged (yolotui.engine.model.convert). It is written as a yolotui checkpoint (`fused: True`,
loads with `weights_only=True`, so `yolotui val` and `yolotui export` read it back) and, with ONNX, as a
graph whose one output `output0` is `[batch, 4 + nc, anchors]` (xywh pixels, class scores), the same as
the decoded output the validation code feeds to NMS.

Export checks itself: the converted model against the training model on sample images, ONNX Runtime
against PyTorch on the same images, and, with a data set, a validation of the training model and of the
written checkpoint whose mAPs must agree within `MAP_TOLERANCE`. Official YOLOv9 .pt files are read inertly
(yolotui.backends.official.weights), never unpickled.

What "the same output" means, and the tolerances of the parity checks: yolotui.engine.tools.parity.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from yolotui.engine.tools.parity import Parity, compare_outputs, head_outputs
from yolotui.errors import UserError

MAP_TOLERANCE = 0.001  # the two validations' mAP50-95 must agree this closely
DYNAMO_MIN_OPSET = 18  # below it the TorchScript exporter is used
MAX_SAMPLES = 8


@dataclass
class ExportOptions:
    """What to export and how. `images` are sample image files for the parity checks (none: generated)."""

    weights: Path
    fmt: str = "pt"
    imgsz: int = 640
    half: bool = False
    opset: int = DYNAMO_MIN_OPSET
    dynamic: bool = False
    device: str = "cpu"
    output: Path | None = None
    images: list[Path] = field(default_factory=list)
    val_data: Path | None = None
    batch_size: int = 8
    workers: int = 0


@dataclass
class ExportReport:
    """What an export wrote and what its checks found."""

    weights: str
    pt_path: str
    onnx_path: str | None
    imgsz: int
    half: bool
    samples: int
    train: dict
    inference: dict
    converted: Parity
    onnx: Parity | None = None
    val_train: dict | None = None
    val_export: dict | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """True when every check that ran passed."""
        checks = [self.converted.ok, self.onnx.ok if self.onnx else True]
        if self.val_train is not None and self.val_export is not None:
            checks.append(self.map_agrees)
        return all(checks)

    @property
    def map_agrees(self) -> bool:
        """Both validations' mAP50 and mAP50-95 agree within MAP_TOLERANCE (True when no validation ran)."""
        if self.val_train is None or self.val_export is None:
            return True
        return all(abs(self.val_train[k] - self.val_export[k]) <= MAP_TOLERANCE for k in ("mAP50", "mAP50-95"))

    def to_dict(self) -> dict:
        """Plain JSON-ready dict."""
        out = {k: getattr(self, k) for k in ("weights", "pt_path", "onnx_path", "imgsz", "half", "samples",
                                              "train", "inference", "val_train", "val_export", "seconds")}
        out["converted"] = vars(self.converted)
        out["onnx"] = vars(self.onnx) if self.onnx else None
        out["ok"] = self.ok
        return out


class DecodedOutput(nn.Module):
    """Wraps a detector so its forward returns only the decoded `[B, 4 + nc, A]` tensor (the ONNX output)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: Tensor) -> Tensor:
        out = self.model(x)
        return out[0] if isinstance(out, (list, tuple)) else out


def _model_size(model: nn.Module) -> dict:
    from yolotui.engine.model.flops import count_layers, count_params

    # layers counted as `yolotui model-info` counts them
    return {"layers": count_layers(model), "params": count_params(model), "head": type(model.model[-1]).__name__}


def default_output(weights: Path) -> Path:
    """Where the converted checkpoint goes by default: beside the weights, `<stem>-inference.pt`."""
    return weights.with_name(f"{weights.stem}-inference.pt")


def sample_batch(images: list[Path], imgsz: int, count: int = 4) -> Tensor:
    """Letterboxed float images `[N, 3, imgsz, imgsz]` in 0..1 from `images`, or generated demo images."""
    import cv2

    from yolotui.engine.data.augment import letterbox

    arrays = []
    for path in images[:MAX_SAMPLES]:
        im = cv2.imread(str(path))
        if im is None:
            raise UserError(f"{path}: not a readable image; give image files (jpg, png, ...) for --images")
        arrays.append(im)
    if not arrays:
        from yolotui.datasets.demo import make_demo_image

        arrays = [make_demo_image(0, "export", i, imgsz)[0] for i in range(count)]
    batch = [np.ascontiguousarray(letterbox(im, imgsz)[0][:, :, ::-1].transpose(2, 0, 1)) for im in arrays]
    return torch.from_numpy(np.stack(batch)).float() / 255.0


@torch.no_grad()
def decoded(model: nn.Module, images: Tensor) -> Tensor:
    """The model's decoded output for `images` (one at a time, so batch-norm-free and static shapes agree)."""
    param = next(model.parameters())
    outs = [DecodedOutput(model)(image[None].to(param.device, param.dtype)).float().cpu() for image in images]
    return torch.cat(outs)


def _checkpoint_for(converted: nn.Module, info: dict, options: ExportOptions) -> dict:
    from yolotui.engine.train.checkpoint import FORMAT, now_iso, versions

    state = {k: (v.half() if options.half and v.is_floating_point() else v).cpu()
             for k, v in converted.state_dict().items()}
    return {"format": FORMAT, "kind": "inference", "fused": True, "model_yaml": converted.yaml,
            "nc": int(converted.nc), "names": list(info.get("names") or []), "model": state, "ema": None,
            "epoch": info.get("epoch"), "epochs": info.get("epochs"), "best_fitness": info.get("best_fitness"),
            "source": str(options.weights), "imgsz": options.imgsz, "half": options.half,
            "stride": list(converted.stride_values), "versions": versions(), "date": now_iso()}


def write_onnx(model: nn.Module, path: Path, imgsz: int, opset: int, dynamic: bool, half: bool) -> None:
    """Export `model`'s decoded output to ONNX at `path` (written to a temporary name, then renamed)."""
    try:
        import onnx  # noqa: F401
    except ImportError:
        raise UserError("--format onnx needs the onnx packages: pip install 'yolotui[export]'") from None
    import warnings

    param = next(model.parameters())
    example = torch.zeros(1, 3, imgsz, imgsz, device=param.device, dtype=param.dtype)
    wrapper = DecodedOutput(model).eval()
    head = model.model[-1]
    head._anchor_cache = None  # anchors are computed inside the graph, not taken from a cache
    tmp = path.with_name(f".{path.name}.tmp")
    kwargs: dict = {"input_names": ["images"], "output_names": ["output0"], "opset_version": opset}
    if opset >= DYNAMO_MIN_OPSET:
        kwargs["dynamo"] = True
        kwargs["external_data"] = False  # one self-contained file (YOLOv9-E is far below ONNX's 2 GB limit)
        if dynamic:
            kwargs["dynamic_shapes"] = ({0: torch.export.Dim("batch", min=1, max=1024)},)
    else:
        kwargs["dynamo"] = False
        if dynamic:
            kwargs["dynamic_axes"] = {"images": {0: "batch"}, "output0": {0: "batch"}}
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            _quiet_export(wrapper, example, tmp, kwargs)
        tmp.replace(path)
    except UserError:
        raise
    except Exception as exc:  # the exporters raise many types; the user needs one line
        raise UserError(f"ONNX export failed ({type(exc).__name__}: {str(exc).splitlines()[0][:200]}); "
                        f"try another --opset (now {opset})") from None
    finally:
        head._anchor_cache = None
        tmp.unlink(missing_ok=True)
        for extra in path.parent.glob(f".{path.name}.tmp*"):
            extra.unlink(missing_ok=True)


def _quiet_export(wrapper: nn.Module, example: Tensor, tmp: Path, kwargs: dict) -> None:
    import contextlib
    import io

    # The dynamo exporter prints progress lines of its own; the report says what matters.
    with contextlib.redirect_stdout(io.StringIO()):
        torch.onnx.export(wrapper, (example,), str(tmp), **kwargs)


def onnx_outputs(path: Path, images: Tensor, dynamic: bool, half: bool) -> Tensor:
    """ONNX Runtime's output for `images` (CPU provider), batch at once when the batch is dynamic."""
    try:
        import onnxruntime as ort
    except ImportError:
        raise UserError("checking the ONNX file needs onnxruntime: pip install 'yolotui[export]'") from None
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    dtype = np.float16 if half else np.float32
    arrays = images.numpy().astype(dtype)
    if dynamic:
        return torch.from_numpy(session.run(None, {"images": arrays})[0]).float()
    return torch.cat([torch.from_numpy(session.run(None, {"images": a[None]})[0]).float() for a in arrays])


def _val_loader(data_yaml: Path, imgsz: int, stride: int, batch_size: int, workers: int):
    from yolotui.datasets import check_labels, list_images, load_data_yaml
    from yolotui.engine.data import YoloDataset, build_loader

    data = load_data_yaml(data_yaml)
    if not data.split("val"):
        raise UserError(f"{data.yaml_path}: no 'val' split; add a 'val:' entry to validate the export")
    report = check_labels(list_images(data.split("val")), data.nc)
    report.require_usable(f"{data.yaml_path} 'val'")
    dataset = YoloDataset(report.usable, imgsz=imgsz, augment=False, stride=stride)
    return data, build_loader(dataset, batch_size=batch_size, workers=workers, shuffle=False)


def _val_metrics(model: nn.Module, loader, device, nc: int, names) -> dict:
    from yolotui.engine.evaluate.validate import validate

    result = validate(model, loader, device, nc, names)
    return {"P": result.precision, "R": result.recall, "mAP50": result.map50, "mAP50-95": result.map,
            "seconds": round(result.seconds, 2)}


def _check_options(options: ExportOptions, device: torch.device) -> None:
    if options.fmt not in ("pt", "onnx"):
        raise UserError(f"--format {options.fmt}: choose pt or onnx")
    if options.imgsz < 32:
        raise UserError(f"--img {options.imgsz}: must be at least 32")
    if options.opset < 9:
        raise UserError(f"--opset {options.opset}: ONNX opsets below 9 are not supported; the default is "
                        f"{DYNAMO_MIN_OPSET}")
    if options.half and options.fmt == "onnx" and device.type != "cuda":
        raise UserError("--half with --format onnx needs a CUDA --device (half-precision convolutions are "
                        "exported from a GPU); drop --half or give --device 0")


def export(options: ExportOptions, log: Callable[[str], None] = print) -> ExportReport:
    """Convert `options.weights`, write the inference checkpoint (and ONNX), verify, and report.

    `log` receives one line per step. The files are written before the checks, so a failed check
    leaves them for inspection; the report's `ok` says whether every check passed. On a GPU the checks run
    in true float32 (TF32 off: it rounds convolutions to a 10-bit mantissa, 8000 times float32's rounding,
    which parity.RELATIVE_ROUNDING does not allow for).
    """
    cudnn, matmul = torch.backends.cudnn, torch.backends.cuda.matmul
    saved = cudnn.allow_tf32, matmul.allow_tf32
    cudnn.allow_tf32 = matmul.allow_tf32 = False
    try:
        return _export(options, log)
    finally:
        cudnn.allow_tf32, matmul.allow_tf32 = saved


def _export(options: ExportOptions, log: Callable[[str], None]) -> ExportReport:
    from yolotui.engine.model import convert_for_inference
    from yolotui.engine.tools.weights import load_model_for_eval
    from yolotui.engine.train.startup import select_device

    started = time.perf_counter()
    device = select_device(options.device)
    _check_options(options, device)
    weights = Path(options.weights)
    model, info = load_model_for_eval(weights, device)
    stride = int(max(model.stride_values or [32]))
    if options.imgsz % stride:
        raise UserError(f"--img {options.imgsz}: must be a multiple of the model stride {stride}")
    converted = convert_for_inference(model)
    train_size, inference_size = _model_size(model), _model_size(converted)
    log(f"{weights}: {train_size['layers']} layers, {train_size['params']:,} parameters ({train_size['head']}) "
        f"-> inference {inference_size['layers']} layers, {inference_size['params']:,} parameters "
        f"({inference_size['head']}, Conv+BN fused, RepConvN merged)")

    pt_path = Path(options.output) if options.output else default_output(weights)
    if pt_path.resolve() == weights.resolve():
        raise UserError(f"--output {pt_path}: would overwrite the weights being exported; choose another path")
    try:
        pt_path.parent.mkdir(parents=True, exist_ok=True)
        from yolotui.engine.train.checkpoint import serialize
        from yolotui.runs.atomic import atomic_write_bytes

        atomic_write_bytes(pt_path, serialize(_checkpoint_for(converted, info, options)))
    except OSError as exc:
        raise UserError(f"cannot write {pt_path}: {exc.strerror}; choose another --output") from None
    log(f"wrote {pt_path} ({pt_path.stat().st_size / 1e6:.1f} MB{', fp16 weights' if options.half else ''})")

    images = sample_batch(list(options.images), options.imgsz)
    exported, _ = load_model_for_eval(pt_path, device)  # the written file, read back as a user would
    if options.half:
        exported = exported.half()
    reference = head_outputs(model, images)
    exported_outputs = head_outputs(exported, images)
    converted_parity = compare_outputs(reference, exported_outputs, options.half)
    log(f"converted vs training model on {len(images)} sample image(s): {converted_parity.text()}")
    if options.half and not converted_parity.ok:
        full = compare_outputs(reference, head_outputs(converted, images), False)
        if full.ok:
            log(f"  in float32 the converted model matches ({full.text()}): the difference is float16's "
                "rounding, which this model amplifies (a barely trained model's logits are large); export it "
                "without --half, or train it longer first")

    onnx_path = onnx_parity = None
    if options.fmt == "onnx":
        onnx_path = pt_path.with_suffix(".onnx")
        kind = "dynamo" if options.opset >= DYNAMO_MIN_OPSET else "TorchScript"
        log(f"exporting ONNX (opset {options.opset}, {kind} exporter, "
            f"{'dynamic' if options.dynamic else 'fixed'} batch) ...")
        write_onnx(exported, onnx_path, options.imgsz, options.opset, options.dynamic, options.half)
        log(f"wrote {onnx_path} ({onnx_path.stat().st_size / 1e6:.1f} MB)")
        onnx_parity = compare_outputs(exported_outputs, onnx_outputs(onnx_path, images, options.dynamic,
                                                                     options.half), options.half)
        log(f"ONNX Runtime vs PyTorch on {len(images)} sample image(s): {onnx_parity.text()}")

    report = ExportReport(weights=str(weights), pt_path=str(pt_path), onnx_path=str(onnx_path) if onnx_path else None,
                          imgsz=options.imgsz, half=options.half, samples=len(images), train=train_size,
                          inference=inference_size, converted=converted_parity, onnx=onnx_parity)
    if options.val_data is not None:
        data, loader = _val_loader(Path(options.val_data), options.imgsz, stride, options.batch_size,
                                   options.workers)
        if info["nc"] != data.nc:
            raise UserError(f"--val {data.yaml_path}: has nc={data.nc} but the model predicts {info['nc']} "
                            "classes; validate on the data set the model was trained for")
        names = list(data.names)
        report.val_train = _val_metrics(model, loader, device, data.nc, names)
        report.val_export = _val_metrics(exported, loader, device, data.nc, names)
        for label, metrics in (("training model", report.val_train), ("exported model", report.val_export)):
            log(f"val {label:<15} mAP50 {metrics['mAP50']:.4f}  mAP50-95 {metrics['mAP50-95']:.4f}")
        log(f"mAPs agree within {MAP_TOLERANCE}: {'yes' if report.map_agrees else 'NO'}")
    report.seconds = round(time.perf_counter() - started, 2)
    return report
