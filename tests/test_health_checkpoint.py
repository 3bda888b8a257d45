"""Checkpoint verdicts from the torch-free scanner, on fixtures written with torch."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import time
from pathlib import Path

import pytest
from _health_fixtures import save_malicious, save_official, save_yolotui, write_manifest

from yolotui.health.checkpoint import inspect_checkpoint
from yolotui.health.pickle_scan import PickleScanError, scan_pickle
from yolotui.health.verdict import diagnose_checkpoint


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("good") / "last.pt"
    save_yolotui(path, epoch=3, epochs=10, step=0)
    return path


def test_good_checkpoint_is_resumable_with_its_values(good):
    verdict = diagnose_checkpoint(good)
    assert verdict.verdict == "resumable", verdict.reasons
    assert (verdict.epoch, verdict.step, verdict.total_epochs) == (3, 0, 10)
    assert verdict.best_fitness == pytest.approx(0.125)
    info = verdict.info
    assert info.kind == "yolotui" and info.crc_ok and info.manifest_ok
    assert info.has_optimizer and info.has_ema and info.has_scheduler
    assert {"model", "ema", "optimizer", "opt", "hyp", "versions"} <= set(info.keys)
    assert info.opt["batch_size"] == 8 and info.hyp["lr0"] == 0.01
    assert info.versions["torch"]
    assert verdict.age_s is not None and 0 <= verdict.age_s < 3600


def test_mid_epoch_checkpoint_reports_the_batch(tmp_path):
    path = tmp_path / "last.pt"
    save_yolotui(path, epoch=2, epochs=5, step=7)
    verdict = diagnose_checkpoint(path)
    assert verdict.verdict == "resumable" and verdict.step == 7
    assert any("2/5 epochs done + 7 batches of epoch 3" in reason for reason in verdict.reasons)


def test_all_epochs_done_is_finished(tmp_path):
    path = tmp_path / "last.pt"
    save_yolotui(path, epoch=10, epochs=10)
    assert diagnose_checkpoint(path).verdict == "finished"
    # Extending: judged against a larger planned total, the same file is resumable again.
    assert diagnose_checkpoint(path, total_epochs=15).verdict == "resumable"


@pytest.mark.parametrize("fraction", [i / 41 for i in range(41)])
def test_truncated_at_any_offset_is_corrupt(good, tmp_path, fraction):
    data = good.read_bytes()
    cut = int(len(data) * fraction)
    path = tmp_path / "last.pt"
    path.write_bytes(data[:cut])  # no manifest: the container alone must tell
    verdict = diagnose_checkpoint(path)
    assert verdict.verdict == "corrupt", (cut, verdict.reasons)


def test_truncated_last_byte_and_first_bytes_are_corrupt(good, tmp_path):
    data = good.read_bytes()
    for cut in (1, 2, 3, 4, 30, len(data) - 1, len(data) - 22):
        path = tmp_path / f"cut{cut}.pt"
        path.write_bytes(data[:cut])
        assert diagnose_checkpoint(path).verdict == "corrupt", cut


def test_flipped_byte_in_tensor_data_fails_crc(good, tmp_path):
    data = bytearray(good.read_bytes())
    offset = data.index(b"data/0") + 200  # inside the first storage's bytes, past its local header
    data[offset] ^= 0xFF
    path = tmp_path / "last.pt"
    path.write_bytes(bytes(data))
    verdict = diagnose_checkpoint(path)
    assert verdict.verdict == "corrupt"
    assert verdict.info.crc_ok is False and any("CRC" in reason for reason in verdict.reasons)


@pytest.mark.parametrize("fraction", [i / 23 for i in range(1, 23)])
def test_flipped_byte_anywhere_is_caught_with_the_manifest(good, tmp_path, fraction):
    data = bytearray(good.read_bytes())
    offset = int(len(data) * fraction)
    data[offset] ^= 0x01
    path = tmp_path / "last.pt"
    path.write_bytes(bytes(data))
    shutil.copy(str(good) + ".json", str(path) + ".json")
    assert diagnose_checkpoint(path).verdict == "corrupt", offset


def test_manifest_size_mismatch_is_corrupt(tmp_path):
    path = tmp_path / "last.pt"
    save_yolotui(path)
    manifest = json.loads(Path(str(path) + ".json").read_text())
    manifest["bytes"] += 1
    Path(str(path) + ".json").write_text(json.dumps(manifest))
    os.utime(path, (time.time() - 10, time.time() - 10))  # manifest newer than the file: not a stale one
    verdict = diagnose_checkpoint(path)
    assert verdict.verdict == "corrupt" and any("manifest" in r for r in verdict.reasons)


def test_without_optimizer_is_incomplete(tmp_path):
    path = tmp_path / "last.pt"
    save_yolotui(path, optimizer=False)
    verdict = diagnose_checkpoint(path)
    assert verdict.verdict == "incomplete"
    assert any("optimizer" in reason for reason in verdict.reasons)


def test_finished_official_checkpoint(tmp_path):
    path = tmp_path / "best.pt"
    save_official(path, finished=True, epochs=5)
    verdict = diagnose_checkpoint(path)
    assert verdict.verdict == "finished", verdict.reasons
    info = verdict.info
    assert info.kind == "official" and info.epoch == -1 and not info.has_optimizer
    assert "models.yolo.DetectionModel" in info.pickled_classes
    assert info.unsafe_globals == []
    assert verdict.total_epochs == 5 and verdict.epoch == 5


def test_official_mid_run_checkpoint_is_resumable(tmp_path):
    path = tmp_path / "last.pt"
    save_official(path, finished=False, epoch=2, epochs=5)
    verdict = diagnose_checkpoint(path)
    assert verdict.verdict == "resumable", verdict.reasons
    assert verdict.epoch == 3  # official epoch 2 = the third epoch completed
    assert verdict.best_fitness == pytest.approx(0.25)


def test_plain_text_file_is_foreign(tmp_path):
    path = tmp_path / "last.pt"
    path.write_text("this is not a checkpoint\n")
    verdict = diagnose_checkpoint(path)
    assert verdict.verdict == "foreign"


def test_bare_state_dict_is_foreign_with_advice(tmp_path):
    import torch
    from _health_fixtures import tiny_state_dict

    path = tmp_path / "weights.pt"
    torch.save(tiny_state_dict(), path)
    verdict = diagnose_checkpoint(path)
    assert verdict.verdict == "foreign" and "state_dict" in verdict.reasons[0]


def test_missing_file(tmp_path):
    assert diagnose_checkpoint(tmp_path / "nope.pt").verdict == "missing"


@pytest.mark.parametrize("zipped", [True, False])
def test_malicious_pickle_is_foreign_and_never_runs(tmp_path, zipped):
    marker = tmp_path / "pwned"
    path = tmp_path / "last.pt"
    save_malicious(path, marker, zipped)
    verdict = diagnose_checkpoint(path)
    assert verdict.verdict == "foreign"
    assert verdict.info.unsafe_globals
    assert not marker.exists()
    # The payload is real: unpickling the same kind of file does create its marker.
    if not zipped:
        proof_marker, proof = tmp_path / "proof-marker", tmp_path / "proof.pkl"
        save_malicious(proof, proof_marker, zipped=False)
        pickle.loads(proof.read_bytes())
        assert proof_marker.exists()
    assert not marker.exists()


def test_corrupt_last_names_best_as_fallback(tmp_path):
    last, best = tmp_path / "last.pt", tmp_path / "best.pt"
    save_yolotui(best, epoch=2, epochs=10)
    save_yolotui(last, epoch=4, epochs=10)
    last.write_bytes(last.read_bytes()[:5000])
    verdict = diagnose_checkpoint(last)
    assert verdict.verdict == "corrupt"
    assert verdict.fallback == str(best) and verdict.fallback_verdict == "resumable"


def test_fallback_prefers_the_most_advanced_epoch_checkpoint(tmp_path):
    last = tmp_path / "last.pt"
    save_yolotui(tmp_path / "best.pt", epoch=2, epochs=10)
    save_yolotui(tmp_path / "epoch5.pt", epoch=5, epochs=10)
    save_yolotui(tmp_path / "epoch1.pt", epoch=1, epochs=10)
    save_yolotui(last, epoch=6, epochs=10)
    data = bytearray(last.read_bytes())
    data[len(data) // 2] ^= 0xFF
    last.write_bytes(bytes(data))
    verdict = diagnose_checkpoint(last)
    assert verdict.verdict == "corrupt"
    assert Path(verdict.fallback).name == "epoch5.pt" and verdict.fallback_epoch == 5


def test_stale_manifest_is_reported_not_corrupt(tmp_path):
    path = tmp_path / "last.pt"
    old = save_yolotui(path, epoch=3)
    new_manifest = Path(str(path) + ".json").read_text()
    save_yolotui(path, epoch=4, manifest=False)  # trainer replaced the file, died before the manifest
    Path(str(path) + ".json").write_text(new_manifest)
    past = time.time() - 60
    os.utime(str(path) + ".json", (past, past))
    verdict = diagnose_checkpoint(path)
    assert old["epoch"] == 3
    assert verdict.verdict == "resumable" and verdict.epoch == 4
    assert any("older than the checkpoint" in r for r in verdict.reasons)


def test_scanner_reads_plain_values_without_executing():
    payload = pickle.dumps({"a": [1, 2.5, "x", None, True], "b": (b"\x00\x01", {"c": -7}), "big": 2**70}, protocol=4)
    value = scan_pickle(payload).value
    assert value == {"a": [1, 2.5, "x", None, True], "b": (b"\x00\x01", {"c": -7}), "big": 2**70}
    for protocol in (0, 1, 2, 3, 5):
        assert scan_pickle(pickle.dumps({"k": [1, "v", 3.5]}, protocol=protocol)).value == {"k": [1, "v", 3.5]}
    with pytest.raises(PickleScanError):
        scan_pickle(payload[:-5])


def test_inspect_reports_storage_missing_from_archive(good, tmp_path):
    import zipfile

    path = tmp_path / "last.pt"
    with zipfile.ZipFile(good) as src, zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as dst:
        for info in src.infolist():
            if not info.filename.endswith("/data/0"):
                dst.writestr(info, src.read(info))
    info = inspect_checkpoint(path)
    assert info.torn and "missing" in (info.error or "")
    assert diagnose_checkpoint(path).verdict == "corrupt"


def test_manifest_written_by_helper_matches(tmp_path):
    path = tmp_path / "x.pt"
    ckpt = save_yolotui(path, manifest=False)
    assert inspect_checkpoint(path).manifest_ok is None
    write_manifest(path, ckpt)
    assert inspect_checkpoint(path).manifest_ok is True


def test_scanner_survives_random_damage_to_a_real_data_pkl(good):
    import random
    import zipfile

    with zipfile.ZipFile(good) as archive:
        name = next(n for n in archive.namelist() if n.endswith("data.pkl"))
        original = archive.read(name)
    rng = random.Random(0)
    outcomes = set()
    for _ in range(400):
        damaged = bytearray(original)
        for _ in range(rng.randint(1, 4)):
            damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        try:
            scan_pickle(bytes(damaged))
            outcomes.add("read")
        except PickleScanError:
            outcomes.add("torn")
    assert "torn" in outcomes


def test_random_damage_anywhere_never_crashes_the_reader(good, tmp_path):
    import random

    original = good.read_bytes()
    rng = random.Random(1)
    path = tmp_path / "last.pt"
    verdicts = []
    for _ in range(150):
        damaged = bytearray(original)
        for _ in range(rng.randint(1, 3)):
            damaged[rng.randrange(len(damaged))] ^= 1 << rng.randrange(8)
        path.write_bytes(bytes(damaged))
        verdicts.append(diagnose_checkpoint(path, find_fallback=False).verdict)
    # A flip in zip padding or an unused header field can be harmless; everything else must be caught.
    assert set(verdicts) <= {"corrupt", "resumable"}
    assert verdicts.count("corrupt") > 100


def test_damaged_first_bytes_of_a_zip_are_corrupt_not_foreign(good, tmp_path):
    path = tmp_path / "last.pt"
    path.write_bytes(b"XX" + good.read_bytes()[2:])
    assert diagnose_checkpoint(path).verdict == "corrupt"
