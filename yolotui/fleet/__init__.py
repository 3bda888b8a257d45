"""Several machines from one terminal over SSH: the hosts (settings.yaml), the transport (the system OpenSSH
client, multiplexed), the version handshake, every host's runs read concurrently, a live stream that reconnects.

Modules: hosts.py (the hosts in settings.yaml), ssh.py (the multiplexed, bounded, quoted ssh call), probe.py
(the version handshake and GPUs), reach.py (unreachable since, backoff), remote_runs.py (every host's runs,
read concurrently), stream.py (`watch --json` over ssh, reconnecting).

The remote side is the same `yolotui` CLI with `--json`: no daemon is started there and nothing is copied.
"""
