"""BenchScreen in a tiny host App (Pilot): run a bench live, stop one, open past reports."""

from __future__ import annotations

import asyncio
import json

import pytest
from textual.app import App
from textual.widgets import DataTable, Input, Markdown, ProgressBar, Sparkline, Static

from tui.app.screens.bench import BenchScreen
from tui.config import Config
from tui.engines.base import EngineSpec

SIZE = (120, 50)


def config(**options) -> Config:
    opts = {"token_ms": 3.0, "ttft_ms": 5.0}
    opts.update(options)
    return Config(default_engine="p", engines={"p": EngineSpec("p", "pace", options=opts)})


class Host(App):
    def __init__(self, screen: BenchScreen) -> None:
        super().__init__()
        self.bench_screen = screen

    def on_mount(self) -> None:
        self.push_screen(self.bench_screen)


async def wait_until(pilot, cond, timeout: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not cond():
        if loop.time() > end:
            raise AssertionError("timed out waiting for the bench screen")
        await pilot.pause(0.05)


async def test_runs_a_bench_with_live_progress_and_opens_its_report(tmp_path):
    screen = BenchScreen(config(), reports_dir=tmp_path)
    app = Host(screen)
    async with app.run_test(size=SIZE) as pilot:
        screen.query_one("#runs", Input).value = "4"
        screen.query_one("#max_tokens", Input).value = "8"
        screen.query_one("#concurrency", Input).value = "1,2"
        await pilot.click("#start")
        await wait_until(pilot, lambda: screen.last_out is not None)
        bar = screen.query_one("#progress", ProgressBar)
        assert bar.total == bar.progress == 1 + 4 + 8  # warm-up + c=1 + c=2
        assert len(screen.query_one("#ttft_spark", Sparkline).data) == 12
        assert len(screen.query_one("#tps_spark", Sparkline).data) == 12
        levels = screen.query_one("#levels", DataTable)
        assert levels.row_count == 2
        assert [str(c) for c in levels.get_row_at(1)[:4]] == ["p", "c=2", "8", "0"]
        report = json.loads((screen.last_out / "report.json").read_text())
        assert report["partial"] is False and report["summary"]["engines"][0]["ok"] == 12
        # the report opened in the viewer and is listed as a past report
        md = screen.query_one("#report_md", Markdown)
        assert "infertop bench report" in md.source
        past = screen.query_one("#past", DataTable)
        assert past.row_count == 1 and str(past.get_row_at(0)[1]) == "complete"


async def test_stop_writes_a_partial_report(tmp_path):
    screen = BenchScreen(config(token_ms=20.0), reports_dir=tmp_path)
    async with Host(screen).run_test(size=SIZE) as pilot:
        screen.query_one("#runs", Input).value = "200"
        await pilot.click("#start")
        await wait_until(pilot, lambda: screen.query_one("#progress", ProgressBar).progress >= 3)
        await pilot.click("#stop")
        await wait_until(pilot, lambda: screen.last_out is not None)
        assert json.loads((screen.last_out / "report.json").read_text())["partial"] is True
        assert "PARTIAL" in str(screen.query_one("#status", Static).render())
        assert str(screen.query_one("#past", DataTable).get_row_at(0)[1]) == "partial"


@pytest.mark.parametrize(
    "field, value, msg",
    [
        ("engines", "nope", "unknown engine 'nope'"),
        ("runs", "0", "--runs must be at least 1"),
        ("concurrency", "1,x", "does not parse"),
        ("runs", "abc", "not a whole number"),
    ],
)
async def test_bad_input_is_one_line_and_nothing_runs(tmp_path, field, value, msg):
    screen = BenchScreen(config(), reports_dir=tmp_path)
    async with Host(screen).run_test(size=SIZE) as pilot:
        screen.query_one(f"#{field}", Input).value = value
        await pilot.click("#start")
        await pilot.pause()
        assert msg in str(screen.query_one("#status", Static).render())
        assert screen.runner is None and not list(tmp_path.iterdir())


async def test_escape_leaves_the_screen(tmp_path):
    screen = BenchScreen(config(), reports_dir=tmp_path)
    app = Host(screen)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is not screen


async def test_the_app_gives_the_screen_its_config(tmp_path):
    """b on the chat opens the bench screen on the app's own config (passed down, not
    read from the app by name)."""
    from tui.app.app import InfertopApp

    cfg = config()
    app = InfertopApp(
        cfg, state_path=None, telemetry=False, record_session=False, session_path=tmp_path / "s"
    )
    async with app.run_test(size=SIZE) as pilot:
        app.action_bench()
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, BenchScreen) and screen.config is cfg
        assert screen.query_one("#engines", Input).value == "p"


@pytest.mark.engine
async def test_real_llamacpp_bench_from_the_screen(tmp_path, model_path):
    """The real in-process llama.cpp engine, driven from the screen's worker thread."""
    cfg = Config(
        default_engine="local", engines={"local": EngineSpec("local", "llamacpp", model="default")}
    )
    screen = BenchScreen(cfg, reports_dir=tmp_path)
    async with Host(screen).run_test(size=SIZE) as pilot:
        screen.query_one("#runs", Input).value = "2"
        screen.query_one("#max_tokens", Input).value = "8"
        await pilot.click("#start")
        await wait_until(pilot, lambda: screen.last_out is not None, timeout=240)
        report = json.loads((screen.last_out / "report.json").read_text())
        e = report["summary"]["engines"][0]
        assert e["kind"] == "llamacpp" and e["ok"] == 2 and e["failed"] == 0
        assert len(screen.query_one("#ttft_spark", Sparkline).data) == 2
        assert "SmolLM2" in screen.query_one("#report_md", Markdown).source
