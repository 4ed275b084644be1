"""Which thread each part of a chat turn runs on (docs/architecture.md, "The route of one
token"): the core's listener on its caller's loop; every stream event added, and shown to
the ``tap``, in the engine host's thread: a loop thread of its own for an in-process
engine, the HTTP reader thread itself for an engine at a URL (the host runs on the loop
that reads and stamps its bytes: one thread fewer)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.support import pace_server
from tui.chat.core import ChatCore
from tui.config import parse_config


async def threads_of_a_turn(text: str) -> tuple[set[str], set[str]]:
    """(threads the listener ran on, threads the tap ran on) over one turn."""
    told: set[str] = set()
    tapped: set[str] = set()
    core = ChatCore(
        parse_config(text, Path("t.toml")),
        lambda event: told.add(threading.current_thread().name),
        tap=lambda slot, event: tapped.add(threading.current_thread().name),
    )
    try:
        m = (await core.run_turn(core.start_turn("q")))["A"]
        assert m.error is None and m.output_tokens == 8
    finally:
        await core.close()
    return told, tapped


async def test_an_in_process_engine_adds_its_events_in_its_hosts_own_thread(two):
    told, tapped = await threads_of_a_turn(two)
    assert told == {threading.current_thread().name}
    assert tapped == {"engine-s1"}


@pytest.fixture
def pace_url():
    port, _server, stop = pace_server.start_in_thread(
        pace_server.PaceConfig(tokens=8, interval_ms=2)
    )
    yield f"http://127.0.0.1:{port}"
    stop()


async def test_an_engine_at_a_url_adds_its_events_in_the_http_reader_thread(pace_url):
    text = (
        'default_engine = "p"\n[generation]\nmax_tokens = 8\n'
        f'[engines.p]\nkind = "openai"\nurl = "{pace_url}"\n'
    )
    told, tapped = await threads_of_a_turn(text)
    assert told == {threading.current_thread().name}
    assert tapped == {"infertop-http-reader"}
