"""Notifications about runs (apprise URLs, a command hook), sent by child processes so a slow or failing
target never blocks the supervisor: notifier.py decides and queues, send.py delivers, redact.py names a target
without its secrets, trial.py sends `notify test`."""
