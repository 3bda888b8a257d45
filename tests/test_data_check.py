"""The label and image check: one warning per bad image naming file and line, exactly those left out,
the cache beside the labels, --min-items, the check-data and demo-data commands, and no torch import."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from yolotui.datasets import check_labels, list_images, load_data_yaml, make_demo_dataset
from yolotui.datasets.check import cache_path_for
from yolotui.errors import UserError

GOOD = {
    "good_one": "0 0.5 0.5 0.2 0.2\n",
    "good_two": "1 0.25 0.25 0.2 0.3\n2 0.75 0.75 0.1 0.1\n",
    "good_polygon": "2 0.1 0.1 0.5 0.1 0.3 0.6\n",  # a segment polygon becomes its box
    "empty": "",
    "background": None,  # no label file at all
}
# name -> (label text, the warning's specific part); the image itself is fine unless said otherwise
BAD = {
    "bad_class": ("1 0.5 0.5 0.2 0.2\n3 0.5 0.5 0.1 0.1\n", "line 2: class id 3 outside [0, 3)"),
    "bad_coord": ("0 1.2 0.5 0.1 0.1\n", "line 1: coordinate 1.2 outside [0, 1]"),
    "bad_columns": ("0 0.5 0.5 0.1\n", "line 1: 4 columns, expected 5"),
    "bad_duplicate": ("0 0.5 0.5 0.2 0.2\n1 0.1 0.1 0.1 0.1\n0 0.5 0.5 0.2 0.2\n", "line 3: duplicates line 1"),
    "bad_number": ("0 0.5 abc 0.1 0.1\n", "line 1: 'abc' is not a number"),
    "bad_image": ("0 0.5 0.5 0.2 0.2\n", "corrupt image"),
}


def _write_image(path: Path, seed: int) -> None:
    rng = np.random.default_rng(seed)
    cv2.imwrite(str(path), rng.integers(0, 255, (48, 64, 3), dtype=np.uint8))


@pytest.fixture
def bad_set(tmp_path) -> Path:
    images, labels = tmp_path / "images" / "train", tmp_path / "labels" / "train"
    images.mkdir(parents=True)
    labels.mkdir(parents=True)
    for i, (name, text) in enumerate({**GOOD, **{k: v[0] for k, v in BAD.items()}}.items()):
        if name == "bad_image":
            (images / f"{name}.jpg").write_bytes(b"\xff\xd8 this is not a JPEG at all" * 4)
        else:
            _write_image(images / f"{name}.png", i)
        if text is not None:
            (labels / f"{name}.txt").write_text(text)
    (tmp_path / "data.yaml").write_text("train: images/train\nval: images/train\nnames: [a, b, c]\n")
    return tmp_path


def _stem(path: str) -> str:
    return Path(path).stem


def test_each_bad_case_one_warning_and_exactly_those_left_out(bad_set):
    images = list_images([str(bad_set / "images" / "train")])
    report = check_labels(images, nc=3, cache=False)
    assert sorted(_stem(p) for p, _ in report.usable) == sorted(GOOD)
    assert len(report.warnings) == len(BAD)
    for name, (_, problem) in BAD.items():
        lines = [w for w in report.warnings if f"/{name}." in w]
        assert len(lines) == 1, (name, report.warnings)
        line = lines[0]
        assert "\n" not in line and problem in line and "left out" in line
        image = next(p for p in images if _stem(p) == name)
        assert line.startswith(f"WARNING {image}:")
        if name != "bad_image":
            assert str(bad_set / "labels" / "train" / f"{name}.txt") in line
    assert (report.found, report.missing, report.empty, report.corrupt, report.duplicates) == (3, 1, 1, 6, 1)
    labels = dict((_stem(p), lb) for p, lb in report.usable)
    assert labels["good_two"].shape == (2, 5) and labels["background"].shape == (0, 5)
    np.testing.assert_allclose(labels["good_polygon"], [[2, 0.3, 0.35, 0.4, 0.5]], atol=1e-6)
    assert "3 labelled, 1 missing labels (background), 1 empty, 6 corrupt" in report.summary


def test_cache_is_reused_and_rechecked_when_a_file_changes(bad_set):
    images = list_images([str(bad_set / "images" / "train")])
    first = check_labels(images, nc=3)
    assert not first.cache_hit and Path(first.cache_path) == bad_set / "labels" / "train.cache.json"
    assert cache_path_for(images) == Path(first.cache_path)
    second = check_labels(images, nc=3)
    assert second.cache_hit and second.warnings == first.warnings
    assert [p for p, _ in second.usable] == [p for p, _ in first.usable]
    fixed = bad_set / "labels" / "train" / "bad_class.txt"
    fixed.write_text("1 0.5 0.5 0.2 0.2\n2 0.5 0.5 0.1 0.1\n")
    os.utime(fixed, ns=(1_000_000_000, 1_000_000_000))
    third = check_labels(images, nc=3)
    assert not third.cache_hit and third.corrupt == first.corrupt - 1
    assert "bad_class" in {_stem(p) for p, _ in third.usable}
    assert not check_labels(images, nc=4).cache_hit  # nc is part of the key


def test_min_items_filters(bad_set):
    images = list_images([str(bad_set / "images" / "train")])
    report = check_labels(images, nc=3, cache=False, min_items=2)
    assert [_stem(p) for p, _ in report.usable] == ["good_two"]
    assert report.below_min_items == 4 and "4 below --min-items" in report.summary


def test_no_usable_image_is_an_error(tmp_path):
    (tmp_path / "images").mkdir()
    (tmp_path / "images" / "x.jpg").write_bytes(b"garbage")
    report = check_labels([str(tmp_path / "images" / "x.jpg")], nc=1, cache=False)
    assert not report.usable and report.corrupt == 1
    with pytest.raises(UserError) as err:
        report.require_usable("train")
    assert err.value.exit_code == 1 and "no usable image" in str(err.value)


def test_missing_image_in_a_list_file(tmp_path):
    (tmp_path / "list.txt").write_text("./images/gone.jpg\n")
    images = list_images([str(tmp_path / "list.txt")])
    report = check_labels(images, nc=1, cache=False)
    assert report.warnings == [f"WARNING {tmp_path / 'images' / 'gone.jpg'}: image file not found; image left out"]


def test_check_data_command(bad_set, yolotui_cmd, cli_env):
    proc = subprocess.run([*yolotui_cmd, "check-data", str(bad_set), "--split", "train"], capture_output=True,
                          text=True, env=cli_env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.splitlines()
    assert sum("WARNING" in line for line in out) == len(BAD)
    assert out[-1].startswith("train: 11 images: 3 labelled")
    proc = subprocess.run([*yolotui_cmd, "check-data", str(bad_set / "data.yaml"), "--json"], capture_output=True,
                          text=True, env=cli_env, timeout=60)
    data = json.loads(proc.stdout)
    assert data["splits"]["train"]["usable"] == 5 and data["splits"]["val"]["corrupt"] == 6


def test_check_data_exit_status_one_when_nothing_usable(tmp_path, yolotui_cmd, cli_env):
    (tmp_path / "images").mkdir()
    (tmp_path / "images" / "x.jpg").write_bytes(b"garbage")
    (tmp_path / "data.yaml").write_text("train: images\nval: images\nnames: [a]\n")
    proc = subprocess.run([*yolotui_cmd, "check-data", str(tmp_path)], capture_output=True, text=True,
                          env=cli_env, timeout=60)
    assert proc.returncode == 1
    assert "no usable image" in proc.stderr and "x.jpg: corrupt image" in proc.stdout


def test_check_data_bad_yaml_is_one_line(tmp_path, yolotui_cmd, cli_env):
    (tmp_path / "data.yaml").write_text("val: .\nnames: [a]\n")
    proc = subprocess.run([*yolotui_cmd, "check-data", str(tmp_path / "data.yaml")], capture_output=True,
                          text=True, env=cli_env, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "'train' is missing" in proc.stderr


def test_demo_data_is_valid_varied_and_reproducible(tmp_path):
    yaml_a = make_demo_dataset(tmp_path / "a", n_train=24, n_val=4, img=96, seed=3)
    yaml_b = make_demo_dataset(tmp_path / "b", n_train=24, n_val=4, img=96, seed=3)
    cfg = load_data_yaml(yaml_a)
    assert cfg.nc == 5 and len(cfg.names) == 5
    report = check_labels(list_images(cfg.train), cfg.nc, cache=False)
    assert report.images == 24 and not report.warnings and len(report.usable) == 24
    classes = np.concatenate([lb[:, 0] for _, lb in report.usable])
    assert len(set(classes.tolist())) >= 4 and report.boxes >= 24
    sizes = np.concatenate([lb[:, 3] for _, lb in report.usable])
    assert sizes.min() < 0.15 and sizes.max() > 0.3
    for rel in ("images/train/train_00007.jpg", "labels/train/train_00007.txt", "labels/val/val_00001.txt"):
        assert (yaml_a.parent / rel).read_bytes() == (yaml_b.parent / rel).read_bytes()
    assert (yaml_a.parent / "images/train/train_00007.jpg").read_bytes() != \
        (yaml_a.parent / "images/train/train_00008.jpg").read_bytes()


def test_demo_data_command_and_no_torch(tmp_path, yolotui_cmd, cli_env):
    proc = subprocess.run([*yolotui_cmd, "demo-data", str(tmp_path / "demo"), "--train", "8", "--val", "2",
                           "--img", "64", "--seed", "1"], capture_output=True, text=True, env=cli_env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "demo" / "data.yaml").is_file()
    assert len(list((tmp_path / "demo" / "images" / "train").glob("*.jpg"))) == 8
    code = ("import sys, runpy; sys.argv = ['yolotui', 'check-data', sys.argv[1]]\n"
            "from yolotui.cli import main\nrc = main(sys.argv[1:])\n"
            "import yolotui.datasets.demo, yolotui.commands.demo_data\n"
            "bad = [m for m in sys.modules if m.split('.')[0] in ('torch', 'torchvision') or "
            "m.startswith('yolotui.engine')]\nassert not bad, bad\nsys.exit(rc)")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "demo")], capture_output=True, text=True,
                          env=cli_env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "train: 8 images" in proc.stdout
