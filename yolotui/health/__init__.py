"""Checkpoint and environment diagnosis without torch: zip and pickle-opcode scans, drift, environment.

- checkpoint.py: inspect a checkpoint (container, pickle keys and small values, manifest); container.py: the
  zip container (members, CRCs, a torn file); pickle_scan.py: a pickle read by walking its opcodes, never run;
- ultralytics_layout.py: the ultralytics checkpoint layout; verdict.py: the verdict before resuming from a
  checkpoint and the fallback when it is bad; deep.py: `--deep`, torch.load in a subprocess;
- drift.py: config drift against what the run started with; environment.py: the torch environment against the
  one the run recorded; subprocess_json.py: a yolotui module run in a child Python, its JSON answer read;
- gpu_report.py: what the GPU did to a run, in words; report.py: a run's full diagnosis and its text.
"""
