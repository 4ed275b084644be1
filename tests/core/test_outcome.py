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
