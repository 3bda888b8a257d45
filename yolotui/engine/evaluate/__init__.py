"""Validation: running a model over the val set, NMS, AP metrics (official and pycocotools-style), COCO JSON."""
