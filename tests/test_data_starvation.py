"""The data-starvation verdict from real engine runs: a dataset slowed by a test-only wrapper vs a normal one."""

from __future__ import annotations

import time

from trainkit import make_data, make_run

from yolotui.runs.events import read_events
from yolotui.telemetry.slowness import DATA_BOUND, OK, last_loop, verdicts


class SlowDataset:
    """A test-only wrapper: every sample takes `delay_s` longer to load (a slow disk or heavy decoding)."""

    def __init__(self, inner, delay_s: float) -> None:
        self.inner = inner
        self.delay_s = delay_s

    def __len__(self) -> int:
        return len(self.inner)

    def __getitem__(self, index):
        time.sleep(self.delay_s)
        return self.inner[index]

    def __getattr__(self, name):
        return getattr(self.inner, name)


def _train(tmp_path, name: str, delay_s: float | None):
    from yolotui.engine.train.trainer import Trainer

    run_dir = make_run(tmp_path, name=name, data=make_data(tmp_path / "data", n_train=8, n_val=2), epochs=1,
                       batch_size=4)
    trainer = Trainer(run_dir)
    trainer.setup()
    if delay_s is not None:
        trainer.train_set = SlowDataset(trainer.train_set, delay_s)
    assert trainer.train() == 0
    return read_events(run_dir / "events.jsonl")


def test_a_slow_dataset_is_data_bound_and_a_normal_one_is_not(tmp_path):
    slow = last_loop(_train(tmp_path, "slow", 0.1))
    normal = last_loop(_train(tmp_path, "normal", None))
    print("slow", slow, "normal", normal)
    for loop in (slow, normal):
        assert loop["steps"] == 2 and loop["data_wait_s"] >= 0 and loop["compute_s"] > 0
        assert loop["workers"] == 0
    assert slow["data_wait_s"] >= 8 * 0.1 * 0.9  # every sample's sleep is inside the loader's next()
    slow_verdict, normal_verdict = verdicts(slow, cpus=8)[0], verdicts(normal, cpus=8)[0]
    assert slow_verdict.kind == DATA_BOUND
    assert slow_verdict.text.startswith(f"data-bound: the GPU waited {slow_verdict.pct:.0f} % of the step")
    assert "--workers 2" in slow_verdict.text and "--cache ram" in slow_verdict.text
    assert normal_verdict.kind == OK and normal_verdict.pct < slow_verdict.pct


def test_the_verdict_text_and_its_pct_say_the_same_number():
    # 95.498 % printed as "95" while the stored pct rounded to 95.5 printed as "96" (a CI failure)
    loop = {"data_wait_s": 0.8125, "compute_s": 0.0383, "steps": 2, "workers": 0}
    verdict = verdicts(loop, cpus=8)[0]
    assert verdict.kind == DATA_BOUND and verdict.pct == 95.5
    assert verdict.text.startswith(f"data-bound: the GPU waited {verdict.pct:.0f} % of the step")
    calm = verdicts({"data_wait_s": 0.0086, "compute_s": 0.0356}, cpus=8)[0]
    assert calm.kind == OK and f"waited {calm.pct:.0f} %" in calm.text
    throttled = verdicts(summary={"samples": 9, "throttled_pct": 40.45, "seconds": 60})
    assert throttled and f"throttled {throttled[0].pct:.0f} %" in throttled[0].text
