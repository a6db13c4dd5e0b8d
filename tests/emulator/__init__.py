"""Emulator contract tests."""

import importlib.util
import sys
from pathlib import Path

# The venv's editable install of ssh-gateway was built before pangolin_emulator existed, so
# its import map lacks the package; `pip install -e .` fixes that, this keeps tests running.
if importlib.util.find_spec("pangolin_emulator") is None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
