"""Stand-in train_triple.py: the same as the stand-in train_dual.py."""
import runpy
from pathlib import Path

if __name__ == "__main__":
    runpy.run_path(str(Path(__file__).with_name("train_dual.py")), run_name="__main__")
