"""The HTTP engines share one streaming base (tui/engines/http/http_engine.py): the same fault
is the same Failed kind whichever engine meets it, and a bug is reported as a bug."""

from __future__ import annotations

import pytest

from tests.support.stream_check import collect
from tui.engines.base import EngineSpec, GenerationRequest
from tui.engines.http.http_engine import HttpStreamEngine
from tui.engines.http.ollama import OllamaEngine
from tui.engines.http.openai_compat import OpenAICompatEngine

REQ = GenerationRequest.from_prompt("hi", max_tokens=4)


def both(url: str, **kw: object) -> list[HttpStreamEngine]:
    return [
        OpenAICompatEngine(EngineSpec("o", "openai", url=url, model="m", **kw)),  # type: ignore[arg-type]
        OllamaEngine(EngineSpec("l", "ollama", url=url, model="m", **kw)),  # type: ignore[arg-type]
    ]


async def test_an_engine_that_cannot_get_ready_is_a_connect_failure_in_both(
    monkeypatch: pytest.MonkeyPatch, closed_port_url: str
) -> None:
    monkeypatch.delenv("INFERTOP_NO_SUCH_KEY", raising=False)
    for engine in both(closed_port_url, api_key_env="INFERTOP_NO_SUCH_KEY"):
        r = await collect(engine, REQ)
        assert r.failed is not None, engine.kind
        assert r.failed.kind == "connect", (engine.kind, r.failed)
        assert "INFERTOP_NO_SUCH_KEY" in r.failed.message


async def test_connection_refused_is_the_same_in_both(closed_port_url: str) -> None:
    failures = [(await collect(e, REQ)).failed for e in both(closed_port_url)]
    assert all(f is not None and f.kind == "connect" for f in failures), failures
    assert all("connection refused" in f.message for f in failures if f is not None)


async def test_a_bug_is_an_internal_failure_not_a_transport_fault(
    monkeypatch: pytest.MonkeyPatch, pace: str
) -> None:
    """A programming error while reading a body is not dressed up as a network fault."""

    async def broken(self, resp, state, emit) -> None:  # type: ignore[no-untyped-def]
        raise TypeError("unsupported operand")

    monkeypatch.setattr(OpenAICompatEngine, "read_body", broken)
    engine = OpenAICompatEngine(EngineSpec("o", "openai", url=pace, model="pace"))
    r = await collect(engine, REQ)
    assert r.failed is not None and r.failed.kind == "internal"
    assert r.failed.message.startswith("internal error (a bug in infertop): TypeError")
    await engine.close()
