"""A request's verdict on its span (``infertop.verdict``, ``infertop.verdict.text``),
where its place gave one; none where it gave none."""

from __future__ import annotations

from dataclasses import replace

from tests.support.made_outcomes import outcome
from tui.core.verdict import Breakdown, Verdict
from tui.otel import conventions as C
from tui.otel.spans import span_of


def test_the_verdict_is_on_the_span() -> None:
    v = Verdict("queued", "queued 1.3 s behind 1 busy slot (-np 1)", Breakdown(queue_ms=1300.0))
    a = span_of(replace(outcome(), source="bench", verdict=v)).attributes
    assert a[C.INFERTOP_VERDICT] == "queued"
    assert a[C.INFERTOP_VERDICT_TEXT] == "queued 1.3 s behind 1 busy slot (-np 1)"


def test_no_verdict_no_attribute() -> None:
    a = span_of(outcome()).attributes
    assert C.INFERTOP_VERDICT not in a and C.INFERTOP_VERDICT_TEXT not in a
