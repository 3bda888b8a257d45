"""The loader's fast paths change no sample: one-table HSV, the partial mosaic canvas, channels_last collation,
persistent workers across epochs, the recently-decoded-image buffer, --cache ram and --cache disk."""

from __future__ import annotations

import os

import cv2
import numpy as np
import pytest
import torch

from yolotui.datasets import check_labels, list_images, load_data_yaml, make_demo_dataset
from yolotui.engine.data import AUGMENT_DEFAULTS, YoloDataset, build_loader, collate_batch, set_loader_epoch
from yolotui.engine.data.augment import affine_matrix, augment_hsv, mosaic_canvas, source_region, warp_image
from yolotui.engine.data.diskcache import CACHE_DIR, array_path
from yolotui.errors import UserError

torch.set_num_threads(1)
HYP = {**AUGMENT_DEFAULTS, "degrees": 10.0, "mixup": 0.5}


@pytest.fixture()
def report(tmp_path):
    yaml_path = make_demo_dataset(tmp_path / "demo", n_train=7, n_val=1, img=64, seed=0)
    cfg = load_data_yaml(yaml_path)
    return check_labels(list_images(cfg.train), cfg.nc, cache=False)


def _samples(ds: YoloDataset, epochs=(0, 1)) -> list[tuple[bytes, bytes]]:
    out = []
    for epoch in epochs:
        ds.set_epoch(epoch, True)
        for i in range(len(ds)):
            img, labels = ds[i][:2]
            out.append((img.numpy().tobytes(), labels.numpy().tobytes()))
    return out


def _hsv_per_channel(im: np.ndarray, rng: np.random.Generator, gains_hsv: tuple[float, float, float]) -> None:
    """The split / three tables / merge formulation (the official one), in place, BGR."""
    gains = rng.uniform(-1, 1, 3) * gains_hsv + 1
    hue, sat, val = cv2.split(cv2.cvtColor(im, cv2.COLOR_BGR2HSV))
    ramp = np.arange(256, dtype=np.float64)
    tables = (((ramp * gains[0]) % 180).astype(np.uint8), np.clip(ramp * gains[1], 0, 255).astype(np.uint8),
              np.clip(ramp * gains[2], 0, 255).astype(np.uint8))
    merged = cv2.merge([cv2.LUT(c, t) for c, t in zip((hue, sat, val), tables)])
    cv2.cvtColor(merged, cv2.COLOR_HSV2BGR, dst=im)


def test_hsv_with_one_table_equals_three_tables_and_can_end_in_rgb():
    image = np.random.default_rng(0).integers(0, 256, (48, 40, 3), dtype=np.uint8)
    for seed in range(4):
        ref, bgr, rgb = image.copy(), image.copy(), image.copy()
        _hsv_per_channel(ref, np.random.default_rng(seed), (0.015, 0.7, 0.4))
        augment_hsv(bgr, np.random.default_rng(seed), 0.015, 0.7, 0.4)
        augment_hsv(rgb, np.random.default_rng(seed), 0.015, 0.7, 0.4, to_rgb=True)
        assert np.array_equal(bgr, ref) and np.array_equal(rgb, ref[..., ::-1])
        assert not np.array_equal(ref, image)


def test_the_part_of_the_mosaic_canvas_a_warp_reads_gives_the_whole_canvas_warp():
    gen = np.random.default_rng(1)
    size = 96
    tiles = [(gen.integers(0, 256, (int(gen.integers(40, 97)), 96, 3), dtype=np.uint8),
              np.array([[0, 0.5, 0.5, 0.4, 0.3]])) for _ in range(4)]
    differing = 0
    for seed in range(20):
        rng = np.random.default_rng(seed)
        centre = (int(rng.uniform(48, 144)), int(rng.uniform(48, 144)))
        matrix, _ = affine_matrix(rng, (2 * size, 2 * size), (size, size), 10.0, 0.1, 0.9, 2.0, 0.0)
        whole, boxes = mosaic_canvas(tiles, size, centre)
        region = source_region(matrix, (size, size), (2 * size, 2 * size))
        part, part_boxes = mosaic_canvas(tiles, size, centre, region)
        assert part.shape[:2] == (region[3] - region[1], region[2] - region[0])
        assert np.array_equal(part, whole[region[1]:region[3], region[0]:region[2]])
        assert np.array_equal(boxes, part_boxes)
        a = warp_image(whole, matrix, (size, size), False).astype(int)
        b = warp_image(part, matrix, (size, size), False, offset=region[:2]).astype(int)
        assert np.abs(a - b).max() <= 1  # OpenCV rounds its float coordinates: one grey level at most
        differing += int((a != b).any(-1).sum())
    assert differing < 0.01 * 20 * size * size


def test_collated_images_are_channels_last_and_equal_a_plain_stack(report):
    ds = YoloDataset(report, imgsz=64, augment=True, hyp=HYP, seed=0)
    samples = [ds[i] for i in range(3)]
    batch = collate_batch(samples)
    img = batch["img"]
    assert img.shape == (3, 3, 64, 64) and img.dtype == torch.uint8
    assert img.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(img, torch.stack([s[0] for s in samples]))
    assert torch.equal(batch["targets"][:, 0].unique(), torch.arange(3.0)[: len(batch["targets"][:, 0].unique())])


