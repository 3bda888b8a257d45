"""TensorBoard for engine runs, read back with TensorBoard's own reader: the official tags one point per epoch,
per-N-batches losses, hparams once, and after SIGKILL mid-epoch + resume no step written twice, values equal to a
run never interrupted (exact resume on the CPU); the event-file pruning on its own; --no-tensorboard."""

from __future__ import annotations

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from torch.utils.tensorboard import SummaryWriter
from trackerkit import hparams_records, interrupt_mid_epoch, raw_scalars, write_run_yaml
from trainkit import make_data, make_run, run_trainer

from yolotui.engine.trackers import tb_files
from yolotui.engine.trackers.base import BATCH_TAGS, EPOCH_TAGS

# 8 images, batch 2: 4 batches an epoch, 2 epochs; TensorBoard gets the batch losses at every iteration.
RUN = {"epochs": 2, "batch_size": 2}
TRACKERS = {"batch_every": 1}
ITERATIONS = 8


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_data(tmp_path_factory.mktemp("data"), n_train=8, n_val=2, img=64)


@pytest.fixture(scope="module")
def reference(tmp_path_factory, data):
    run_dir = make_run(tmp_path_factory.mktemp("ref"), "ref", data=data, **RUN)
    write_run_yaml(run_dir, TRACKERS)
    done = run_trainer(run_dir)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return run_dir


def _accumulator(folder):
    acc = EventAccumulator(str(folder))
    acc.Reload()
    return acc


def test_engine_run_writes_official_tags_one_point_per_epoch_batches_and_hparams_once(reference):
    acc = _accumulator(reference)
    tags = set(acc.Tags()["scalars"])
    assert set(EPOCH_TAGS) | set(BATCH_TAGS) <= tags
    for tag in EPOCH_TAGS:
        assert [s.step for s in acc.Scalars(tag)] == [0, 1], tag
    for tag in BATCH_TAGS:
        assert [s.step for s in acc.Scalars(tag)] == list(range(ITERATIONS)), tag
    rows = (reference / "results.csv").read_text().splitlines()
    assert len(rows) == 3  # header + 2 epochs: the same epochs as TensorBoard's
    assert hparams_records(reference) == 1
    assert len(tb_files.event_files(reference)) == 1


def test_sigkill_mid_epoch_then_resume_writes_no_step_twice_and_continues_the_curves(tmp_path, data, reference):
    run_dir = make_run(tmp_path, "killed", data=data, **RUN)
    write_run_yaml(run_dir, TRACKERS)

    def past_checkpoint(checkpoint):
        iteration = checkpoint["epoch"] * 4 + checkpoint["step"]
        return any(tag == "batch/box_loss" and step >= iteration for tag, step in raw_scalars(run_dir))

    checkpoint = interrupt_mid_epoch(run_dir, epoch=1, ready=past_checkpoint)
    resume_at = checkpoint["epoch"] * 4 + checkpoint["step"]
    before = raw_scalars(run_dir)
    assert any(step >= resume_at for tag, step in before if tag.startswith("batch/")), \
        "the interrupted attempt wrote nothing past its checkpoint: the test would prove nothing"

    resumed = run_trainer(run_dir)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert "Resuming from" in resumed.stdout
    after = raw_scalars(run_dir)
    twice = {key: values for key, values in after.items() if len(values) > 1}
    assert not twice, f"steps written more than once: {sorted(twice)[:5]}"
    expected = raw_scalars(reference)
    assert set(after) == set(expected)
    differing = [key for key in expected if after[key] != expected[key]]
    assert not differing, f"values differ from the uninterrupted run at {differing[:5]}"
    acc = _accumulator(run_dir)
    for tag in EPOCH_TAGS:
        assert [s.step for s in acc.Scalars(tag)] == [0, 1], tag
    assert [s.step for s in acc.Scalars("batch/box_loss")] == list(range(ITERATIONS))
    assert hparams_records(run_dir) == 1


def _write(folder, epochs, iterations, value, hparams=False):
    writer = SummaryWriter(log_dir=str(folder))
    if hparams:
        from torch.utils.tensorboard.summary import hparams as make_hparams

        for summary in make_hparams({"lr0": 0.01}, {"metrics/mAP_0.5": 0.0}):
            writer.file_writer.add_summary(summary)
    for step in epochs:
        writer.add_scalar("metrics/mAP_0.5", value + step, step)
    for step in iterations:
        writer.add_scalar("batch/box_loss", value + step, step)
    writer.close()


def test_prune_keeps_what_the_checkpoint_covers_once_and_survives_a_torn_tail(tmp_path):
    _write(tmp_path, range(5), range(50), 0.0, hparams=True)
    _write(tmp_path, range(2, 4), range(20, 40), 100.0, hparams=True)  # a second attempt that wrote steps again
    files = tb_files.event_files(tmp_path)
    assert len(files) == 2
    with open(files[-1], "ab") as handle:
        handle.write(b"\x17\x00\x00\x00\x00\x00\x00\x00torn")  # a kill mid-record
    result = tb_files.prune(tmp_path, epoch_limit=3, iteration_limit=30)
    assert result.dropped > 0 and result.has_hparams
    assert result.present["metrics/mAP_0.5"] == {0, 1, 2}
    assert result.present["batch/box_loss"] == set(range(30))
    assert len(tb_files.event_files(tmp_path)) == 1
    scalars = raw_scalars(tmp_path)
    assert all(len(v) == 1 for v in scalars.values())
    assert scalars[("metrics/mAP_0.5", 2)] == [2.0]  # the first attempt's value, the second's dropped
    assert hparams_records(tmp_path) == 1
    again = tb_files.prune(tmp_path, epoch_limit=3, iteration_limit=30)
    assert again.dropped == 0 and raw_scalars(tmp_path) == scalars


def test_set_aside_moves_an_earlier_runs_files_into_its_previous_folder(tmp_path):
    _write(tmp_path, range(2), [], 0.0)
    (tmp_path / "previous-20250101-000000").mkdir()
    target = tb_files.set_aside(tmp_path)
    assert target == tmp_path / "previous-20250101-000000"
    assert tb_files.event_files(tmp_path) == [] and len(tb_files.event_files(target)) == 1
