"""No function in tui/ is over 100 lines (the brief's taste: a long function is several jobs
that want names). Counted from the ``def`` line to the function's last line, its
docstring and comments included; a nested function counts inside its outer one too."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 100


def long_functions(package: Path, limit: int = LIMIT) -> list[str]:
    """``path:line name (n lines)`` for every function of ``package`` over ``limit``."""
    out = []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > limit:
                    where = path.relative_to(package.parent)
                    out.append(f"{where}:{node.lineno} {node.name} ({n} lines)")
    return out


def test_no_function_in_tui_is_over_100_lines() -> None:
    assert long_functions(ROOT / "tui") == []


def test_the_count_sees_a_long_function(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(LIMIT))
    (pkg / "m.py").write_text(f"def short():\n    pass\n\n\nasync def long():\n{body}\n")
    assert long_functions(pkg) == [f"pkg/m.py:5 long ({LIMIT + 1} lines)"]
