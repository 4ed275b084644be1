"""Reads observed later (tui/proxy/observe_queue.py): in arrival order, bounded in bytes,
and never so late that a row in flight stands still: the proxy's sweep observes them
with nobody reading, and every reader of the book sees them observed first."""

from __future__ import annotations

import asyncio

import httpx

from tui.proxy.observe_queue import ObserveQueue

CHAT = {"model": "pace", "stream": True, "max_tokens": 120, "messages": []}


def test_reads_are_observed_in_order_when_run() -> None:
    seen: list[tuple[str, int, bytes]] = []
    q = ObserveQueue()
    q.put(lambda t, d: seen.append(("a", t, d)), 1, b"x")
    q.put(lambda t, d: seen.append(("b", t, d)), 2, b"y")
    q.put(lambda t, d: seen.append(("a", t, d)), 3, b"z")
    assert seen == []  # nothing is observed as it is put
    q.run()
    assert seen == [("a", 1, b"x"), ("b", 2, b"y"), ("a", 3, b"z")]
    q.run()
    assert len(seen) == 3 and q.size == 0  # each read once


def test_the_queue_runs_itself_past_its_byte_limit() -> None:
    seen: list[int] = []
    q = ObserveQueue(limit=10)
    for t in range(3):
        q.put(lambda t, _d: seen.append(t), t, b"1234")  # 4, 8, 12 bytes waiting
    assert seen == [0, 1, 2] and q.items == [] and q.size == 0


def _unsettled_tokens(proxy) -> list[int]:  # type: ignore[no-untyped-def]
    """The records' token counts read on the proxy's loop as they stand, without
    observing the reads waiting first (as ProxyThread.call would)."""

    async def read() -> list[int]:
        return [r.tokens for r in proxy.proxy.book.in_flight.values()]

    return asyncio.run_coroutine_threadsafe(read(), proxy.loop).result(10)


def test_a_row_in_flight_moves_with_nobody_reading(pace, start_proxy) -> None:
    url, _ = pace
    proxy = start_proxy(url)
    with httpx.Client(timeout=10) as c:
        with c.stream("POST", proxy.url + "/v1/chat/completions", json=CHAT) as r:
            seen = 0
            lines = r.iter_lines()
            for line in lines:
                seen += '"content"' in line
                if seen == 60:  # 0.6 s or more of tokens: the sweep (every 0.1 s) ran
                    counts = _unsettled_tokens(proxy)
                    break
            for _ in lines:  # the rest
                pass
    (n,) = counts
    assert 0 < n <= 60


def test_a_watchers_ticks_show_the_stream_as_it_goes(pace, start_proxy) -> None:
    url, _ = pace
    proxy = start_proxy(url)
    live: list[int] = []
    with httpx.Client(timeout=10) as c:
        with c.stream("GET", proxy.url + "/infertop/events") as events:
            it = events.iter_lines()
            next(it)  # hello
            with c.stream("POST", proxy.url + "/v1/chat/completions", json=CHAT):
                for x in it:  # 1.2 s of tokens, a tick each 0.5 s
                    ev = httpx.Response(200, content=x).json()
                    if ev["event"] == "end":
                        break
                    if ev["event"] == "tick" and ev["rows"]:
                        live.append(ev["rows"][0]["output_tokens"])
    assert live and 0 < live[-1] < 120 and live == sorted(live)
