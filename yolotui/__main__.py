"""`python -m yolotui` runs the command-line entry point."""

from yolotui.cli import main

raise SystemExit(main())
