"""What the supervisor's remedies mean for an ultralytics run (yolotui/supervisor/remedies.py applies them).

- oom, at any epoch (ultralytics itself halves the batch only inside the first epoch): the resumed attempt
  gets `--yolotui-batch N/2` (run.yaml's `batch_flag`), which the shim sets on the trainer before it builds its
  data loader; ultralytics re-derives its gradient accumulation from `nbs` (round(nbs / batch)), so the images
  per optimizer step stay the same. PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True is set too.
- comm: NCCL async error handling, blocking wait and a collective timeout, after backoff.
- nan: ultralytics first reloads last.pt itself (up to 3 times); when it gives up, yolotui resumes from
  weights/last.pt, the last checkpoint of a finished epoch, at the same lr (ultralytics has no lr scale).
- data (a dataset error), disk (no space), killed (a signal from outside): not retried, as for the engine.
- crash: the ultralytics resume from last.pt when it is resumable, else the original command.
"""

from __future__ import annotations

from yolotui.backends.base import REMEDY_ALLOC_CONF, REMEDY_HALVE_BATCH, REMEDY_NCCL_ENV, REMEDY_RETRY

REMEDIES = frozenset({REMEDY_RETRY, REMEDY_HALVE_BATCH, REMEDY_ALLOC_CONF, REMEDY_NCCL_ENV})


def remedy_lines() -> list[str]:
    """The module docstring's list, one line per failure class (for help and the docs)."""
    lines = (__doc__ or "").split("\n\n", 1)[-1].strip().splitlines()
    out: list[str] = []
    for line in lines:
        if line.startswith("- "):
            out.append(line[2:].strip())
        elif out:
            out[-1] += " " + line.strip()
    return out
