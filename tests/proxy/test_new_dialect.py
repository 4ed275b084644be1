"""A dialect added by one descriptor entry and one decoder class
(tests/support/lines_dialect.py) is measured by the proxy like the built-in ones: its
route picks it, its answer is read by its decoder, and the request's row has its text
and counts."""

from __future__ import annotations

import httpx

from tests.proxy.proxy_support import wait_until
from tests.support.lines_dialect import lines_dialect
from tests.support.scripted_upstream import ScriptedUpstream


def test_the_proxy_measures_a_new_dialect(start_proxy) -> None:
    lines = [b'{"say": "Hel"}\n', b'{"say": "lo"}\n', b'{"end": 2}\n']
    head = (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n"
    )
    script = [(0.0, head)] + [(0.005, b"%x\r\n%s\r\n" % (len(x), x)) for x in lines]
    script.append((0.0, b"0\r\n\r\n"))  # each line a read of its own, then the end
    up = ScriptedUpstream(lambda _req: script)
    try:
        with lines_dialect():
            proxy = start_proxy(up.url)
            r = httpx.post(proxy.url + "/v1/lines", json={"model": "m"}, timeout=10)
            assert r.content == b"".join(lines)  # forwarded unchanged
            wait_until(lambda: proxy.call(lambda: len(proxy.proxy.book.recent)) == 1)
            rec = proxy.call(lambda: proxy.proxy.book.recent[-1])
    finally:
        up.stop()
    assert rec.dialect == "test-lines" and rec.stream is True  # streamed by default
    assert rec.state == "done" and rec.timeline.text == "Hello"
    m = rec.metrics
    assert (m.output_tokens, m.output_tokens_source) == (2, "usage")
    assert m.ttft_ms is not None and m.ttft_ms < m.e2e_ms
