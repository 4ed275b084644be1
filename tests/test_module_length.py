"""No module in tui/ is over 400 lines (the brief's taste, STYLE.md: a file that passes
~400 lines is asking to be split into modules with one job each). Every line of the
file counts, its docstrings, comments and blank lines too (what ``wc -l`` says)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 400

# Modules allowed over the limit for a while (e.g. while other work changes them; split
# once it has landed). Every entry must still be over the limit —
# test_every_allowed_module_is_still_long fails on one that is not — so the list only
# shrinks. Empty since the splits of 2026-12-06.
STILL_LONG: set[str] = set()


def module_lengths(package: Path, limit: int = LIMIT) -> dict[str, int]:
    """``{path: lines}`` for every module of ``package`` over ``limit`` lines, the path
    as from the package's parent (``tui/cli/run.py``)."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        n = len(path.read_text(encoding="utf-8").splitlines())
        if n > limit:
            out[path.relative_to(package.parent).as_posix()] = n
    return out


def too_long(over: dict[str, int], allowed: set[str]) -> list[str]:
    """The modules over the limit that the allow-list does not name, with their lines."""
    return [f"{path} ({n} lines)" for path, n in over.items() if path not in allowed]


def no_longer_long(over: dict[str, int], allowed: set[str]) -> list[str]:
    """The allow-list's modules now within the limit: their entries are to be removed."""
    return sorted(allowed - set(over))


def test_no_module_in_tui_is_over_400_lines() -> None:
    assert too_long(module_lengths(ROOT / "tui"), STILL_LONG) == []


def test_every_allowed_module_is_still_long() -> None:
    """An entry of STILL_LONG whose module was split (or is gone) is a stale exception."""
    assert no_longer_long(module_lengths(ROOT / "tui"), STILL_LONG) == []


def test_the_count_sees_a_long_module_and_a_stale_exception(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "short.py").write_text("x = 1\n" * LIMIT)
    (pkg / "sub" / "long.py").write_text("x = 1\n" * (LIMIT + 1))
    (pkg / "listed.py").write_text('"""A docstring."""\n\n# a comment\n' + "\n" * (LIMIT - 2))
    over = module_lengths(pkg)
    assert over == {"pkg/listed.py": LIMIT + 1, "pkg/sub/long.py": LIMIT + 1}
    assert too_long(over, {"pkg/listed.py"}) == [f"pkg/sub/long.py ({LIMIT + 1} lines)"]
    assert too_long(over, {"pkg/listed.py", "pkg/sub/long.py"}) == []
    assert no_longer_long(over, {"pkg/listed.py", "pkg/short.py"}) == ["pkg/short.py"]
