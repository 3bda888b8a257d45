"""Validation: running a model over the val set, NMS, AP metrics (official and pycocotools-style), COCO JSON.

validate.py runs and scores a model; postprocess.py filters and NMS-es the head output; metrics.py computes
COCO-style metrics, metrics_official.py the official validator's; coco_json.py writes COCO-format JSON.
"""
