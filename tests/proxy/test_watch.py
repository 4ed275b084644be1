"""The watch client (what ``infertop --watch`` reads): rows and series from a live proxy,
a hostile "proxy" whose lines are refused one by one, a lost proxy retried."""

from __future__ import annotations

import json
import math
import threading

import httpx
import pytest

from tests.proxy.proxy_support import wait_until
from tests.support.scripted_upstream import HANG, ScriptedUpstream
from tui.core.table import clip
from tui.proxy.columns import COLUMNS
from tui.proxy.rows import row_from_json
from tui.proxy.watch import ProxyWatch, WatchError


def _chat(url: str, n: int, stream: bool = True) -> None:
    body = {"model": "pace", "stream": stream, "max_tokens": n, "messages": []}
    httpx.post(url + "/v1/chat/completions", json=body, timeout=10)


def test_rows_series_and_detail_from_a_live_proxy(pace, start_proxy) -> None:
    url, _ = pace
    proxy = start_proxy(url)
    _chat(proxy.url, 8)  # before the watcher: it comes in the hello
    w = ProxyWatch(proxy.url)
    w.start()
    try:
        wait_until(lambda: w.snapshot().attached)
        assert [r.output_tokens for r in w.snapshot().rows] == [8]
        threads = [threading.Thread(target=_chat, args=(proxy.url, 60)) for _ in range(3)]
        for t in threads:
            t.start()
        wait_until(lambda: sum(r.in_flight for r in w.snapshot().rows) == 3)
        for t in threads:
            t.join()
        _chat(proxy.url, 5, stream=False)
        wait_until(
            lambda: len(w.snapshot().rows) == 5 and not any(r.in_flight for r in w.snapshot().rows)
        )
        snap = w.snapshot()
        assert snap.info["upstream"] == url and snap.totals["ended"] == 5
        assert sorted(r.output_tokens for r in snap.rows) == [5, 8, 60, 60, 60]
        assert len(snap.series["ttft"]) == 4  # the one not streamed has no TTFT
        assert len(snap.series["decode"]) == 4 and snap.series["rate"]
        assert all(r.age_ms > 0 for r in snap.rows)
        rid = next(r.id for r in snap.rows if r.output_tokens == 8)
        d = w.detail(rid)
        assert d["metrics"]["output_tokens"] == 8 and "text" not in d
        assert w.detail(rid, with_text=True)["text"]["response"].startswith("tok0")
        with pytest.raises(WatchError, match="404"):
            w.detail("no-such-id")
    finally:
        w.stop()


def _hostile_stream(lines: list[bytes]) -> ScriptedUpstream:
    head = (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n"
    )
    frames = b"".join(b"%x\r\n%s\r\n" % (len(x) + 1, x + b"\n") for x in lines)
    return ScriptedUpstream(lambda _req: [(0, head + frames), (0, HANG)])


ROW = {"id": "a-1", "client": "127.0.0.1:5", "method": "POST", "route": "/v1/chat/completions",
       "model": "m", "stream": True, "state": "decoding", "output_tokens": 3}  # fmt: skip


OSC52 = "\x1b]52;c;QUFB\x07m"  # a clipboard write, in a model name


def test_a_hostile_proxy_stream_is_refused_line_by_line() -> None:
    bad_rows = [
        {**ROW, "id": "nan", "ttft_ms": float("nan")},
        {**ROW, "id": "inf", "tps": math.inf},
        {**ROW, "id": "state", "state": "pwned"},
        {**ROW, "id": "tokens", "output_tokens": -4},
        {**ROW, "id": "huge", "output_tokens": 10**30},
        {**ROW, "id": "type", "model": ["x"]},
        {**ROW, "id": 7},
    ]
    lines = [json.dumps({"event": "hello", "proxy": {}, "rows": [ROW], "totals": {}}).encode()]
    lines += [json.dumps({"event": "start", "row": r}, allow_nan=True).encode() for r in bad_rows]
    lines += [
        b"{not json",
        b"[1,2,3]",
        b'{"event": "tick", "rows": "nope"}',
        b'{"event": "unknown"}',
        b"[" * 100_000,
        json.dumps({"event": "start", "row": {**ROW, "id": "ok-2", "model": OSC52}}).encode(),
    ]
    up = _hostile_stream(lines)
    w = ProxyWatch(up.url)
    w.start()
    try:
        wait_until(lambda: w.snapshot().bad_lines == len(bad_rows) + 5)
        wait_until(lambda: len(w.snapshot().rows) == 2)
        snap = w.snapshot()
        assert [r.id for r in snap.rows] == ["a-1", "ok-2"] and snap.attached
        hostile = snap.rows[1]
        cells = [clip(c.text(hostile), 40) for c in COLUMNS]
        assert all("\x1b" not in c and "\x07" not in c for c in cells)
    finally:
        w.stop()
        up.stop()


def test_a_lost_proxy_is_retried_and_said_so(pace, start_proxy) -> None:
    url, _ = pace
    proxy = start_proxy(url)
    w = ProxyWatch(proxy.url)
    w.start()
    try:
        wait_until(lambda: w.snapshot().attached)
        proxy.stop()
        wait_until(lambda: "proxy lost" in w.snapshot().status, 15)
        assert not w.snapshot().attached and "retrying in" in w.snapshot().status
    finally:
        w.stop()


def test_only_plain_http_urls_are_watched() -> None:
    for bad in ("https://box:8800", "http://user:pw@box:8800", "ftp://x"):
        with pytest.raises(WatchError):
            ProxyWatch(bad)


def test_row_validation_cuts_text_short() -> None:
    r = row_from_json({**ROW, "error": "e" * 10_000, "model": "m" * 10_000})
    assert len(r.error) == 300 and len(r.model) == 300
