"""Outcomes for the ledger's tests: made with known numbers, no engine needed."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tui.core.events import EngineTruth
from tui.core.metrics import RequestMetrics
from tui.core.outcome import ClientIdentity, OutcomeState, RequestOutcome, Source

_ids = itertools.count(1)


@contextmanager
def writing_as_version_3() -> Iterator[None]:
    """The writer as schema versions 2 and 3 wrote rows (no ``verdict`` column, the last
    one): for tests that make an older file and upgrade it."""
    from tui.ledger import columns, writer

    names = columns.NAMES[:-1]
    assert columns.NAMES[-1] == "verdict"
    insert = f"INSERT INTO requests ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(writer, "INSERT", insert)
        mp.setattr(writer, "row_of", lambda o: columns.row_of(o)[:-1])
        yield


def outcome(
    client: ClientIdentity | str = "alice",
    *,
    t0: float | None = None,
    e2e_s: float = 1.0,
    prompt: int | None = 10,
    output: int | None = 20,
    estimated: bool = False,
    state: OutcomeState = "done",
    model: str = "m1",
    upstream: str = "http://127.0.0.1:8080",
    source: Source = "proxy",
    ttft_ms: float | None = 100.0,
    cached: int | None = None,
    streamed: bool | None = True,
) -> RequestOutcome:
    who = ClientIdentity(name=client) if isinstance(client, str) else client
    m = RequestMetrics(ttft_ms=ttft_ms, ttfr_ms=ttft_ms, e2e_ms=e2e_s * 1000)
    m.prompt_tokens = prompt
    m.output_tokens = output
    m.output_tokens_source = "chunk-count-estimate" if estimated else "usage"
    m.decode_tps = 50.0
    m.ttfo_ms = ttft_ms
    m.itl_token_ms, m.itl_token_weights = [10.0, 20.0, 30.0], [1, 1, 1]
    truth = None if cached is None else EngineTruth(cached_tokens=cached, source="usage")
    start = time.time() - 60 if t0 is None else t0
    return RequestOutcome(
        id=f"r{next(_ids)}",
        source=source,
        state=state,
        route="/v1/chat/completions",
        api="openai-chat",
        upstream=upstream,
        model=model,
        client=who,
        t0_wall=start,
        t0_ns=1_000_000_000,
        t_end_ns=1_000_000_000 + int(e2e_s * 1e9),
        metrics=m,
        truth=truth,
        error_kind="http" if state == "failed" else None,
        streamed=streamed,
    )
