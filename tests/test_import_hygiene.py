"""The headless packages never import Textual (or Rich): checked in a fresh interpreter."""

import subprocess
import sys

import pytest

HEADLESS = [
    "tui.core",
    "tui.core.metrics",
    "tui.core.timeline",
    "tui.core.stats",
    "tui.core.window",
    "tui.engines",
    "tui.engines.registry",
    "tui.engines.llamacpp",
    "tui.telemetry",
    "tui.bench",
    "tui.config",
]


@pytest.mark.parametrize("module", HEADLESS)
def test_headless_module_does_not_import_textual(module):
    code = (
        f"import importlib, sys; importlib.import_module({module!r}); "
        "bad = [m for m in ('textual', 'rich') if m in sys.modules]; "
        "print(','.join(bad)); sys.exit(1 if bad else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, f"{module} imported {proc.stdout.strip()} {proc.stderr[-500:]}"


def test_every_headless_module_file_is_checked():
    """New modules under the headless packages are imported too (walk the tree)."""
    import pkgutil

    import tui

    code = (
        "import importlib, pkgutil, sys, tui\n"
        "for pkg in ('tui.core', 'tui.transport', 'tui.engines', 'tui.telemetry', 'tui.bench'):\n"
        "    p = importlib.import_module(pkg)\n"
        "    for m in pkgutil.walk_packages(p.__path__, pkg + '.'):\n"
        "        try:\n"
        "            importlib.import_module(m.name)\n"
        "        except ImportError as e:\n"
        "            if 'textual' in str(e) or 'rich' in str(e):\n"
        "                raise\n"
        "bad = [m for m in ('textual', 'rich') if m in sys.modules]\n"
        "print(','.join(bad)); sys.exit(1 if bad else 0)\n"
    )
    assert pkgutil  # used in the child
    assert tui.__version__
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-800:]
