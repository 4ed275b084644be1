"""The compare screen: two frozen real reports (in-process llama.cpp, then llama-server,
benched on the project's 2-core machine) side by side, and opening it from the bench screen.

The reports are frozen so the snapshot is stable; tests/bench/test_compare.py checks the
numbers on fresh benches.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

from textual.app import App
from textual.widgets import DataTable, Static

from tui.app.screens.bench import BenchScreen
from tui.app.screens.compare import CompareApp, CompareScreen
from tui.bench.report.files import load_report
from tui.config import Config
from tui.engines.base import EngineSpec

REPORTS = Path(__file__).parent / "compare_reports"
SIZE = (150, 48)


async def wait_until(pilot, cond, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not cond():
        assert loop.time() < end, "timed out waiting for the compare screen"
        await pilot.pause(0.05)


def compare_app() -> CompareApp:
    a, b = Path("a"), Path("b")
    return CompareApp(a, load_report(REPORTS / "a"), b, load_report(REPORTS / "b"))


def test_compare_screen_side_by_side(snap_compare):
    async def settle(pilot) -> None:  # type: ignore[no-untyped-def]
        await wait_until(pilot, lambda: pilot.app.screen.result is not None)
        await pilot.pause(0.2)

    assert snap_compare(compare_app(), terminal_size=SIZE, run_before=settle)


async def test_compare_screen_shows_ratios_and_warnings():
    app = compare_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        await wait_until(pilot, lambda: screen.result is not None)
        table = screen.query_one("#compare-table", DataTable)
        assert table.row_count == 5
        first = [str(c) for c in table.get_row_at(0)]
        row = screen.result["comparisons"][0]["rows"][0]
        assert first[:3] == ["local → ls", "c=1", "decode tok/s"]
        assert first[5] == f"{row['ratio']:.3f}"
        warnings = str(screen.query_one("#compare-warnings", Static).render())
        assert (
            "5 environment field(s) differ" in warnings
            and "settings.max_tokens: 8 (A) vs 10 (B)" in warnings
        )
        await pilot.press("escape")
        await pilot.pause()
        assert app.return_code == 0 and not app.is_running


class Host(App):
    def __init__(self, screen: BenchScreen) -> None:
        super().__init__()
        self.bench_screen = screen

    def on_mount(self) -> None:
        self.push_screen(self.bench_screen)


async def test_bench_screen_compares_the_opened_report_with_the_highlighted_one(tmp_path):
    for name in ("a", "b"):
        shutil.copytree(REPORTS / name, tmp_path / f"2026-11-30T23-0{'ab'.index(name)}")
    cfg = Config(default_engine="x", engines={"x": EngineSpec("x", "openai", url="http://h:1")})
    screen = BenchScreen(cfg, reports_dir=tmp_path)
    app = Host(screen)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("c")  # nothing opened yet: a hint, no screen
        assert app.screen is screen
        past = screen.query_one("#past", DataTable)
        assert past.row_count == 2  # newest first: b, then a
        past.focus()
        past.move_cursor(row=1)
        await pilot.press("enter")  # open a
        await pilot.pause()
        assert screen.opened_report == tmp_path / "2026-11-30T23-00"
        past.move_cursor(row=0)
        await pilot.press("c")
        await wait_until(pilot, lambda: isinstance(app.screen, CompareScreen))
        cmp_screen = app.screen
        assert isinstance(cmp_screen, CompareScreen)
        assert (
            cmp_screen.a[0].name == "2026-11-30T23-00"
            and cmp_screen.b[0].name == "2026-11-30T23-01"
        )
        await wait_until(pilot, lambda: cmp_screen.result is not None)
        assert cmp_screen.query_one("#compare-table", DataTable).row_count == 5
        await pilot.press("escape")  # back to the bench screen, not out of the app
        await pilot.pause()
        assert app.screen is screen and app.is_running
