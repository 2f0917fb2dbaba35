"""The scenarios' shared verify helpers (molecule/_shared/ansible_run.py) on the import path."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "_shared"))
