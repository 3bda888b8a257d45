"""The GPU panel's health lines: throttling and clock %, ECC, PCIe, a lost GPU (per GPU), and the run's GPU
summary with the slowness verdict (data-bound, throttled) under the GPUs.

Functions of the panel (for its theme colours) and a Rich Text to append to; every reading may be missing
(an older sampler, a fake, an unsupported GPU), and then its line is left out.
"""

from __future__ import annotations

import textwrap
from typing import Any

from rich.text import Text

from yolotui.telemetry import clocks, ecc
from yolotui.telemetry.slowness import verdicts

VERDICT_KIND = {"data-bound": "warn", "throttled": "warn", "low-utilisation": "warn", "ok": "good"}


def append_reading(panel: Any, text: Text, gpu: Any, width: int) -> None:
    """Throttling with the SM clock against its maximum, then ECC and PCIe trouble, for one GPU."""
    mask = clocks.as_mask(getattr(gpu, "throttle_mask", None))
    groups = clocks.reason_groups(mask)
    clock = clocks.clock_text(gpu)
    if mask is not None or clock:
        if groups:
            head, kind = "throttled: " + ", ".join(groups), "bad"
        elif mask is not None and mask & clocks.IDLE_BIT:
            head, kind = "idle", "muted"
        elif mask is not None:
            head, kind = "not throttled", "good"
        else:
            head, kind = "", "muted"
        if head and clock and len(head) + len(clock) + 3 <= width:
            text.append(f"\n {head}", panel.style_for(kind))
            text.append(f", {clock}")
        else:
            if head:
                text.append(f"\n {head}", panel.style_for(kind))
            if clock:
                text.append(f"\n {clock}", panel.style_for("bad" if groups else "label"))
    if getattr(gpu, "ecc_enabled", None):
        volatile = getattr(gpu, "ecc_volatile", None) or {}
        uncorrected, corrected = ecc.uncorrected_total(gpu), ecc.corrected_total(gpu)
        text.append("\n ECC ", panel.style_for("label"))
        if uncorrected:
            text.append(f"{uncorrected} uncorrected!", panel.style_for("bad"))
            if corrected:
                text.append(f" {corrected} corrected", panel.style_for("label"))
        elif corrected:
            text.append(f"{corrected} corrected", panel.style_for("warn"))
        else:
            text.append("no errors" if volatile else "on", panel.style_for("good"))
    width_now, width_max = getattr(gpu, "pcie_width", None), getattr(gpu, "pcie_width_max", None)
    if width_now and width_max and width_now < width_max:
        text.append(f"\n PCIe x{width_now}/{width_max}!", panel.style_for("warn"))
    skipped = getattr(gpu, "skipped", None) or []
    if skipped:
        text.append(f"\n {len(skipped)} reading(s) >1 s: skipped", panel.style_for("muted"))


def append_run(panel: Any, text: Text, summary: Any, loop: Any, width: int) -> None:
    """The run's GPU facts of its current attempt and why it is slow, wrapped to `width`."""
    facts: list[tuple[str, str]] = []
    found = verdicts(loop, summary)
    if isinstance(summary, dict) and summary.get("samples"):
        pct, clock = summary.get("throttled_pct"), summary.get("min_clock_pct")
        if not isinstance(pct, (int, float)):
            pass
        elif not pct:
            facts.append(("not throttled", "good"))
        elif not any(v.kind == "throttled" for v in found):  # else the verdict below says it
            reasons = summary.get("throttle_reasons_s") if isinstance(summary.get("throttle_reasons_s"), dict) else {}
            why = f" ({', '.join(reasons)})" if reasons else ""
            facts.append((f"throttled {pct:.0f} % of the run{why}", "warn"))
        peak = summary.get("max_temperature_c")
        parts = [f"min clock {clock:.0f} %" if isinstance(clock, (int, float)) else "",
                 f"peak {peak:.0f}°C" if isinstance(peak, (int, float)) else ""]
        if any(parts):
            facts.append((", ".join(p for p in parts if p), "label"))
        new = summary.get("ecc_new") if isinstance(summary.get("ecc_new"), dict) else {}
        if new.get("uncorrected"):
            facts.append((f"{new['uncorrected']} new uncorrected ECC error(s)", "bad"))
        for xid in (summary.get("xids") or [])[-2:]:
            if isinstance(xid, dict):
                facts.append((f"Xid {xid.get('xid')} GPU{xid.get('gpu', '?')}: {xid.get('meaning') or ''}", "bad"))
        for lost in (summary.get("lost") or [])[-2:]:
            if isinstance(lost, dict) and not any(f[0].startswith("Xid 79") for f in facts):
                facts.append((f"GPU{lost.get('gpu')} lost: {lost.get('error') or ''}", "bad"))
    for verdict in found:
        facts.append((verdict.text, VERDICT_KIND.get(verdict.kind, "warn")))
    if not facts:
        return
    text.append("\nrun", panel.style_for("label"))
    for line, kind in facts:
        for part in textwrap.wrap(line, max(10, width - 1)) or [line]:
            text.append(f"\n {part}", panel.style_for(kind))
