"""The ledger in the TUI (pilot tests, at 80×24 and wider): the chat's answers are kept;
the requests view's client column shows who, and ``u`` opens the usage screen (per
client and per model, over the hour / day / week, tokens over time); the palette's
"History: past requests" lists them, filters by client, model and state, and Enter
opens one request's numbers; "Usage: this engine, last 24 h" from the chat. Names that
clients chose are shown terminal-safe."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from tests.app.app_support import SYNTH, gen, submit
from tests.app.screen_text import screen_text
from tests.app.test_requests_screen import FixedFeed
from tests.ledger.ledger_support import outcome
from tui.app.screens.history import HistoryScreen, PastRequestScreen
from tui.app.screens.requests import RequestsScreen
from tui.app.screens.usage import UsageScreen
from tui.core.outcome import ClientIdentity
from tui.core.verdict import Breakdown, Verdict
from tui.ledger.writer import LedgerSink

EVIL = "mallory\x1b]0;owned\x07"


def _fill(path: Path) -> None:
    sink = LedgerSink(path)
    now = time.time()
    queued = Verdict("queued", "queued 1.3 s behind 1 busy slot (-np 1)", Breakdown())
    for i in range(6):
        o = outcome("alice", t0=now - 600 + i, prompt=100, output=50, model="qwen3")
        sink.publish(replace(o, verdict=queued) if i < 2 else o)
    sink.publish(outcome(ClientIdentity(user=EVIL), t0=now - 300, prompt=7, output=3))
    sink.publish(outcome("bob", t0=now - 200, state="failed", output=None, model="qwen3"))
    sink.publish(outcome("bob", t0=now - 3 * 86_400, prompt=1, output=1))  # last week only
    sink.flush()
    sink.close()


def _config(make_config):  # type: ignore[no-untyped-def]
    return make_config('default_engine = "synth"\n' + gen() + SYNTH)


async def test_usage_screen_from_the_requests_view_at_80x24(
    make_config, build_app, wait_for, tmp_path
) -> None:
    ledger = tmp_path / "ledger.sqlite3"
    _fill(ledger)
    feed = FixedFeed()
    app = build_app(_config(make_config), watch=feed, ledger=ledger)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RequestsScreen))
        await pilot.pause(0.2)
        await pilot.press("u")
        await wait_for(pilot, lambda: isinstance(app.screen, UsageScreen))
        screen = app.screen
        assert isinstance(screen, UsageScreen)
        await wait_for(pilot, lambda: screen.result is not None)
        await pilot.pause(0.2)
        text = screen_text(app)
        assert "last day: 8 requests" in text, text
        assert "alice" in text and "qwen3" in text and "\x1b" not in text
        assert "mallory" in text  # its escape sequence made visible, not obeyed
        clients = {g.key[0]: g for g in screen.result["clients"].groups}
        assert clients["alice"].output_tokens == 300 and clients["bob"].failed == 1
        assert sum(screen.result["series"]["all"]) == 6 * 150 + 10 + 10
        await pilot.press("v")  # the second table per verdict, and back per model
        await wait_for(pilot, lambda: "queued" in screen_text(app))
        verdicts = {g.key[0]: g.requests for g in screen.result["verdicts"].groups}
        assert verdicts == {"queued": 2, "(none)": 6}
        assert "qwen3" not in screen_text(app)
        await pilot.press("v")
        await wait_for(pilot, lambda: "qwen3" in screen_text(app))
        assert "queued" not in screen_text(app)
        await pilot.press("w")  # the week: bob's older request too
        await wait_for(pilot, lambda: "last week: 9 requests" in screen_text(app))
        await pilot.press("h")
        await wait_for(pilot, lambda: "last hour: 8 requests" in screen_text(app))
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, RequestsScreen))


async def test_history_filters_and_opens_a_requests_numbers(
    make_config, build_app, wait_for, tmp_path
) -> None:
    ledger = tmp_path / "ledger.sqlite3"
    _fill(ledger)
    app = build_app(_config(make_config), ledger=ledger)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause(0.2)
        app.action_command_palette()
        await pilot.pause(0.2)
        await pilot.press(*"history")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, HistoryScreen))
        screen = app.screen
        assert isinstance(screen, HistoryScreen)
        await wait_for(pilot, lambda: len(screen.rows) == 9)
        screen.query_one("#history-filter").focus()
        await pilot.press(*"client=bob state=failed", "enter")
        await wait_for(pilot, lambda: len(screen.rows) == 1)
        assert screen.rows[0].state == "failed" and screen.rows[0].client == "bob"
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, PastRequestScreen))
        text = screen_text(app)
        assert "failed" in text and "bob" in text and "TTFT 100ms" in text, text
        assert "no prompt, answer or chunk times" in text
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, HistoryScreen))
        screen.query_one("#history-filter").focus()  # by verdict: the two that queued
        await pilot.press(*(["backspace"] * 30), *"verdict=queued", "enter")
        await wait_for(pilot, lambda: len(screen.rows) == 2)
        assert {(r.client, r.verdict) for r in screen.rows} == {("alice", "queued")}
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, PastRequestScreen))
        assert "done · verdict queued" in screen_text(app)
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, HistoryScreen))
        screen.query_one("#history-filter").focus()
        await pilot.press(*" verdict=slow", "enter")
        await wait_for(pilot, lambda: "verdict is one of failed" in screen_text(app))
        screen.query_one("#history-filter").focus()
        await pilot.press(*(["backspace"] * 40), *"nonsense", "enter")
        await wait_for(pilot, lambda: "is not client=" in screen_text(app))


async def test_the_chats_answers_are_kept_and_this_engine_last_24h(
    make_config, build_app, wait_for, tmp_path
) -> None:
    ledger = tmp_path / "ledger.sqlite3"
    app = build_app(_config(make_config), ledger=ledger)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: app.chat.core.hosts.get("synth") is not None)
        await submit(pilot, "hello there")
        await wait_for(pilot, lambda: not app.chat.core.busy and app.chat.core.turn_no == 1)
        await pilot.pause(0.3)
        app.action_command_palette()
        await pilot.pause(0.2)
        await pilot.press(*"this engine")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, UsageScreen))
        screen: Any = app.screen
        assert screen.upstream == "in-process"
        await wait_for(pilot, lambda: screen.result is not None)
        (g,) = screen.result["clients"].groups
        assert g.key == ("infertop",) and g.requests == 1 and g.output_tokens == 12
    import sqlite3

    con = sqlite3.connect(str(ledger))
    assert con.execute("SELECT source, state FROM requests").fetchall() == [("chat", "done")]


async def test_who_shows_in_the_client_column(make_config, build_app, wait_for) -> None:
    feed = FixedFeed()
    import tests.app.test_requests_screen as t

    rows = t.ROWS
    old = rows[2].who
    rows[2].who = "alice"
    try:
        app = build_app(_config(make_config), watch=feed)
        async with app.run_test(size=(120, 30)) as pilot:
            await wait_for(
                pilot,
                lambda: isinstance(app.screen, RequestsScreen) and app.screen.table.row_count > 0,
            )
            await pilot.pause(0.2)
            text = screen_text(app)
            assert "alice" in text and "10.0.0.1:50001" in text
    finally:
        rows[2].who = old
