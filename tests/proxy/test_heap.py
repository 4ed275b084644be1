"""A forwarded request leaves no reference cycle behind: what it made is freed by
reference counting when its row goes, not by the cycle collector. A full collection in a
busy proxy held every stream for 20-47 ms (benchmarks/proxy_overhead.py: 64 streams, p99
of added TTFT +49 ms), most of it collecting finished requests and their observers."""

from __future__ import annotations

import gc
import types

import httpx

from tui.proxy import book

BODY = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}


def _ours(o: object) -> bool:
    if isinstance(o, types.FunctionType):
        return str(o.__module__).startswith("tui.")
    return type(o).__module__.startswith("tui.")


def test_finished_requests_leave_no_cycles(pace, start_proxy, monkeypatch) -> None:
    monkeypatch.setattr(book, "KEEP", 2)  # rows leave the book after two more requests
    monkeypatch.setattr(book, "KEEP_TIMELINE", 1)
    monkeypatch.setattr(book, "KEEP_TEXT", 1)
    url, _ = pace
    proxy = start_proxy(url)
    with httpx.Client(timeout=10) as c:
        for _ in range(3):  # connections, pools and caches made once
            with c.stream("POST", proxy.url + "/v1/chat/completions", json=BODY) as r:
                r.read()
        gc.collect()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            for _ in range(8):
                with c.stream("POST", proxy.url + "/v1/chat/completions", json=BODY) as r:
                    r.read()
            proxy.call(lambda: None)  # its reads observed, its rows settled
            gc.collect()
            left = [o for o in gc.garbage if _ours(o)]
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
    assert proxy.call(lambda: proxy.proxy.book.ended) == 11
    names = sorted({getattr(o, "__qualname__", type(o).__qualname__) for o in left})
    assert left == [], names
