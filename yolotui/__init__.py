"""yolotui: train YOLOv9 over SSH in detached, supervised runs, watched from a terminal UI.

The layers and what each may import: docs/architecture.md, "Layers". Top-level modules:

- __main__.py: `python -m yolotui`; cli.py: the `yolotui` entry point, a table of subcommands (commands/);
- config.py: training options and hyperparameters (official names, YAML I/O, validation);
- usersettings.py: settings.yaml in yolotui's config folder;
- devices.py, errors.py, formatting.py, safe_yaml.py: the one device parser, the one-line UserError, the one
  formatter of ages, sizes and epochs, the one YAML reader;
- failure_text.py: a failure class recognised in error text; logconfig.py: the logging set-up of the
  supervisor and the trainer; logtext.py: train.log for people; procs.py: process facts from /proc.

Packages: runs/ (the run-folder contract), telemetry/ (GPU and host readings), configs/ and datasets/ (shipped
YAML, data sets without torch), notify/, placement/ and mirror/ (notifications, where a supervisor starts,
copies off the machine), fleet/ (other machines over SSH: hosts, the
transport, the live stream), health/ (diagnosis without torch), backends/ (one package per kind of trainer),
supervisor/ (the detached supervisor of a run), jobs/ (the use cases), engine/ (YOLOv9 in torch), tui/ (the
Textual app), commands/ (the CLI adapters).
"""

__version__ = "0.1.0"
