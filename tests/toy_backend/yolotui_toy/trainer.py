"""The toy trainer: N epochs of B batches, events and results as yolotui reads them; resumes from its state."""

import json
import os
import signal
import sys
import time
from pathlib import Path

run, epochs, batches = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
state_file = run / "toy_state.json"
stop = []
signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
attempt = int(os.environ.get("YOLOTUI_ATTEMPT", "1"))


def emit(kind, **fields):
    with open(run / "events.jsonl", "a") as out:
        out.write(json.dumps({"ts": round(time.time(), 3), "type": kind, "attempt": attempt, **fields}) + "\n")


start = json.loads(state_file.read_text())["epoch"] if state_file.exists() else 0
emit("start", epochs=epochs, batches=batches, backend="toy", resumed_from={"epoch": start} if start else None)
if not (run / "results.csv").exists():
    (run / "results.csv").write_text("epoch,train/box_loss,metrics/mAP_0.5:0.95\n")
hold_at = int(os.environ.get("TOY_HOLD_AT", "-1"))  # tests: wait at this epoch until RUN/go exists
for epoch in range(start, epochs):
    if epoch == hold_at:
        (run / "holding").write_text(str(os.getpid()))
        while not (run / "go").exists() and not stop:
            time.sleep(0.05)
        if stop:
            sys.exit(143)
    for batch in range(batches):
        time.sleep(float(os.environ.get("TOY_BATCH_S", "0.05")))
        emit("batch", epoch=epoch, epochs=epochs, batch=batch + 1, batches=batches, losses={"box": 1.0 / (epoch + 1)})
    with open(run / "results.csv", "a") as out:
        out.write(f"{epoch},{1.0 / (epoch + 1):.4f},{0.1 * (epoch + 1):.4f}\n")
    state_file.write_text(json.dumps({"epoch": epoch + 1}))
    emit("epoch", epoch=epoch, epochs=epochs)
    if stop:
        sys.exit(143)
emit("done", epochs=epochs, completed=f"{epochs} epochs completed")
