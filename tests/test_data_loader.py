"""Determinism of the loader: byte-identical batches with 0, 1 and 2 workers and after restarting an
epoch at batch k; sampler order per (seed, epoch, rank, world size); close_mosaic; the batch dict."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from yolotui.datasets import check_labels, list_images, load_data_yaml, make_demo_dataset
from yolotui.engine.data import (
    AUGMENT_DEFAULTS,
    DeterministicSampler,
    YoloDataset,
    build_loader,
    mosaic_for_epoch,
    set_loader_epoch,
)

torch.set_num_threads(1)
HYP = {**AUGMENT_DEFAULTS, "degrees": 10.0, "shear": 2.0, "flipud": 0.5, "mixup": 0.5}
BATCH = 3


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    yaml_path = make_demo_dataset(tmp_path_factory.mktemp("demo"), n_train=11, n_val=2, img=64, seed=0)
    cfg = load_data_yaml(yaml_path)
    return check_labels(list_images(cfg.train), cfg.nc, cache=False)


def _epoch_batches(report, workers, epoch, start_batch=0, mosaic=True, seed=7):
    ds = YoloDataset(report, imgsz=64, augment=True, hyp=HYP, seed=seed)
    loader = build_loader(ds, BATCH, workers=workers, shuffle=True, seed=seed, start_batch=start_batch)
    assert loader.num_workers == workers
    set_loader_epoch(loader, epoch, mosaic)
    return [(b["img"].numpy().tobytes(), b["targets"].numpy().tobytes(), b["indices"]) for b in loader]


def test_same_batches_with_0_1_2_workers_and_after_restart(report):
    reference = _epoch_batches(report, workers=0, epoch=2)
    assert len(reference) == 4  # 11 images, batch 3
    for workers in (1, 2):
        assert _epoch_batches(report, workers=workers, epoch=2) == reference
    for k in (1, 3):
        assert _epoch_batches(report, workers=2, epoch=2, start_batch=k) == reference[k:]
    assert _epoch_batches(report, workers=0, epoch=2, start_batch=2) == reference[2:]
    other_epoch = _epoch_batches(report, workers=0, epoch=3)
    assert [b[2] for b in other_epoch] != [b[2] for b in reference]
    assert [b[0] for b in other_epoch] != [b[0] for b in reference]


def test_sample_is_pure_function_of_seed_epoch_index(report):
    a = YoloDataset(report, imgsz=64, augment=True, hyp=HYP, seed=1)
    b = YoloDataset(report, imgsz=64, augment=True, hyp=HYP, seed=1)
    a.set_epoch(5)
    b.set_epoch(0)
    _ = [b[i] for i in range(len(b))]  # history of other samples and epochs does not matter
    b.set_epoch(5)
    for i in (4, 0, 7):
        x, y = a[i], b[i]
        assert torch.equal(x[0], y[0]) and torch.equal(x[1], y[1])
    c = YoloDataset(report, imgsz=64, augment=True, hyp=HYP, seed=2)
    c.set_epoch(5)
    assert not torch.equal(c[4][0], a[4][0])


def test_skip_applies_to_one_iteration_only(report):
    ds = YoloDataset(report, imgsz=64, augment=False, seed=0)
    loader = build_loader(ds, BATCH, workers=0, shuffle=True, seed=3, start_batch=2, epoch=1)
    first = [b["indices"] for b in loader]
    second = [b["indices"] for b in loader]
    assert len(first) == 2 and len(second) == 4 and second[2:] == first
    assert len(loader) == 4  # numbering stays that of the full epoch


def test_batch_dict(report):
    ds = YoloDataset(report, imgsz=64, augment=False, seed=0)
    batch = next(iter(build_loader(ds, 4, workers=0, shuffle=False)))
    assert set(batch) == {"img", "targets", "paths", "ori_shapes", "ratio_pad", "indices"}
    assert batch["img"].dtype == torch.uint8 and batch["img"].shape == (4, 3, 64, 64)
    targets = batch["targets"]
    assert targets.dtype == torch.float32 and targets.shape[1] == 6
    assert batch["indices"] == [0, 1, 2, 3] and batch["paths"] == [p for p, _ in report.usable[:4]]
    counts = [len(report.usable[i][1]) for i in range(4)]
    assert targets[:, 0].tolist() == [float(i) for i, n in enumerate(counts) for _ in range(n)]
    expected = np.concatenate([report.usable[i][1] for i in range(4)])
    np.testing.assert_allclose(targets[:, 1:].numpy(), expected, atol=2e-3)  # letterbox of a square: same boxes
    assert batch["ori_shapes"] == [(64, 64)] * 4
    assert batch["ratio_pad"][0] == ((1.0, 1.0), (0.0, 0.0))


def test_sampler_ranks_partition_and_pad():
    n, world = 10, 4
    samplers = [DeterministicSampler(n, seed=5, rank=r, world_size=world) for r in range(world)]
    for s in samplers:
        s.set_epoch(3)
    orders = [list(s) for s in samplers]
    assert all(len(o) == 3 == len(s) for o, s in zip(orders, samplers))
    flat = [i for o in orders for i in o]
    assert set(flat) == set(range(n)) and len(flat) == 12  # 2 padded by wrapping around
    again = DeterministicSampler(n, seed=5, rank=2, world_size=world)
    again.set_epoch(3)
    assert list(again) == orders[2]
    again.set_epoch(4)
    assert list(again) != orders[2]
    dropped = [list(DeterministicSampler(n, seed=5, rank=r, world_size=world, drop_last=True)) for r in range(world)]
    assert all(len(o) == 2 for o in dropped) and len({i for o in dropped for i in o}) == 8
    assert list(DeterministicSampler(5, shuffle=False)) == [0, 1, 2, 3, 4]


def test_mosaic_for_epoch_after_resume():
    assert [mosaic_for_epoch(e, 10, 3) for e in range(10)] == [True] * 7 + [False] * 3
    assert all(mosaic_for_epoch(e, 10, 0) for e in range(10))


def test_close_mosaic_through_the_loader(report):
    open_batches = _epoch_batches(report, workers=1, epoch=8, mosaic=True)
    closed_batches = _epoch_batches(report, workers=1, epoch=8, mosaic=False)
    assert [b[2] for b in open_batches] == [b[2] for b in closed_batches]  # same order
    assert [b[0] for b in open_batches] != [b[0] for b in closed_batches]
    ds = YoloDataset(report, imgsz=64, augment=True, hyp=HYP, seed=7)
    loader = build_loader(ds, BATCH, workers=1, seed=7)
    set_loader_epoch(loader, 8, mosaic=False)
    assert all(r is not None for b in loader for r in b["ratio_pad"])


def test_from_config_checks_the_split(tmp_path):
    cfg = load_data_yaml(make_demo_dataset(tmp_path / "d", n_train=4, n_val=3, img=64, seed=1))
    ds = YoloDataset.from_config(cfg, "val", imgsz=64)
    assert len(ds) == 3 and not ds.augment
    for image in list_images(cfg.val):
        with open(image, "wb") as handle:
            handle.write(b"broken")
    from yolotui.errors import UserError

    with pytest.raises(UserError, match="'val': no usable image"):
        YoloDataset.from_config(cfg, "val", imgsz=64)
