"""data.yaml loading: the official and ultralytics forms, and errors that name the key and the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from yolotui.datasets import label_path_for, list_images, load_data_yaml
from yolotui.errors import UserError


def _tree(root: Path) -> None:
    for split in ("train", "val"):
        (root / "images" / split).mkdir(parents=True)
        (root / "images" / split / f"{split}1.jpg").write_bytes(b"x")
        (root / "images" / split / "sub").mkdir()
        (root / "images" / split / "sub" / f"{split}2.PNG").write_bytes(b"x")
        (root / "images" / split / "notes.md").write_text("not an image")


def test_folder_form_with_names_list(tmp_path):
    _tree(tmp_path)
    (tmp_path / "data.yaml").write_text("train: images/train\nval: images/val\nnc: 2\nnames: [cat, dog]\n")
    cfg = load_data_yaml(tmp_path / "data.yaml")
    assert cfg.root == str(tmp_path.resolve())
    assert cfg.train == [str((tmp_path / "images/train").resolve())]
    assert cfg.test == []
    assert (cfg.nc, cfg.names) == (2, ["cat", "dog"])
    images = list_images(cfg.train)
    assert sorted(Path(p).name for p in images) == ["train1.jpg", "train2.PNG"]  # recursive, notes.md skipped
    assert images == sorted(images)


def test_ultralytics_form_path_dict_names_and_lists(tmp_path):
    data_root = tmp_path / "sets" / "pets"
    _tree(data_root)
    (tmp_path / "cfg").mkdir()
    (data_root / "train.txt").write_text("./images/train/train1.jpg\nimages/val/val1.jpg\n\n")
    (tmp_path / "cfg" / "pets.yaml").write_text(
        f"path: {data_root}\ntrain: [train.txt, images/val/sub]\nval: images/val\ntest: images/val\n"
        "names:\n  0: cat\n  1: dog\n  2: bird\n")
    cfg = load_data_yaml(tmp_path / "cfg" / "pets.yaml")
    assert cfg.nc == 3 and cfg.names == ["cat", "dog", "bird"]
    assert len(cfg.train) == 2 and cfg.test
    images = list_images(cfg.train)
    assert sorted(Path(p).name for p in images) == ["train1.jpg", "val1.jpg", "val2.PNG"]


def test_official_relative_path_resolves_from_repo_root(tmp_path, monkeypatch):
    # official layout: repo/data/coco.yaml with `path: ../datasets/coco` meant from the repo root
    _tree(tmp_path / "datasets" / "coco")
    (tmp_path / "repo" / "data").mkdir(parents=True)
    (tmp_path / "repo" / "data" / "coco.yaml").write_text(
        "path: ../datasets/coco\ntrain: images/train\nval: images/val\nnames: [a]\n")
    cfg = load_data_yaml(tmp_path / "repo" / "data" / "coco.yaml")
    assert cfg.root == str((tmp_path / "datasets" / "coco").resolve())


@pytest.mark.parametrize("text, key", [
    ("val: images/val\nnames: [a]\n", "'train' is missing"),
    ("train: images/train\nnames: [a]\n", "'val' is missing"),
    ("train: images/nowhere\nval: images/val\nnames: [a]\n", "'train' names images/nowhere"),
    ("train: images/train\nval: [images/val, images/gone]\nnames: [a]\n", "'val' names images/gone"),
    ("train: images/train\nval: images/val\nnc: 3\nnames: [a, b]\n", "'nc' is 3 but 'names' lists 2"),
    ("train: images/train\nval: images/val\n", "'names' is missing"),
    ("train: images/train\nval: images/val\nnames: {0: a, 2: b}\n", "'names' keys must be 0..1"),
    ("path: nowhere\ntrain: images/train\nval: images/val\nnames: [a]\n", "'path' names nowhere"),
    ("train: images/train\nval: images/val\nnames: [a\n", "not valid YAML"),
])
def test_errors_name_key_and_file(tmp_path, text, key):
    _tree(tmp_path)
    yaml_file = tmp_path / "bad.yaml"
    yaml_file.write_text(text)
    with pytest.raises(UserError) as err:
        load_data_yaml(yaml_file)
    message = str(err.value)
    assert str(yaml_file) in message and key in message
    assert "\n" not in message


def test_missing_yaml_file(tmp_path):
    with pytest.raises(UserError, match="data.yaml not found"):
        load_data_yaml(tmp_path / "none.yaml")


def test_nc_alone_gives_numbered_names(tmp_path):
    _tree(tmp_path)
    (tmp_path / "d.yaml").write_text("train: images/train\nval: images/val\nnc: 3\n")
    assert load_data_yaml(tmp_path / "d.yaml").names == ["0", "1", "2"]


@pytest.mark.parametrize("image, label", [
    ("/d/images/train/a.jpg", "/d/labels/train/a.txt"),
    ("/d/images/x/images/b.png", "/d/images/x/labels/b.txt"),  # last `images` part only
    ("/d/pics/c.jpeg", "/d/pics/c.txt"),  # no `images` part: beside the image
    ("/images/images.d/x.v1.jpg", "/labels/images.d/x.v1.txt"),
])
def test_label_path_for(image, label):
    assert label_path_for(image) == label
