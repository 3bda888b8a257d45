"""The run-folder contract and the only hallway between processes (docs/architecture.md, "The run folder").

UI-free and torch-free: a script or another UI can use it.

- layout.py: the file names and states; runconfig.py: run.yaml; status.py and status_schema.py: status.json
  and its field types (with the one "interrupted" rule); events.py: the events writer (events.jsonl and the
  rotated batches.jsonl); eventlog.py: their bounded readers and followers; tailread.py: a file's last window,
  cut at a line start; logcap.py: train.log and supervisor.log held to a cap (head and tail kept); results.py:
  results.csv;
- manifest.py: checkpoints and manifests kept in step; atomic.py: crash-safe, no-follow writes; lock.py: the
  run's lock; stoprequest.py: stop.request; trackers.py: run.yaml's tracker entries;
- index.py: the global index of runs; store.py: creating run folders; resolve.py: a name or path to a run
  folder; summary.py: one line of facts per run; slurm_state.py: a SLURM run's job state.
"""
