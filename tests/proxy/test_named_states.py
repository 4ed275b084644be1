"""The proxy's and the transport's states and framings are named types, never bare
strings (issue 49): no comparison of a ``state`` or ``framing`` with a string literal in
tui/proxy or tui/transport (the types: ExchangeState, RequestState, LookupState,
Framing; their modules define them), and tui/proxy imports no httpx (the transport's
own errors are caught there)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = (ROOT / "tui" / "proxy", ROOT / "tui" / "transport")
NAMED = frozenset({"state", "framing"})


def _named(node: ast.expr) -> bool:
    if isinstance(node, ast.Attribute):
        return node.attr in NAMED
    return isinstance(node, ast.Name) and node.id in NAMED


def _strings(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(_strings(e) for e in node.elts)
    return False


def test_no_state_or_framing_is_compared_with_a_string() -> None:
    found = []
    for package in PACKAGES:
        for path in sorted(package.glob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if not isinstance(node, ast.Compare):
                    continue
                sides = [node.left, *node.comparators]
                if any(_named(s) for s in sides) and any(_strings(s) for s in sides):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []


def test_the_proxy_imports_no_httpx() -> None:
    found = []
    for path in sorted((ROOT / "tui" / "proxy").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            found += [f"{path.name}: {n}" for n in names if n.split(".")[0] == "httpx"]
    assert found == []
