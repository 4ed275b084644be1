"""vLLM's own account of proxied requests: read from its /metrics only while no request
passes (never inside one), attributed only to a request that ran alone, against a fake
vLLM whose counters grow when it finishes a request (the real one: tests/http)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import httpx

from tests.proxy.proxy_support import wait_until
from tests.support.scripted_upstream import Exchange, ScriptedUpstream

FRAMES = [
    b'data: {"choices":[{"delta":{"role":"assistant","content":""}}]}\n\n',
    b'data: {"choices":[{"delta":{"content":"a"}}]}\n\n',
    b'data: {"choices":[{"delta":{"content":"b"}}]}\n\n',
    b'data: {"choices":[{"delta":{"content":"c"}}]}\n\n',
    b'data: {"choices":[{"delta":{},"finish_reason":"stop"}]}\n\n',
    b"data: [DONE]\n\n",
]


class FakeVLLM:
    """Generation: six SSE frames 60 ms apart (a request whose prompt is "side": at once;
    with ``gate`` set up, the last frame waits for it); /metrics: counters of the requests
    it has recorded (20 ms prefill, 60 ms decode, 3 tokens out, 5 in, each) and a gauge of
    those it runs, set together as vLLM sets them. A request is recorded once its stream
    ended; with ``hold`` set up, one not "side" only once ``hold`` is set too (vLLM
    records a request just after its last chunk: here, as late as a test likes)."""

    def __init__(self) -> None:
        self.gate: threading.Event | None = None
        self.hold: threading.Event | None = None
        self.up = ScriptedUpstream(self.script)

    def _posts(self) -> list[Exchange]:
        return [e for e in self.up.exchanges if e.request.startswith(b"POST")]

    def _recorded(self, e: Exchange) -> bool:
        held = self.hold is not None and not self.hold.is_set() and b'"side"' not in e.request
        return e.done and not held

    def finished(self) -> int:
        return sum(1 for e in self._posts() if self._recorded(e))

    def script(self, req: bytes) -> Iterator[tuple[float, bytes]]:
        if req.startswith(b"GET /metrics"):
            posts = self._posts()
            n = sum(1 for e in posts if self._recorded(e))
            text = (
                f'vllm:num_requests_running{{model_name="m"}} {len(posts) - n}\n'
                f'vllm:e2e_request_latency_seconds_count{{model_name="m"}} {n}\n'
                f'vllm:e2e_request_latency_seconds_sum{{model_name="m"}} {n * 0.2}\n'
                f"vllm:request_prefill_time_seconds_sum {n * 0.02}\n"
                f"vllm:request_decode_time_seconds_sum {n * 0.06}\n"
                f"vllm:request_queue_time_seconds_sum {n * 0.001}\n"
                f"vllm:generation_tokens_total {n * 3}\n"
                f"vllm:prompt_tokens_total {n * 5}\n"
            ).encode()
            yield 0, b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(text), text)
            return
        yield (
            0.0,
            (
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n"
            ),
        )
        side = b'"content":"side"' in req
        for i, f in enumerate(FRAMES):
            if i == len(FRAMES) - 1 and self.gate is not None and not side:
                self.gate.wait(30)
            yield (0.0 if side else 0.06), b"%x\r\n%s\r\n" % (len(f), f)
        yield 0.0, b"0\r\n\r\n"


def _chat(url: str, content: str = "x") -> None:
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": content}]}
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=10) as r:
        r.read()


def _recent(proxy, n: int):  # type: ignore[no-untyped-def]
    wait_until(lambda: proxy.call(lambda: len(proxy.proxy.book.recent)) == n)
    return proxy.call(lambda: list(proxy.proxy.book.recent))


def test_a_request_alone_gets_vllms_account_scraped_while_idle(start_proxy) -> None:
    fake = FakeVLLM()
    try:
        proxy = start_proxy(fake.up.url, kind="vllm")
        _chat(proxy.url)
        rec = _recent(proxy, 1)[-1]
        truth = rec.timeline.truth
        assert truth is not None, rec.truth_note
        assert truth.prompt_ms == 20.0 and truth.decode_ms == 60.0 and truth.output_tokens == 3
        m = rec.metrics
        assert m.engine_prefill_ms == 20.0 and m.ttft_minus_engine_prefill_ms > 0
        assert m.output_tokens == 3 and m.output_tokens_source == "usage"
        # two at once: neither can be attributed, and each says why (the second starts
        # once the first is in flight)
        flying = proxy.proxy.book.in_flight
        threads = [threading.Thread(target=_chat, args=(proxy.url,)) for _ in range(2)]
        threads[0].start()
        wait_until(lambda: proxy.call(lambda: len(flying)) == 1)
        threads[1].start()
        for t in threads:
            t.join()
        for r in _recent(proxy, 3)[1:]:
            assert r.timeline.truth is None and r.truth_note == "other requests overlapped it"
        # alone again: attributed again (the proxy scraped once it fell idle)
        wait_until(lambda: proxy.call(lambda: proxy.proxy.book.truth.last_starts) == 3)
        _chat(proxy.url)
        last = _recent(proxy, 4)[-1]
        assert last.timeline.truth is not None, last.truth_note
        # never a scrape begun while a generation request passed through the proxy
        recs = _recent(proxy, 4)
        began = proxy.call(lambda: list(proxy.proxy.book.truth.began))
        windows = [(r.timeline.t_sent_ns, r.timeline.t_end_ns) for r in recs]
        assert len(began) >= 3 and all(not (a <= t <= b) for t in began for a, b in windows)
    finally:
        fake.up.stop()


def test_a_client_past_the_proxy_makes_the_account_unattributable(start_proxy) -> None:
    """Another client talks to vLLM directly meanwhile: two requests finish in vLLM's
    window, and the proxy reports none rather than a mix. The other request starts once
    ours has reached vLLM and ends before ours may (its last frame waits for that), so
    both finish inside our window however slow the machine."""
    fake = FakeVLLM()
    fake.gate = threading.Event()
    try:
        proxy = start_proxy(fake.up.url, kind="vllm")
        book = proxy.proxy.book
        wait_until(lambda: proxy.call(lambda: book.truth.last is not None))  # idle scrape
        ours = threading.Thread(target=_chat, args=(proxy.url,))
        ours.start()
        wait_until(lambda: any(e.request.startswith(b"POST") for e in fake.up.exchanges))
        _chat(fake.up.url, "side")  # past the proxy, straight to vLLM
        wait_until(lambda: fake.finished() == 1)  # (its server thread marks it done)
        fake.gate.set()
        ours.join()
        rec = _recent(proxy, 1)[-1]
        assert rec.timeline.truth is None and "not 1" in rec.truth_note
    finally:
        fake.up.stop()


def test_a_client_past_the_proxy_ending_first_is_not_taken_for_ours(start_proxy) -> None:
    """The other client's request ends inside our window and vLLM records it; ours has
    ended too, but vLLM has not recorded it yet (it still counts one running). The count
    grew by one, and that one is not ours: the proxy waits until vLLM runs nothing, and
    then two finished, so it reports none."""
    fake = FakeVLLM()
    fake.gate, fake.hold = threading.Event(), threading.Event()
    try:
        proxy = start_proxy(fake.up.url, kind="vllm")
        truth = proxy.proxy.book.truth
        wait_until(lambda: proxy.call(lambda: truth.last is not None))  # idle scrape
        ours = threading.Thread(target=_chat, args=(proxy.url,))
        ours.start()
        wait_until(lambda: any(e.request.startswith(b"POST") for e in fake.up.exchanges))
        _chat(fake.up.url, "side")
        wait_until(lambda: fake.finished() == 1)
        fake.gate.set()
        ours.join()
        scraped = proxy.call(lambda: truth.scrapes)
        # the proxy reads vLLM twice after ours ended (it saw one finished, one running)
        wait_until(lambda: proxy.call(lambda: truth.scrapes) >= scraped + 2)
        fake.hold.set()
        rec = _recent(proxy, 1)[-1]
        # (on a machine slower than vLLM's settle time, it gave up waiting: none either)
        assert rec.timeline.truth is None, rec.truth_note
        assert "2 requests finished" in rec.truth_note or "not recorded" in rec.truth_note
    finally:
        fake.up.stop()
