"""A toy backend: the smallest trainer a separate package can plug into yolotui (docs/backends.md).

`yolotui train --backend toy --epochs N [--toy-batches B] --project P --name NAME` starts trainer.py (standard library only) under
yolotui's supervisor; it writes events.jsonl and results.csv as yolotui reads them, keeps its own checkpoint
(toy_state.json), stops cleanly on SIGTERM, and `yolotui resume RUN` (or the resume wizard) continues from it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from yolotui.backends.base import (
    REMEDY_RETRY,
    Backend,
    Capabilities,
    ChoiceRules,
    CommandRequest,
    LaunchSpec,
    NewRunPlan,
    RunOutputs,
)

TRAINER = Path(__file__).with_name("trainer.py")


class ToyBackend(Backend):
    """The toy trainer."""

    name = "toy"
    title = "the toy trainer"
    capabilities = Capabilities(resume=True)

    def new_run_command(self, request: CommandRequest) -> LaunchSpec:
        """trainer.py RUN EPOCHS BATCHES."""
        epochs, batches = int(request.opt.get("epochs") or 3), int(request.opt.get("batches") or 4)
        return LaunchSpec(command=[sys.executable, str(TRAINER), str(request.run_dir), str(epochs), str(batches)],
                          extra={"toy": {"epochs": epochs, "batches": batches}})

    def resume_command(self, request: CommandRequest) -> LaunchSpec:
        """The same command: the trainer continues from toy_state.json itself."""
        from yolotui.runs.runconfig import read_run_config

        recorded = read_run_config(Path(request.run_dir)).get("toy") or {}
        epochs = int(request.overrides.get("epochs") or recorded.get("epochs") or 3)
        batches = int(recorded.get("batches") or 4)
        return LaunchSpec(command=[sys.executable, str(TRAINER), str(request.run_dir), str(epochs), str(batches)],
                          extra={"toy": {"epochs": epochs, "batches": batches}})

    def remedies(self) -> frozenset[str]:
        """Rerun it."""
        return frozenset({REMEDY_RETRY})

    def outputs(self, run_dir: Path) -> RunOutputs:
        """results.csv in the run folder; no weights."""
        return RunOutputs(results_csv=Path(run_dir) / "results.csv", weights_dir=None, opt_yaml=None)

    def cli_flags(self, command: str) -> list[tuple[tuple[str, ...], dict[str, Any]]]:
        """`yolotui train --toy-batches N`: batches per epoch."""
        if command != "train":
            return []
        return [(("--toy-batches",), {"type": int, "default": 4, "metavar": "N",
                                      "help": "toy backend: batches per epoch (default 4)"})]

    def cannot(self, capability: str) -> str | None:
        """It has no save-now."""
        return "the toy trainer keeps its state at every epoch's end" if capability == "save_now" else None

    def resume_rules(self, diagnosis: Any) -> ChoiceRules:
        """Its own checkpoint, not weights/last.pt: one choice."""
        return ChoiceRules(drop=frozenset({"from", "smaller-batch", "extend"}),
                           first=("resume", "continue the toy trainer from its own state"))

    def train_plan(self, args: Any, given: dict[str, Any]) -> NewRunPlan:
        """`yolotui train --backend toy --epochs N --project P --name NAME`."""
        cwd = Path.cwd()
        return NewRunPlan(project=Path(given.get("project") or "runs/toy"), name=str(given.get("name") or "toy"),
                          exist_ok=bool(given.get("exist_ok")), opt={"epochs": given.get("epochs") or 3, "batches": args.toy_batches}, argv=[],
                          cwd=cwd, notes=["the toy trainer, from its own package"])
