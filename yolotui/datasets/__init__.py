"""YOLO-format data sets without torch: data.yaml, image listing, label checks, demo data.

config.py loads data.yaml (official and ultralytics forms); files.py lists images and maps them to label
paths; check.py checks labels and images (cached beside the labels); demo.py draws the demo data set of
coloured shapes. The TUI's new-run wizard and `yolotui check-data` use this package; it never imports torch or
yolotui.engine (the augmenting loaders live in yolotui.engine.data).
"""

from yolotui.datasets.check import CheckReport, check_labels
from yolotui.datasets.config import DataConfig, load_data_yaml
from yolotui.datasets.files import IMAGE_SUFFIXES, label_path_for, list_images

__all__ = ["IMAGE_SUFFIXES", "CheckReport", "DataConfig", "check_labels", "label_path_for", "list_images",
           "load_data_yaml", "make_demo_dataset"]


def make_demo_dataset(*args, **kwargs):
    """Generate the demo data set of coloured shapes; see yolotui.datasets.demo.make_demo_dataset."""
    from yolotui.datasets.demo import make_demo_dataset as _make

    return _make(*args, **kwargs)
