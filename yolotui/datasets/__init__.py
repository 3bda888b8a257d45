"""YOLO-format data sets without torch: data.yaml, image listing, label checks, demo data.

The TUI's new-run wizard and `yolotui check-data` use this package; it never imports torch or
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
