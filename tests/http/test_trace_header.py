"""infertop's own requests and trace propagation: an HTTP engine sends ``traceparent``
only when the request's trace context says to send it, through the lean client (plain
http://) as through httpx; the chat core gives each request a context by its mode."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.proxy.test_forward import SSE
from tests.support.scripted_upstream import ScriptedUpstream, chunked, sse_head
from tui.core.cancel import CancelToken
from tui.core.trace_context import continue_or_start, parse_traceparent
from tui.engines.base import EngineSpec, GenerationRequest
from tui.engines.registry import create_engine

MODELS = b'{"object":"list","data":[{"id":"m","object":"model"}]}'


def _answer(req: bytes) -> list[tuple[float, bytes]]:
    if req.startswith(b"GET "):  # a readiness call: the model list
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
        return [(0, head % len(MODELS) + MODELS)]
    return [(0, sse_head()), (0, chunked(*SSE))]


@pytest.fixture
def upstream() -> Iterator[ScriptedUpstream]:
    up = ScriptedUpstream(_answer)
    yield up
    up.stop()


def _traceparents(raw: bytes) -> list[bytes]:
    lines = raw.split(b"\r\n\r\n")[0].split(b"\r\n")[1:]
    return [
        v.strip() for k, _, v in (ln.partition(b":") for ln in lines) if k.lower() == b"traceparent"
    ]


async def _send(url: str, request: GenerationRequest, via_httpx: bool = False) -> None:
    engine = create_engine(EngineSpec(name="t", kind="openai", url=url, model="m"))
    if via_httpx:
        engine._plain = False  # (the lean client is for plain http://: take httpx instead)
    try:
        async for _event in engine.stream(request, CancelToken()):
            pass
    finally:
        await engine.close()


@pytest.mark.parametrize("via_httpx", [False, True], ids=["lean client", "httpx"])
async def test_traceparent_is_sent_only_when_asked(upstream, via_httpx) -> None:
    plain = GenerationRequest.from_prompt("hi", max_tokens=2)
    await _send(upstream.url, plain, via_httpx)
    recorded = GenerationRequest.from_prompt("hi", max_tokens=2)
    recorded.trace = continue_or_start(None)  # a span's ids, not sent
    await _send(upstream.url, recorded, via_httpx)
    sent = GenerationRequest.from_prompt("hi", max_tokens=2)
    sent.trace, sent.send_traceparent = continue_or_start(None), True
    await _send(upstream.url, sent, via_httpx)
    first, second, third = [r for r in upstream.requests if r.startswith(b"POST ")]
    assert _traceparents(first) == [] and _traceparents(second) == []
    (value,) = _traceparents(third)
    assert parse_traceparent(value) == (sent.trace.trace_id, sent.trace.span_id, True)


async def test_the_chat_core_gives_each_request_a_context(upstream) -> None:
    from tui.chat.core import ChatCore
    from tui.config import Config
    from tui.core.outcome import Outcomes

    spec = EngineSpec(name="t", kind="openai", url=upstream.url, model="m")
    outcomes, got = Outcomes(), []

    class Sink:
        def publish(self, o) -> None:  # type: ignore[no-untyped-def]
            got.append(o)

        def close(self) -> None:
            pass

    outcomes.add(Sink())
    core = ChatCore(
        Config(engines={"t": spec}, default_engine="t"), lambda e: None, outcomes=outcomes
    )
    core.trace = "propagate"
    try:
        await core.run_turn(core.start_turn("hello"))
    finally:
        await core.close()
    (posted,) = [r for r in upstream.requests if r.startswith(b"POST ")]
    (value,) = _traceparents(posted)
    (outcome,) = got
    assert parse_traceparent(value) == (outcome.trace_id, outcome.span_id, True)
    assert outcome.kind == "openai" and outcome.source == "chat"
