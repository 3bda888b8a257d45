"""Mirroring a run off the machine, and restoring it elsewhere (spot and preemptible machines).

After every checkpoint, and at the run's end, a child process of the supervisor copies the run's essentials
(run.yaml, opt.yaml, hyp.yaml, results.csv, events.jsonl, status.json, weights/last.pt and best.pt with their
manifests) to TARGET/RUN_NAME/: a local or mounted folder, `host:path` through rsync over ssh, or an fsspec URL
(s3://, gs://, az://, file:// ...). Modules: target (what TARGET means), snapshot (a consistent set of files
to copy), stores (one per kind of target), push (the copy order and its checks), copy (the child process),
driver (the supervisor's side: when to copy, retries, reports), pull (bringing a mirrored run back).
Torch-free, like every package under the supervisor.
"""
