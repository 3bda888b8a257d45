"""Theme files (YAML) shipped with yolotui and registered with the TUI at start."""
