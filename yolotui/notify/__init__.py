"""Notifications about runs (apprise URLs, a command hook), sent by child processes so a slow or failing
target never blocks the supervisor: yolotui.notify.notifier decides and queues, yolotui.notify.send delivers.
"""
