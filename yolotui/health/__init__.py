"""Checkpoint and environment diagnosis without torch: zip and pickle-opcode scans, drift, environment."""
