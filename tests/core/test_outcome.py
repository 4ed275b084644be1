"""Outcomes: the fan-out every measuring place publishes finished requests to."""

from __future__ import annotations

from tui.core.metrics import RequestMetrics
from tui.core.outcome import (
    INFERTOP_ITSELF,
    ClientIdentity,
    Outcomes,
    RequestOutcome,
    bounded,
)


def _outcome(rid: str = "r1") -> RequestOutcome:
    return RequestOutcome(
        id=rid,
        source="chat",
        state="done",
        route="llamacpp",
        api="llamacpp",
        upstream="local",
        model="smollm2",
        client=INFERTOP_ITSELF,
        t0_wall=1_700_000_000.0,
        t0_ns=5_000_000_000,
        t_end_ns=7_500_000_000,
        metrics=RequestMetrics(ttft_ms=100.0, ttfr_ms=90.0, e2e_ms=2500.0),
    )


class _Keep:
    def __init__(self) -> None:
        self.seen: list[str] = []
        self.closed = False

    def publish(self, outcome: RequestOutcome) -> None:
        self.seen.append(outcome.id)

    def close(self) -> None:
        self.closed = True


class _Broken:
    calls = 0

    def publish(self, outcome: RequestOutcome) -> None:
        self.calls += 1
        raise RuntimeError("disk full")

    def close(self) -> None:
        raise RuntimeError("still full")


def test_a_broken_sink_never_keeps_the_others_from_an_outcome(caplog):
    outcomes = Outcomes()
    broken, keep = _Broken(), _Keep()
    outcomes.add(broken)
    outcomes.add(keep)
    outcomes.publish(_outcome("a"))
    outcomes.publish(_outcome("b"))
    assert keep.seen == ["a", "b"] and broken.calls == 2
    assert sum("an outcome sink failed" in r.message for r in caplog.records) == 1
    outcomes.close()
    assert keep.closed
    outcomes.publish(_outcome("c"))  # closed: no sink left
    assert keep.seen == ["a", "b"]


def test_e2e_and_labels():
    o = _outcome()
    assert o.e2e_s == 2.5
    assert o.client.label == "infertop"
    assert ClientIdentity().label == "unknown"
    assert ClientIdentity(key_fingerprint="k:1a2b", program="curl").label == "k:1a2b"
    assert bounded("x" * 1000) == "x" * 200 and bounded(None) is None


def test_fields_added_for_the_ledger_address_streamed_and_the_timeline_helpers():
    import time

    from tui.core.events import Failed, Finished, RequestSent
    from tui.core.outcome import Where, outcome_of, timeline_state, wall_clock
    from tui.core.timeline import RequestTimeline

    assert ClientIdentity(address="10.0.0.7").label == "10.0.0.7"
    assert ClientIdentity(program="curl", address="10.0.0.7").label == "curl"
    assert _outcome().streamed is None  # not known unless the place says
    now = time.perf_counter_ns()
    assert abs(wall_clock(now - 2_000_000_000) - (time.time() - 2.0)) < 0.05
    where = Where("/v1/chat/completions", "openai-chat", "http://h:1", "m" * 500)
    tl = RequestTimeline()
    none = RequestMetrics(None, None, None)
    assert outcome_of("x", "chat", where, INFERTOP_ITSELF, tl, none) is None
    tl.add(RequestSent(now))
    tl.add(Finished(now + 5, "stop"))
    o = outcome_of("x", "bench", where, INFERTOP_ITSELF, tl, RequestMetrics(None, None, 0.0))
    assert o is not None and o.state == "done" and o.model == "m" * 200 and o.t_end_ns == now + 5
    cut = RequestTimeline()
    cut.add(RequestSent(now))
    cut.add(Failed(now + 9, "bye", "cancelled"))
    assert timeline_state(cut) == "cancelled"
    broke = RequestTimeline()
    broke.add(RequestSent(now))
    broke.add(Failed(now + 9, "HTTP 500", "http"))
    o = outcome_of("y", "run", where, INFERTOP_ITSELF, broke, RequestMetrics(None, None, None))
    assert o is not None and o.state == "failed" and o.error_kind == "http"


def test_an_http_engine_says_where_its_requests_go():
    from tui.engines.base import EngineSpec
    from tui.engines.dialects import route_dialect
    from tui.engines.registry import create_engine

    assert route_dialect("/gw/ollama/api/chat") == "ollama"
    assert route_dialect("/v1/messages") == "anthropic" and route_dialect("/x") is None
    spec = EngineSpec(name="e", kind="openai", url="http://127.0.0.1:9/gw", endpoint="responses")
    w = create_engine(spec).where("served-model")
    assert (w.route, w.api, w.upstream, w.model) == (
        "/gw/v1/responses",
        "openai-responses",
        "http://127.0.0.1:9/gw",
        "served-model",
    )
