"""YOLO-format data sets: data.yaml, label checks, deterministic augmentation, loaders, demo data."""
