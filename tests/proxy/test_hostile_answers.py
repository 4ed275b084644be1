"""Issue 48, items 1 and 5, through the proxy at the issue's scale: answers whose engine
fields attack what the proxy keeps of each request (tests/support/hostile_answers.py),
from a scripted upstream. The client gets every byte unchanged; the request is measured,
not lost; what the proxy keeps is bounded.

- Item 1: a two-character answer whose continuous usage claims 12,000,000 or 2**53 − 1
  tokens. Main: +91 MiB kept and a 2.3 s stall; a MemoryError that lost the request.
- Item 5: answers whose last chunk has a 1,000,000-key ``timings`` (16 MB). Main: 10 of
  them grew the proxy from 34 to 1,025 MiB (~100 MiB kept an answer) and one --events
  line reached 24 MB. Here 5 (CPU time: 16 MB through the proxy costs ~0.6 s of CPU an
  answer); the 4 after the first may add 64 MiB (main: ~400 MiB).

Memory is the process's resident size after a collection and ``malloc_trim`` (what the
proxy still holds, not what the allocator kept for later), read from /proc.
"""

from __future__ import annotations

import ctypes
import gc
import json
from pathlib import Path

import httpx
import pytest

from tests.proxy.proxy_support import wait_until
from tests.support.hostile_answers import DOCUMENTED_TIMINGS, fat_fields, inflated_counts
from tests.support.scripted_upstream import ScriptedUpstream, chunked, sse_head

CHAT = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}


def settled_rss() -> int:
    """Resident bytes of this process after a full collection and malloc_trim."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: the number is only looser
        pass
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * 4096


def ask(proxy_url: str) -> bytes:
    with httpx.Client(timeout=60) as c:
        with c.stream("POST", proxy_url + "/v1/chat/completions", json=CHAT) as r:
            assert r.status_code == 200
            return b"".join(r.iter_raw())


@pytest.mark.parametrize("claimed", [12_000_000, 2**53 - 1])
def test_an_inflated_count_is_measured_as_an_estimate(start_proxy, claimed: int) -> None:
    events = inflated_counts(claimed)
    body = b"".join(events)
    pieces = [b"%x\r\n%s\r\n" % (len(e), e) for e in events] + [b"0\r\n\r\n"]
    script = [(0.0, sse_head())] + [(0.005, p) for p in pieces]  # one read each
    up = ScriptedUpstream(lambda _req: script)
    try:
        proxy = start_proxy(up.url)
        before = settled_rss()
        assert ask(proxy.url) == body  # forwarded unchanged
        wait_until(lambda: proxy.call(lambda: len(proxy.proxy.book.recent)) == 1)
        rec = proxy.call(lambda: proxy.proxy.book.recent[-1])
        grown = settled_rss() - before
    finally:
        up.stop()
    m = rec.metrics
    assert rec.state == "done" and rec.timeline.text == "hi"
    assert (m.output_tokens, m.output_tokens_source) == (2, "chunk-count-estimate")
    assert rec.row().output_estimated and m.itl_token_estimated
    assert m.itl_ms_p50 is not None and m.itl_ms_p50 > 0.0  # the gap, not gap / 12 M
    assert grown < 16 * 1024 * 1024, grown  # main: +91 MiB (12 M), MemoryError (2**53 − 1)


def test_million_key_timings_keep_the_proxy_small(start_proxy, tmp_path: Path) -> None:
    events = fat_fields(1_000_000, 100_000)
    answer = sse_head() + chunked(*events)
    up = ScriptedUpstream(lambda _req: [(0, answer)])
    events_path = tmp_path / "events.ndjson"
    try:
        proxy = start_proxy(up.url, kind="llama-server", events_path=events_path)
        ask(proxy.url)  # the first: what the proxy and the parser set up once
        wait_until(lambda: proxy.call(lambda: len(proxy.proxy.book.recent)) == 1, 60)
        before = settled_rss()
        for _ in range(4):
            ask(proxy.url)
        wait_until(lambda: proxy.call(lambda: len(proxy.proxy.book.recent)) == 5, 60)
        grown = settled_rss() - before
        recs = proxy.call(lambda: list(proxy.proxy.book.recent))
    finally:
        up.stop()
    # 4 answers of 16 MB each: main kept every key of each (~100 MiB an answer)
    assert grown < 64 * 1024 * 1024, grown
    for rec in recs:
        assert rec.state == "done" and rec.timeline.truth.raw == DOCUMENTED_TIMINGS
        assert len(rec.metrics.finish_reason) == 40
    wait_until(lambda: events_path.exists() and len(events_path.read_bytes().splitlines()) == 5)
    lines = events_path.read_bytes().splitlines()
    assert max(len(x) for x in lines) < 4096, max(len(x) for x in lines)  # main: 24 MB
    assert json.loads(lines[-1])  # each line whole JSON
