"""`yolotui val` scores a fixture as the official YOLOv9 validator did (numbers recorded in expected.json).

The fixture (tests/fixtures/val_parity) holds ten images of several aspect ratios, their labels, a small
gelan-t trained a little by yolotui (fp16 yolotui checkpoint), and the P, R, mAP50, mAP50-95 the official
val.py printed for the same weights (bench/make_val_parity_fixture.py made it by running the official code
outside the project). Also the pieces of that pipeline on their own: rectangular batches, multi-label NMS,
the official matching and AP.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from yolotui.cli import main
from yolotui.engine.data.dataset import YoloDataset, rect_batches
from yolotui.engine.evaluate.metrics_official import (
    OfficialDetectionMetrics,
    area_under_envelope,
    match_official,
)
from yolotui.engine.evaluate.postprocess import non_max_suppression

FIXTURE = Path(__file__).parent / "fixtures" / "val_parity"


def _data_yaml(tmp_path: Path) -> Path:
    names = ["circle", "square", "triangle", "diamond", "cross"]
    path = tmp_path / "data.yaml"
    path.write_text(f"path: {FIXTURE}\ntrain: images\nval: images\nnc: 5\nnames: {names}\n")
    return path


def _val(tmp_path, capsys, *extra: str) -> dict:
    expected = json.loads((FIXTURE / "expected.json").read_text())
    argv = ["val", "--weights", str(FIXTURE / "weights.pt"), "--data", str(_data_yaml(tmp_path)),
            "--img", str(expected["imgsz"]), "--batch", str(expected["batch"]), "--device", "cpu",
            "--workers", "0", "--json", *extra]
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_val_matches_the_official_validator_on_the_fixture(tmp_path, capsys):
    expected = json.loads((FIXTURE / "expected.json").read_text())
    assert expected["mAP50"] > 0.01, "the fixture model must detect something for the comparison to mean much"
    got = _val(tmp_path, capsys)
    ours = {"P": got["precision"], "R": got["recall"], "mAP50": got["mAP50"], "mAP50-95": got["mAP50-95"]}
    for key, value in ours.items():
        assert abs(value - expected[key]) <= expected["tolerance"], (key, value, expected[key])


def test_single_label_keeps_fewer_predictions_and_scores_differently(tmp_path, capsys):
    multi = _val(tmp_path, capsys)
    single = _val(tmp_path, capsys, "--single-label")
    assert (single["mAP50"], single["mAP50-95"]) != (multi["mAP50"], multi["mAP50-95"])


def test_rect_batches_follow_the_official_rule():
    # (h, w): three landscape, one square, two portrait; batches of 2 at 160 px, stride 32, pad 0.5
    shapes = [(120, 160), (160, 160), (90, 150), (160, 96), (100, 160), (160, 120)]
    order, batch_shapes = rect_batches(shapes, 2, 160, 32, 0.5)
    aspects = [shapes[i][0] / shapes[i][1] for i in order]
    assert aspects == sorted(aspects)
    # batch 0: aspects 0.6, 0.625 -> h = ceil(0.625 * 5 + 0.5) * 32 = 128, w = ceil(5.5) * 32 = 192
    assert batch_shapes.tolist() == [[128, 192], [192, 192], [192, 160]]  # last: w = ceil(0.75 * 5 + 0.5) * 32


def test_rect_dataset_letterboxes_each_batch_to_its_shape(tmp_path):
    import cv2

    items = []
    for i, (h, w) in enumerate([(60, 100), (100, 60), (50, 100)]):
        path = tmp_path / f"im{i}.png"
        cv2.imwrite(str(path), np.full((h, w, 3), 50 * i, np.uint8))
        items.append((str(path), np.array([[0, 0.5, 0.5, 0.2, 0.2]], np.float32)))
    dataset = YoloDataset(items, imgsz=64, rect=True, batch_size=2, stride=32, pad=0.5)
    sizes = [tuple(dataset[i][0].shape[1:]) for i in range(len(dataset))]
    assert sizes == [(64, 96), (64, 96), (96, 64)]  # two landscapes share a batch, the portrait gets its own
    img, _labels, _path, shape0, ratio_pad, _ = dataset[0]
    assert shape0 == (50, 100) and ratio_pad[0] == (0.64, 0.64)
    assert int(img[0, 0, 0]) == 114 and int(img[0, 32, 48]) != 114  # grey padding, image in the middle


def test_multi_label_nms_keeps_every_class_over_the_threshold():
    # one box, class scores 0.6 and 0.3: multi-label keeps both, single-label only the best
    pred = torch.tensor([[[50.0], [50.0], [20.0], [20.0], [0.6], [0.3], [0.0005]]])
    (multi,) = non_max_suppression(pred, conf_thres=0.001, multi_label=True)
    (single,) = non_max_suppression(pred, conf_thres=0.001, multi_label=False)
    assert multi[:, 5].tolist() == [0.0, 1.0] and torch.allclose(multi[:, 4], torch.tensor([0.6, 0.3]))
    assert single[:, 5].tolist() == [0.0]


def test_official_matching_gives_a_label_to_its_first_detection_over_the_threshold():
    labels = torch.tensor([[0, 0.0, 0.0, 10.0, 10.0]])
    detections = torch.tensor([[0.0, 0.0, 10.0, 9.0, 0.9, 0], [0.0, 0.0, 10.0, 10.0, 0.8, 0],
                               [0.0, 0.0, 10.0, 10.0, 0.7, 1]])
    correct = match_official(detections, labels, torch.linspace(0.5, 0.95, 10))
    # as the official process_batch: after keeping each detection's best pair, a label goes to the first
    # (most confident) detection, so the IoU-0.9 box wins up to 0.9 and the exact one only at 0.95
    assert correct[0].tolist() == [True] * 9 + [False] and correct[1].tolist() == [False] * 9 + [True]
    assert not correct[2].any()  # another class never matches


def test_official_ap_is_the_trapezoid_area_of_the_envelope():
    # precision 1 up to recall 0.5, then linearly down to 0.5 at recall 1 (0.5 + 0.375), less the last
    # 1/100 step where the sentinel (recall 1, precision 0) takes over: 0.8725
    assert abs(area_under_envelope(np.array([0.5, 1.0]), np.array([1.0, 0.5])) - 0.8725) < 1e-9
    metrics = OfficialDetectionMetrics(1)
    metrics.update(torch.tensor([[0.0, 0.0, 10.0, 10.0, 0.9, 0]]), torch.tensor([[0, 0.0, 0.0, 10.0, 10.0]]))
    result = metrics.compute()
    assert result["mAP50"] > 0.99 and result["mAP50-95"] > 0.99
    empty = OfficialDetectionMetrics(1)
    empty.update(torch.zeros((0, 6)), torch.tensor([[0, 0.0, 0.0, 10.0, 10.0]]))
    assert empty.compute()["mAP50"] == 0.0 and empty.compute()["instances"] == 1
