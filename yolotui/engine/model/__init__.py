"""YOLOv9 and GELAN models: building blocks, heads, the YAML builder, fusing/conversion and FLOPs.

conv.py and blocks.py (building blocks), heads.py (DFL, DDetect, DualDDetect), yolo.py (YoloModel), builder.py
(from an official-format YAML), convert.py (fusing, re-parameterisation, dropping the PGI branch), flops.py
and summary.py (layers, parameters, GFLOPs), gradlayout.py (gradients kept in the training memory format).
Public API: build_model, YoloModel, fuse, convert_for_inference, model_info, narrow_config.
"""

from yolotui.engine.model.builder import build_model, narrow_config
from yolotui.engine.model.convert import convert_for_inference, fuse
from yolotui.engine.model.flops import model_info
from yolotui.engine.model.yolo import YoloModel

__all__ = ["YoloModel", "build_model", "convert_for_inference", "fuse", "model_info", "narrow_config"]
