"""`yolotui status RUN [--json]`: a run's state (interrupted when its supervisor is gone), attempts, progress."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `yolotui status`."""
    parser.add_argument("run", metavar="RUN", help="run name (see `yolotui ls`) or run folder")
    parser.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace) -> int:
    """Print the run's status."""
    import json
    import shlex
    import time

    from yolotui.commands._runfmt import age, duration, epoch_text, table, when
    from yolotui.runs.eventlog import recent_events
    from yolotui.runs.layout import INTERRUPTED, LIVE_STATES
    from yolotui.runs.resolve import resolve_run
    from yolotui.runs.status import elapsed_seconds, read_status_checked
    from yolotui.runs.summary import summarize
    from yolotui.supervisor.policy import describe_exit

    run_dir = resolve_run(args.run)
    status, problem = read_status_checked(run_dir)  # a bad status.json is said, not a crash
    summary = summarize(run_dir)
    from yolotui.health.gpu_report import gpu_facts, report_lines

    gpu = gpu_facts(run_dir, status)  # the GPU summary and why it is slow
    if args.json:
        data = status.to_dict() if status is not None else {}
        data.update(recorded_state=data.get("state"), state=summary.state, path=str(run_dir),
                    summary=summary.to_dict(), gpu=gpu, trackers=_trackers(run_dir))
        print(json.dumps(data, indent=2, default=str))
        return 0

    lines = [f"run        {summary.name}  ({run_dir})"]
    state = summary.state
    if status is not None:
        state += f"  (attempt {status.attempt}/{status.max_attempts})"
    lines.append(f"state      {state}")
    if problem:
        lines.append(f"problem    {problem}")
    if summary.slurm:
        from yolotui.runs.slurm_state import short_text

        lines.append(f"slurm      {short_text(summary.slurm)}")
    if summary.state == INTERRUPTED and not summary.slurm:
        lines.append("           its supervisor is gone (killed, or the machine restarted); nothing is running")
    if status is not None:
        lines.append(f"command    {shlex.join(status.command)}".replace("\n", "\\n"))
        if status.supervisor_pid and summary.state in LIVE_STATES:
            host = f" on {status.slurm['host']}" if status.slurm and status.slurm.get("host") else ""
            lines.append(f"pids       supervisor {status.supervisor_pid}, trainer {status.trainer_pid or '-'}{host}")
        now = time.time()
        live = summary.state in LIVE_STATES
        ended = f", ended {when(status.ended)}" if status.ended and not live else ""
        lines.append(f"started    {when(status.started)}{ended}  (running time {duration(elapsed_seconds(status, now, live))})")
        activity = _activity(recent_events(run_dir, max_bytes=1 << 20), status, now)
        if activity:
            lines.append(f"updated    {activity}")
        if status.ended and (status.exit_code is not None or status.exit_signal is not None):
            lines.append(f"exit       {describe_exit(status.exit_code, status.exit_signal)}")
        if status.message:
            lines.append(f"message    {status.message}")
        lines += _remedy_lines(status)
        lines += report_lines(gpu)
    from yolotui.jobs.tensorboard import status_lines

    lines += status_lines(run_dir)  # TensorBoard, MLflow, W&B: where, which run, failures
    in_progress = ""
    if summary.batch is not None and summary.state in LIVE_STATES and summary.epoch is not None:
        from yolotui.formatting import epoch_in_progress

        in_progress = (f" ({epoch_in_progress(summary.epoch, summary.epochs)}: batch {summary.batch}"
                       + (f"/{summary.batches}" if summary.batches else "") + ")")
    lines.append(f"epochs     {epoch_text(summary.epoch, summary.epochs)} done{in_progress}   best mAP50-95 "
                 + (f"{summary.best_map:.4f}" if summary.best_map is not None else "-")
                 + f"   checkpoint age {age(summary.checkpoint_age)}")
    from yolotui.formatting import printable

    print("\n".join(printable(line) for line in lines))  # a run name with control characters is shown escaped
    if status is not None and status.attempts:
        rows = [(str(a.get("attempt")), when(a.get("started")),
                 describe_exit(a.get("exit_code"), a.get("exit_signal")) if a.get("ended") else "running",
                 a.get("failure_class") or "-", a.get("remedy") or "-") for a in status.attempts]
        print()
        print(table(("ATTEMPT", "STARTED", "EXIT", "CLASS", "NEXT"), rows))
    return 0


def _activity(events: list, status, now: float) -> str:
    """What is fresh about the run, newest first: its last batch and epoch events (the trainer's own word that
    it moves); other events and status.json's age only when the trainer has said nothing of its progress.

    status.json is rewritten only when the supervisor has something to record, so its age says nothing about a
    healthy run ("supervisor wrote status.json 5m ago" read like a stall)."""
    from yolotui.commands._runfmt import age
    from yolotui.formatting import epoch_in_progress

    def stamp(event) -> float | None:
        ts = event.get("ts") if isinstance(event, dict) else None
        return float(ts) if isinstance(ts, (int, float)) and not isinstance(ts, bool) else None

    parts = []
    batch = next((e for e in reversed(events) if e.get("type") == "batch" and stamp(e) is not None), None)
    epoch = next((e for e in reversed(events) if e.get("type") == "epoch" and stamp(e) is not None), None)
    if batch is not None:
        where = ""
        if isinstance(batch.get("epoch"), int):
            where = f" ({epoch_in_progress(batch['epoch'], batch.get('epochs'))}, batch {batch.get('batch')}" + (
                f"/{batch['batches']}" if batch.get("batches") else "") + ")"
        parts.append((stamp(batch), f"last batch event {age(now - stamp(batch))} ago{where}"))
    if epoch is not None:
        done = epoch.get("epoch") + 1 if isinstance(epoch.get("epoch"), int) else None
        where = f" (epoch {done} ended)" if done is not None else ""
        parts.append((stamp(epoch), f"last epoch event {age(now - stamp(epoch))} ago{where}"))
    if parts:
        return "; ".join(text for _, text in sorted(parts, key=lambda p: -p[0]))
    last = next((e for e in reversed(events) if stamp(e) is not None), None)
    if last is not None:
        return f"last training event {age(now - stamp(last))} ago ({last.get('type')})"
    return f"supervisor wrote status.json {age(now - status.updated)} ago" if status.updated else ""


def _remedy_lines(status) -> list[str]:
    """The distributed-debug settings the remedies turned on, how notifications fared, and the mirror."""
    from yolotui.supervisor.remedies import COMM_DEBUG_ENV

    lines = []
    env: dict = {}
    for remedy in status.remedies or []:
        env.update((remedy.get("changes") or {}).get("env") or {})
    debug = [f"{name}={env[name]}" for name in COMM_DEBUG_ENV if name in env]
    if debug:
        lines.append(f"debug      {' '.join(debug)} (set after a comm failure, so the retry's log says why)")
    counts = status.notifications or {}
    if counts.get("sent") or counts.get("failed"):
        failed = f", {counts['failed']} failed (last: {counts.get('last_error')})" if counts.get("failed") else ""
        lines.append(f"notified   {counts.get('sent', 0)} sent{failed}")
    if status.mirror:
        from yolotui.mirror.driver import describe

        lines.append(f"mirror     {describe(status.mirror)}")
    return lines


def _trackers(run_dir) -> dict:
    """The run's tracker settings and what the trainer recorded (run ids, epochs sent, failures), for --json."""
    from dataclasses import asdict

    from yolotui.runs.trackers import read_records, read_settings

    return {"settings": asdict(read_settings(run_dir)), "records": read_records(run_dir)}
