"""What the GPU did to a run, for `yolotui status` and `yolotui doctor`: the newest attempt's GPU summary
(status.json's `gpu_summary`) in words, and the slowness verdict (data-bound, throttled, GPU mostly idle)
from it and the last epoch's loop timings. Torch-free; every input may be missing or malformed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from yolotui.runs.layout import EVENTS_JSONL
from yolotui.telemetry.gpu_summary import latest, summary_lines
from yolotui.telemetry.slowness import last_loop, verdicts

EVENT_TAIL_BYTES = 64 * 1024  # the last epoch event is within this much of the end of events.jsonl


def gpu_facts(run_dir: Path, status: Any) -> dict[str, Any] | None:
    """{'summary': the newest attempt's summary, 'lines': it in words, 'loop': the last epoch's loop timings,
    'verdicts': [...]}; None when the run has neither a GPU summary nor loop timings."""
    from yolotui.runs.eventlog import tail_events

    summary = latest(getattr(status, "gpu_summary", None))
    loop = last_loop(tail_events(Path(run_dir) / EVENTS_JSONL, max_bytes=EVENT_TAIL_BYTES))
    if summary is None and loop is None:
        return None
    return {"summary": summary, "lines": summary_lines(summary), "loop": loop,
            "verdicts": [v.to_dict() for v in verdicts(loop, summary)]}


def report_lines(facts: dict[str, Any] | None, width: int = 11) -> list[str]:
    """'gpu        GPU 0: throttled ...' and 'speed      data-bound: ...' lines, labels padded to `width`."""
    if not facts:
        return []
    lines = []
    for index, line in enumerate(facts.get("lines") or []):
        lines.append(f"{'gpu' if index == 0 else '':<{width}}{line}")
    for index, verdict in enumerate(facts.get("verdicts") or []):
        lines.append(f"{'speed' if index == 0 else '':<{width}}{verdict.get('text')}")
    return lines