def test_a_persistent_loader_serves_every_epoch_with_the_same_workers_and_batches(report):
    from yolotui.engine.data.pipeline import epoch_loader, kept_epoch_loader, release_epoch_loader

    ds = YoloDataset(report, imgsz=64, augment=True, hyp=HYP, seed=3)
    opt = {"workers": 2, "seed": 3}
    first = epoch_loader(ds, opt, 2, epoch=0, start_batch=1, mosaic=True)
    got0 = [b["img"].numpy().tobytes() for b in first]
    pids = [w.pid for w in first._iterator._workers]
    second = epoch_loader(ds, opt, 2, epoch=1, start_batch=0, mosaic=False)
    got1 = [b["img"].numpy().tobytes() for b in second]
    assert second is first and [w.pid for w in second._iterator._workers] == pids  # workers lived on

    def reference(epoch, mosaic, start):
        plain = YoloDataset(report, imgsz=64, augment=True, hyp=HYP, seed=3)
        loader = build_loader(plain, 2, workers=0, shuffle=True, seed=3, start_batch=start)
        set_loader_epoch(loader, epoch, mosaic)
        return [b["img"].numpy().tobytes() for b in loader]

    assert got0 == reference(0, True, 1) and len(got0) == 3
    assert got1 == reference(1, False, 0) and len(got1) == 4
    assert kept_epoch_loader(ds) is first
    workers = list(first._iterator._workers)
    release_epoch_loader(ds)
    assert kept_epoch_loader(ds) is None and not any(w.is_alive() for w in workers)


def test_recent_images_and_the_ram_cache_change_no_sample_and_are_never_written(report):
    plain = YoloDataset(report, imgsz=64, augment=True, hyp=HYP, seed=5)
    plain._recent_max = 0  # decode every time
    buffered = YoloDataset(report, imgsz=64, augment=True, hyp=HYP, seed=5)
    ram = YoloDataset(report, imgsz=64, augment=True, hyp=HYP, seed=5, cache="ram")
    reference = _samples(plain)
    assert _samples(buffered) == reference and _samples(ram) == reference
    assert buffered._recent and not plain._recent
    im, _ = ram.load_image(0)
    with pytest.raises(ValueError):
        im[0, 0, 0] = 1  # cached images are read-only: no sample can change another


def test_disk_cache_writes_once_is_reused_and_rewrites_what_changed(report):
    reference = _samples(YoloDataset(report, imgsz=64, augment=True, hyp=HYP, seed=2))
    cached = YoloDataset(report, imgsz=64, augment=True, hyp=HYP, seed=2, cache="disk")
    arrays = [array_path(p, 64, True) for p in cached.paths]
    assert all(a.is_file() for a in arrays)
    assert _samples(cached) == reference
    stamps = [a.stat().st_mtime_ns for a in arrays]
    again = YoloDataset(report, imgsz=64, augment=True, hyp=HYP, seed=2, cache="disk")
    assert [a.stat().st_mtime_ns for a in arrays] == stamps  # nothing rewritten
    assert _samples(again) == reference

    arrays[1].write_bytes(b"\x93NUMPY garbage")  # a torn or foreign array: decoded again, never trusted
    assert _samples(YoloDataset(report, imgsz=64, augment=True, hyp=HYP, seed=2, cache="disk")) == reference

    image = cached.paths[2]
    cv2.imwrite(image, np.full((64, 64, 3), 7, np.uint8))  # the image changed: its array is rewritten
    os.utime(image, ns=(stamps[2] + 10**9, stamps[2] + 10**9))
    fresh = YoloDataset(report, imgsz=64, augment=True, hyp=HYP, seed=2, cache="disk")
    assert arrays[2].stat().st_mtime_ns != stamps[2]
    assert np.array_equal(np.asarray(fresh.load_image(2)[0]), np.full((64, 64, 3), 7, np.uint8))


def test_disk_cache_in_an_unwritable_place_names_the_folder(report):
    folder = os.path.dirname(report.usable[0][0])
    with open(os.path.join(folder, CACHE_DIR), "w", encoding="utf-8") as handle:
        handle.write("not a folder")
    with pytest.raises(UserError, match=r"--cache disk: cannot create .*\.yolotui-cache.*--cache ram"):
        YoloDataset(report, imgsz=64, augment=True, hyp=HYP, seed=2, cache="disk")


EXIT_SCRIPT = """
import sys
from yolotui.datasets import check_labels, list_images, load_data_yaml
from yolotui.engine.data import YoloDataset
from yolotui.engine.data.pipeline import build_datasets, epoch_loader, load_data
data = load_data({"data": sys.argv[1]})
train_set, val_loader = build_datasets(data, {"imgsz": 64, "workers": 2}, {}, 2)
for epoch in range(2):
    assert sum(len(b["indices"]) for b in epoch_loader(train_set, {"workers": 2}, 2, epoch, 0, True)) == 7
assert sum(len(b["indices"]) for b in val_loader) == 1
print("trained", flush=True)
"""


def test_persistent_workers_end_with_their_process(tmp_path):
    """The workers ignore SIGTERM (a `yolotui stop` signals the whole group), so the process must hand them their
    end-of-work marker itself at exit; multiprocessing's exit handler would otherwise wait for them forever."""
    import subprocess
    import sys
    from pathlib import Path

    yaml_path = make_demo_dataset(tmp_path / "demo", n_train=7, n_val=1, img=64, seed=0)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", EXIT_SCRIPT, str(yaml_path)], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and "trained" in done.stdout, done.stderr[-2000:]
