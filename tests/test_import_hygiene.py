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
    "tui.engines.inprocess.llamacpp",
    "tui.telemetry",
    "tui.bench",
    "tui.fleet",
    "tui.fleet.poller",
    "tui.fleet.build",
    "tui.proxy",
    "tui.proxy.server",
    "tui.proxy.watch",
    "tui.ledger",
    "tui.ledger.writer",
    "tui.ledger.usage",
    "tui.otel.export",
    "tui.alerts.engine",
    "tui.config",
    "tui.config_trust",
    "tui.config_keys",
    "tui.config_sections",
    "tui.config_schema",
    "tui.config_checks",
    "tui.chat",
    "tui.chat.core",
    "tui.chat.hardware",
    # the headless commands (`infertop run`, `bench`, `fleet --once`, `doctor`, `agent`, `proxy`)
    "tui.cli.run",
    "tui.cli.bench",
    "tui.cli.fleet",
    "tui.cli.doctor",
    "tui.cli.agent",
    "tui.cli.proxy",
    "tui.cli.usage",
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
        "for pkg in ('tui.core', 'tui.transport', 'tui.engines', 'tui.telemetry', 'tui.bench',\n"
        "            'tui.fleet', 'tui.chat', 'tui.proxy', 'tui.ledger', 'tui.otel',\n"
        "            'tui.alerts'):\n"
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


# Which packages each may import (besides itself): the layers, bottom up. core is the
# measurement model; transport moves bytes; engines and telemetry sit side by side on
# both and never import each other; config reads engines' and telemetry's names; fleet,
# chat and bench build on all of those and never on each other; proxy (forwarding and
# measuring other clients' traffic) needs only core, transport and the engines' stream
# readers; ledger (the request ledger's file and queries) needs only core; app (Textual)
# draws on top; cli, at the very top, may use anything. Every
# package of tui/ is listed (a test below checks it); tui.config_trust, tui.config_keys,
# tui.config_sections, tui.config_schema and tui.config_checks are config's.
BASE = {"tui.core", "tui.transport", "tui.engines", "tui.telemetry", "tui.config"}
LAYERS = {
    "tui.core": set(),
    "tui.transport": {"tui.core"},
    "tui.engines": {"tui.core", "tui.transport"},
    "tui.telemetry": {"tui.core", "tui.transport"},
    "tui.otel": {"tui.core", "tui.transport"},
    "tui.alerts": {"tui.core", "tui.transport", "tui.telemetry"},
    "tui.config": {"tui.core", "tui.transport", "tui.engines", "tui.telemetry", "tui.alerts"},
    "tui.fleet": BASE,
    "tui.chat": BASE,
    "tui.bench": BASE,
    "tui.proxy": {"tui.core", "tui.transport", "tui.engines"},
    "tui.ledger": {"tui.core"},
    "tui.app": BASE
    | {"tui.fleet", "tui.chat", "tui.bench", "tui.proxy", "tui.ledger", "tui.otel", "tui.alerts"},
    "tui.cli": BASE
    | {
        "tui.fleet",
        "tui.chat",
        "tui.bench",
        "tui.proxy",
        "tui.ledger",
        "tui.app",
        "tui.otel",
        "tui.alerts",
    },
}


CONFIG_PARTS = {
    "tui.config_trust",
    "tui.config_keys",
    "tui.config_sections",
    "tui.config_schema",
    "tui.config_checks",
}


def layer_of(module: str) -> str:
    top = ".".join(module.split(".")[:2])
    return "tui.config" if top in CONFIG_PARTS else top


def test_every_package_has_a_layer():
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "tui"
    tops = {f"tui.{p.stem}" for p in root.iterdir() if p.suffix == ".py" or p.is_dir()}
    tops -= {"tui.__init__", "tui.__main__", "tui.__pycache__"}
    assert {layer_of(t) for t in tops} <= set(LAYERS), sorted(tops)


def test_layers_import_only_what_is_below_them():
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    bad = []
    for package, allowed in LAYERS.items():
        here = root / package.replace(".", "/")
        paths = here.rglob("*.py") if here.is_dir() else [here.with_suffix(".py")]
        if package == "tui.config":
            paths = [here.with_suffix(".py")] + [
                root / "tui" / f"{part.split('.')[1]}.py" for part in sorted(CONFIG_PARTS)
            ]
        for path in paths:
            tree = ast.parse(path.read_text(), str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module:
                    names = [node.module]
                elif isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                else:
                    continue
                for name in names:
                    if not name.startswith("tui."):
                        continue
                    top = layer_of(name)
                    if top != package and top not in allowed and name != "tui":
                        bad.append(f"{path.relative_to(root)}: imports {name}")
    assert bad == [], "\n".join(bad)
