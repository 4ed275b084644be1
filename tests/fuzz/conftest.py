"""The fuzz tests: fuzz_support.py is importable (importlib import mode)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
