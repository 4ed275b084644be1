"""A server's words are never read as markup by the TUI (issue 48, item 4).

A real HTTP server on loopback (in this file: a few lines of ``http.server``) answers
HTTP 500 with an error message made of Textual markup, first to ``/v1/models`` (the
engine's load: at every start), then, once it lists its models, to the chat request (mid
chat). Before the fix, ``overloaded [/]`` (a tag with nothing to close) and
``[link='https://x']click[/link]`` (a bad link value) made the TUI exit with code 1 as
the notification was drawn; ``[@click=app.quit]x[/]`` became a live action. Here the
app keeps running, and the notification and the answer's summary line show each text
as the server sent it, with no style, link or action in them. The same for report
folders named with markup, in the bench screen's list and the compare screen.
"""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from textual.app import App
from textual.content import Content
from textual.widget import Widget
from textual.widgets import DataTable, Static

from tests.app.app_support import gen, summary, turns
from tests.app.screen_text import screen_text
from tui.app.screens.bench import BenchScreen
from tui.app.screens.compare import CompareApp, CompareScreen
from tui.bench.report.files import load_report
from tui.config import Config
from tui.engines.base import EngineSpec

HOSTILE = [
    "overloaded [/]",
    "[link='https://x']click[/link]",
    "[@click=app.quit]x[/]",
]
# as folder names (no "/"): a link value Textual cannot read (it raised), a live action
FOLDERS = ["x [link=a:b]y", "[@click=app.quit]quit me"]
REPORTS = Path(__file__).parent / "compare_reports"


class ErrorServer(BaseHTTPRequestHandler):
    """An OpenAI-compatible server whose model list and chat each answer HTTP 500 with
    ``error`` (class attributes set by the test), or work when it is None."""

    models_error: str | None = None
    chat_error: str | None = None

    def _json(self, obj: object, status: int = 200) -> None:
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        if self.models_error is not None:
            self._json({"error": {"message": self.models_error}}, 500)
        else:
            self._json({"object": "list", "data": [{"id": "m", "object": "model"}]})

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._json({"error": {"message": self.chat_error or "no"}}, 500)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@pytest.fixture
def server() -> Iterator[tuple[str, type[ErrorServer]]]:
    handler = type("Handler", (ErrorServer,), {})  # class attributes of this test's own
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", handler
    finally:
        httpd.shutdown()
        httpd.server_close()


def toasts(app: App[Any]) -> list[Content]:
    """What each notification on screen draws."""
    drawn = []
    for toast in app.screen.query("Toast"):
        content = toast.render()
        assert isinstance(content, Content)
        drawn.append(content)
    return drawn


def literal(content: Content, text: str) -> None:
    """``content`` shows ``text`` as it is, with no style, link or action anywhere."""
    assert text in content.plain, content.plain
    assert content.spans == [], f"markup read in {content.plain!r}: {content.spans}"


@pytest.mark.parametrize("message", HOSTILE, ids=["close", "link", "click"])
async def test_a_server_error_is_shown_as_it_is_at_start_and_mid_chat(  # type: ignore[no-untyped-def]
    message: str, server, make_config, build_app, wait_for
):
    url, handler = server
    handler.models_error = message  # the engine's load fails: at every start
    cfg = make_config(
        f'default_engine = "h"\n{gen(4)}[engines.h]\nkind = "openai"\nurl = "{url}"\n'
    )
    app = build_app(cfg)
    async with app.run_test(size=(120, 36), notifications=True) as pilot:
        await wait_for(pilot, lambda: any(message in t.plain for t in toasts(app)), 30)
        await pilot.pause(0.3)  # drawn (before the fix: the app stopped here)
        assert app.is_running and app.return_code is None
        (shown,) = [t for t in toasts(app) if message in t.plain]
        literal(shown, f"engine h: HTTP 500 Internal Server Error: {message}")
        app.clear_notifications()
        handler.models_error, handler.chat_error = None, message  # now: mid chat
        assert await app.chat.submit_text("hi")
        await wait_for(pilot, lambda: bool(turns(app)) and turns(app)[0].finished, 30)
        await wait_for(pilot, lambda: any(message in t.plain for t in toasts(app)), 10)
        await pilot.pause(0.3)
        assert app.is_running and app.return_code is None
        for drawn in toasts(app):
            literal(drawn, message)
        assert message in summary(turns(app)[0])
        line = turns(app)[0].query_one(".summary", Static).render()
        assert isinstance(line, Content) and line.spans == []
    assert app.return_code in (None, 0)


def _named_reports(tmp_path: Path) -> tuple[Path, Path]:
    a, b = tmp_path / FOLDERS[0], tmp_path / FOLDERS[1]
    shutil.copytree(REPORTS / "a", a)
    shutil.copytree(REPORTS / "b", b)
    return a, b


def _title_plain(widget: Widget) -> str:
    """A widget's border title as drawn (Textual keeps it as markup: read it back)."""
    title = widget.border_title
    assert title is not None
    return Content.from_markup(title).plain


async def test_report_folders_named_with_markup_in_the_compare_screen(tmp_path: Path) -> None:
    a, b = _named_reports(tmp_path)
    app = CompareApp(a, load_report(a), b, load_report(b))
    async with app.run_test(size=(150, 48)) as pilot:
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        while screen.result is None:
            await pilot.pause(0.05)
        await pilot.pause(0.2)
        assert app.is_running
        title = screen.query_one("#compare-title", Static).render()
        assert isinstance(title, Content)
        literal(title, f"A: {a}    B: {b}")
        assert _title_plain(screen.query_one("#side-a")) == f"A: {FOLDERS[0]}"
        assert _title_plain(screen.query_one("#side-b")) == f"B: {FOLDERS[1]}"
        shown = screen_text(app)
        assert f"A: {FOLDERS[0]}" in shown and f"B: {FOLDERS[1]}" in shown


class Host(App[None]):
    def __init__(self, screen: BenchScreen) -> None:
        super().__init__()
        self.bench_screen = screen

    def on_mount(self) -> None:
        self.push_screen(self.bench_screen)


async def test_report_folders_named_with_markup_in_the_bench_screen(tmp_path: Path) -> None:
    _named_reports(tmp_path)
    cfg = Config(default_engine="x", engines={"x": EngineSpec("x", "openai", url="http://h:1")})
    app = Host(BenchScreen(cfg, reports_dir=tmp_path))
    async with app.run_test(size=(150, 48)) as pilot:
        await pilot.pause(0.3)
        assert app.is_running
        past = app.screen.query_one("#past", DataTable)
        names = sorted(str(past.get_row_at(i)[0]) for i in range(past.row_count))
        assert names == sorted(FOLDERS)
        shown = screen_text(app)
        assert FOLDERS[0] in shown and FOLDERS[1] in shown
