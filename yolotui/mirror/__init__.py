"""Mirroring a run off the machine, and restoring it elsewhere (spot and preemptible machines).

After every checkpoint, and at the run's end, a child process of the supervisor copies the run's essentials
(run.yaml, opt.yaml, hyp.yaml, results.csv, events.jsonl, status.json, weights/last.pt and best.pt with their
manifests) to TARGET/RUN_NAME/: a local or mounted folder, `host:path` through rsync over ssh, or an fsspec
URL (s3://, gs://, az://, file:// ...). Modules: target.py (what TARGET means), settings.py (a run's mirror
settings), snapshot.py (a consistent set of files to copy), stores.py (the Store operations) with
store_local.py, store_rsync.py and store_fsspec.py (one per kind of target), push.py (the copy order and its
checks), copy.py (the copying child), driver.py (the supervisor's side: when to copy, retries, reports),
pull.py (bringing a mirrored run back), restore_run.py (the restore use case). Torch-free, like every package
under the supervisor.
"""
