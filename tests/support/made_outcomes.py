"""RequestOutcomes built by hand for the OTel and alert tests (what a measuring place
would publish), and :class:`KeptOutcomes`, a sink that keeps what it is given."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from tui.core.events import EngineTruth
from tui.core.metrics import RequestMetrics
from tui.core.outcome import INFERTOP_ITSELF, RequestOutcome


def metrics(**kw: Any) -> RequestMetrics:
    base: dict[str, Any] = dict(
        ttft_ms=250.0,
        ttfr_ms=250.0,
        e2e_ms=1000.0,
        prompt_tokens=12,
        output_tokens=30,
        output_tokens_source="usage",
        finish_reason="stop",
        itl_chunk_ms=[10.0, 12.0, 14.0],
        itl_token_ms=[10.0, 12.0, 14.0],
        tpot_ms=25.0,
        decode_tps=80.0,
        ttfo_ms=300.0,
    )
    base.update(kw)
    return RequestMetrics(**base)


def outcome(n: int = 1, **kw: Any) -> RequestOutcome:
    e2e_ns = int(kw.pop("e2e_s", 1.0) * 1e9)
    o = RequestOutcome(
        id=f"r{n}",
        source="proxy",
        state="done",
        route="/v1/chat/completions",
        api="openai-chat",
        upstream="http://127.0.0.1:8080",
        model="smollm2",
        client=INFERTOP_ITSELF,
        t0_wall=time.time() - e2e_ns / 1e9,
        t0_ns=10**12,
        t_end_ns=10**12 + e2e_ns,
        metrics=metrics(),
        streamed=True,
        kind="llama-server",
        truth=EngineTruth(cached_tokens=4, prompt_ms=20.0, source="llama-server timings"),
    )
    return replace(o, **kw)


class KeptOutcomes:
    """An OutcomeSink that keeps every outcome published to it, in order."""

    def __init__(self) -> None:
        self.seen: list[RequestOutcome] = []
        self.closed = False

    def publish(self, outcome: RequestOutcome) -> None:
        self.seen.append(outcome)

    def close(self) -> None:
        self.closed = True
