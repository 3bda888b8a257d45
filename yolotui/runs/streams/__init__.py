"""Reading a run's streams at a bounded cost, however long the run: eventlog (the readers of the two event
streams that yolotui.runs.events writes) and logcap (train.log and supervisor.log held to a cap, head and tail
kept). The layout: docs/long-runs.md.
"""
