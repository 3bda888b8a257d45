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
    from yolotui.runs.layout import EVENTS_JSONL, INTERRUPTED, LIVE_STATES
    from yolotui.runs.resolve import resolve_run
    from yolotui.runs.status import elapsed_seconds, read_status_checked
    from yolotui.runs.summary import summarize, tail_events
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
        from yolotui.placement.slurm import short_text

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
        events = tail_events(run_dir / EVENTS_JSONL, max_bytes=16 * 1024)
        last = events[-1] if events else None
        activity = f"supervisor wrote status.json {age(now - status.updated)} ago" if status.updated else ""
        if last is not None and isinstance(last.get("ts"), (int, float)):
            activity = (f"last training event {age(now - float(last['ts']))} ago ({last.get('type')})"
                        + (f"; {activity}" if activity else ""))
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
    lines.append(f"epochs     {epoch_text(summary.epoch, summary.epochs)} done   best mAP50-95 "
                 + (f"{summary.best_map:.4f}" if summary.best_map is not None else "-")
                 + f"   checkpoint age {age(summary.checkpoint_age)}")
    print("\n".join(lines))
    if status is not None and status.attempts:
        rows = [(str(a.get("attempt")), when(a.get("started")),
                 describe_exit(a.get("exit_code"), a.get("exit_signal")) if a.get("ended") else "running",
                 a.get("failure_class") or "-", a.get("remedy") or "-") for a in status.attempts]
        print()
        print(table(("ATTEMPT", "STARTED", "EXIT", "CLASS", "NEXT"), rows))
    return 0


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
