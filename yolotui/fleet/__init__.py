"""Several machines from one terminal over SSH: the hosts (settings.yaml), the transport (the system OpenSSH
client, multiplexed), the version handshake, every host's runs read concurrently, a live stream that reconnects.

The remote side is the same `yolotui` CLI with `--json`: no daemon is started there and nothing is copied.
"""
