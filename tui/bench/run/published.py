"""Bench requests' outcomes, published when their level ends, each with its verdict.

A request's verdict (tui/core/verdict.py) needs what the bench saw around it: the other
requests of its level in flight when it was sent and decoding beside it (the level's
overlaps: tui/bench/stats/why.py), and for a speculating engine the decode speed of its
no-speculation twin at the same level. None of that is known when the request ends, so
the bench keeps each ended request (:meth:`HeldOutcomes.hold`: one list append, the only
work on the request's path) and, when its level has ended, gives every request of it its
verdict — once, by :func:`~tui.bench.stats.why.verdicts`, stored on the record, which
report.json, report.csv and report.md then read — and publishes their outcomes
(tui/core/outcome.py) to the sinks (the ledger, OpenTelemetry, alerts) in the order they
ended.

What a consumer sees: a bench request's ledger row or span appears when its level ends
(calibration probes and warm-up at the end of that phase), not when the request ends; a
level of more requests than a sink's queue holds (4096) is published as the sink drains
(``Outcomes.publish_many``, 30 s at most), between levels. An engine measured with
speculation whose no-speculation twin runs later in the same bench (``--sweep
spec_type=ngram-simple,none``) holds its outcomes until the twin has run, so its
"spec-slower" verdicts are the report's. A bench that is stopped or fails still
publishes what it held, with the verdicts known by then.
"""

from __future__ import annotations

from tui.bench.run.records import RequestRecord, record_outcome
from tui.bench.run.results import EngineRun, spec_for_report
from tui.bench.stats.why import spec_type, twin_baselines, verdicts, without_spec
from tui.core.outcome import Outcomes, Where
from tui.engines.base import EngineSpec


class HeldOutcomes:
    """Ended requests per engine name, held until :meth:`level_ended` (see the module
    docstring). ``engines`` is the bench's list of engine runs as it grows
    (``BenchResult.engines``); ``specs`` the engines the bench will run, in order."""

    def __init__(self, outcomes: Outcomes, engines: list[EngineRun], specs: list[EngineSpec]):
        self.outcomes = outcomes
        self.engines = engines
        self._plans = [(s.name, spec_for_report(s)) for s in specs]
        self._held: dict[str, list[tuple[RequestRecord, Where]]] = {}
        self._ended: set[str] = set()  # engines whose turn in the bench is over

    def hold(self, record: RequestRecord, where: Where) -> None:
        """Keep an ended request until its level ends (called on the request's path)."""
        self._held.setdefault(record.engine, []).append((record, where))

    def level_ended(self, engine: str) -> None:
        """A level (or calibration, warm-up, cold starts) of ``engine`` ended: give its
        requests their verdicts and publish them, unless a twin is still to run."""
        if not self._waits_for_twin(engine):
            self._publish(engine)

    def engine_ended(self, engine: str) -> None:
        """``engine``'s turn is over: publish what it still holds (a level cut short),
        and what engines held for it as their twin."""
        self._ended.add(engine)
        for name in list(self._held):
            if not self._waits_for_twin(name):
                self._publish(name)

    def close(self) -> None:
        """The bench ended (or stopped): publish everything still held."""
        for name in list(self._held):
            self._publish(name)

    def _run(self, engine: str) -> EngineRun | None:
        return next((r for r in reversed(self.engines) if r.name == engine), None)

    def _waits_for_twin(self, engine: str) -> bool:
        """True while ``engine`` speculates and a no-speculation twin of it (as
        :func:`~tui.bench.stats.why.twin_baselines` pairs them) has yet to run."""
        mine = next((spec for name, spec in self._plans if name == engine), None)
        if mine is None or spec_type(mine) == "none":
            return False
        key = without_spec(mine)
        return any(
            spec_type(spec) == "none" and without_spec(spec) == key and name not in self._ended
            for name, spec in self._plans
        )

    def _publish(self, engine: str) -> None:
        held = self._held.pop(engine, [])
        if not held:
            return
        run = self._run(engine)
        info = run.info if run is not None else {}
        baseline = twin_baselines(self.engines).get(engine) if run is not None else None
        records = [r for r, _w in held]
        why = verdicts(records, info, baseline)
        ready = []
        for record, where in held:
            if record.verdict is None:
                record.verdict = why[id(record)]
            outcome = record_outcome(record, where)
            if outcome is not None:
                ready.append(outcome)
        self.outcomes.publish_many(ready)  # a level larger than a sink's queue waits for it
