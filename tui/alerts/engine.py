"""The alert engine: rules (tui/alerts/rules.py) evaluated over the live numbers.

It is an :class:`~tui.core.outcome.OutcomeSink` (finished requests), and takes samples
of the engine's gauges and the hardware (:meth:`AlertEngine.gauge`,
:meth:`AlertEngine.hardware`). Everything is evaluated on one thread of its own, once
a second and whenever a request ends; :meth:`publish` only appends (bounded) and wakes
it, so nothing of it runs on a request's path. What a rule's events do (a line in the
TUI, the JSONL log, the webhook) is the ``notify`` callback's (tui/alerts/notify.py),
called on this thread.

One rule, per evaluation: its window's values (the requests that *ended* in the last
``window_s`` — answered to their end, for the latencies and decode tok/s; done or
failed, for the error rate — or the gauge samples taken in it) reduced by its
``stat``. A rule that is ``ok`` fires when the value is past its threshold, the window
holds at least ``min_samples`` values and its cooldown is over; a ``firing`` rule resolves when the
value is back past its resolving level (a value between the two levels changes
nothing: hysteresis), or when the window has emptied (as Prometheus resolves an alert
whose expression returns nothing). After resolving, a rule fires again no sooner than
``cooldown_s`` later. A firing event names the requests in the window whose own value
was past the threshold (at most :data:`MAX_IDS`).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Final, Literal

from tui.alerts.rules import ENGINE_METRICS, HARDWARE_METRICS, UNITS, AlertRule
from tui.core.outcome import RequestOutcome
from tui.core.stats import percentile

AlertState = Literal["ok", "firing"]
EventKind = Literal["firing", "resolved"]
MAX_IDS: Final = 50
OUTCOMES_KEPT: Final = 100_000  # finished requests kept for the windows, at most
SAMPLES_KEPT: Final = 10_000  # per gauge
TICK_S: Final = 1.0


@dataclass(frozen=True)
class AlertEvent:
    """A rule fired or resolved."""

    rule: AlertRule
    kind: EventKind
    value: float | None  # None: resolved because the window emptied
    samples: int
    request_ids: tuple[str, ...]
    upstream: str | None
    t_wall: float

    def to_dict(self) -> dict[str, Any]:
        """The JSON object the webhook and the log get."""
        r = self.rule
        return {
            "rule": r.name,
            "state": self.kind,
            "metric": r.metric,
            "stat": r.stat,
            "value": self.value,
            "unit": UNITS[r.metric],
            "direction": r.direction,
            "threshold": r.threshold,
            "resolve_threshold": r.resolve,
            "window_s": r.window_s,
            "samples": self.samples,
            "request_ids": list(self.request_ids),
            "upstream": self.upstream,
            "at": datetime.fromtimestamp(self.t_wall, timezone.utc).isoformat(),
            "source": "infertop",
        }

    def line(self) -> str:
        """One line for a screen or a log (names are the user's own config)."""
        r = self.rule
        unit = UNITS[r.metric]
        value = "no data" if self.value is None else f"{self.value:.4g}{unit and ' ' + unit}"
        if self.kind == "firing":
            cond = f"{'>' if r.direction == 'above' else '<'} {r.threshold:g}"
        else:
            cond = f"{'<' if r.direction == 'above' else '>'} {r.resolve:g}"
        when = datetime.fromtimestamp(self.t_wall).strftime("%H:%M:%S")
        ids = f" · {len(self.request_ids)} requests" if self.request_ids else ""
        return (
            f"{when} alert {self.kind} {r.name}: {r.metric} {r.stat} {value} "
            f"({cond}, {r.window_s:g} s window){ids}"
        )


@dataclass
class RuleStatus:
    """Where one rule stands."""

    state: AlertState = "ok"
    value: float | None = None
    samples: int = 0
    since: float = 0.0
    cooldown_until: float = 0.0
    fired: int = 0
    resolved: int = 0


@dataclass
class _Sample:
    t: float
    value: float


@dataclass
class _Window:
    values: list[float] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)  # the requests past the threshold


def _reduce(values: list[float], stat: str) -> float:
    if stat == "mean":
        return sum(values) / len(values)
    if stat == "min":
        return min(values)
    if stat == "max":
        return max(values)
    if stat == "last":
        return values[-1]
    return percentile(values, float(stat[1:]))


def _own_value(rule: AlertRule, o: RequestOutcome) -> list[float]:
    """The values one finished request gives a rule's window (ms, tok/s)."""
    m = o.metrics
    metric = rule.metric
    if metric == "ttft":
        return [m.ttft_ms] if m.ttft_ms is not None and o.streamed is not False else []
    if metric == "ttfo":
        return [m.ttfo_ms] if m.ttfo_ms is not None and o.streamed is not False else []
    if metric == "itl":
        return list(m.itl_token_ms)
    if metric == "e2e":
        return [o.e2e_s * 1000.0]
    if metric == "decode_tps":
        return [m.decode_tps] if m.decode_tps is not None else []
    return []


class AlertEngine:
    """Rules over the live numbers (see the module docstring)."""

    def __init__(
        self,
        rules: list[AlertRule],
        notify: Callable[[AlertEvent], None],
        upstream: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.rules = rules
        self.notify = notify
        self.upstream = upstream  # named in events (the proxy's upstream)
        self.clock = clock
        self.status = {r.name: RuleStatus() for r in rules}
        self._outcomes: deque[RequestOutcome] = deque(maxlen=OUTCOMES_KEPT)
        self._gauges: dict[str, deque[_Sample]] = {}
        self._lock = threading.Lock()
        self._eval_lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.longest = max((r.window_s for r in rules), default=60.0)
        self.notify_errors = 0

    @property
    def needs_engine(self) -> bool:
        return any(r.metric in ENGINE_METRICS for r in self.rules)

    @property
    def needs_hardware(self) -> bool:
        return any(r.metric in HARDWARE_METRICS for r in self.rules)

    # -- inputs (any thread; O(1)) ---------------------------------------------------------
    def publish(self, outcome: RequestOutcome) -> None:
        with self._lock:
            self._outcomes.append(outcome)
        self._wake.set()

    def gauge(self, metric: str, value: float | None, t: float | None = None) -> None:
        """A sample of an engine or hardware number (``requests_waiting``, ``kv_cache``
        in %, ``gpu_temp`` in °C, ``gpu_memory`` in %); None: not read this time."""
        if value is None:
            return
        with self._lock:
            samples = self._gauges.setdefault(metric, deque(maxlen=SAMPLES_KEPT))
            samples.append(_Sample(self.clock() if t is None else t, float(value)))

    def hardware(self, sample: Any) -> None:
        """A hardware sample (tui/telemetry/sampler.py TelemetrySample): the hottest
        GPU's temperature and the fullest GPU's memory use."""
        gpus = getattr(getattr(sample, "gpu", None), "gpus", None) or []
        temps = [g.temp_c for g in gpus if g.temp_c is not None]
        mems = [
            100.0 * g.mem_used / g.mem_total for g in gpus if g.mem_used is not None and g.mem_total
        ]
        self.gauge("gpu_temp", max(temps) if temps else None)
        self.gauge("gpu_memory", max(mems) if mems else None)

    # -- evaluation -----------------------------------------------------------------------
    def evaluate(self, now: float | None = None) -> list[AlertEvent]:
        """One evaluation of every rule at ``now`` (wall clock); its events, notified."""
        with self._eval_lock:
            now = self.clock() if now is None else now
            with self._lock:
                horizon = now - self.longest
                while self._outcomes and self._outcomes[0].t_end_wall < horizon:
                    self._outcomes.popleft()
                outcomes = list(self._outcomes)
                gauges = {k: [s for s in v if s.t >= horizon] for k, v in self._gauges.items()}
                for samples in self._gauges.values():
                    while samples and samples[0].t < horizon:
                        samples.popleft()
            events = []
            for rule in self.rules:
                event = self._step(rule, now, outcomes, gauges)
                if event is not None:
                    events.append(event)
        for event in events:
            try:
                self.notify(event)
            except Exception:  # noqa: BLE001 - a notifier's fault must not stop alerting
                self.notify_errors += 1
        return events

    def _window(self, rule: AlertRule, now: float, outcomes: list[RequestOutcome],
                gauges: dict[str, list[_Sample]]) -> _Window:  # fmt: skip
        w = _Window()
        start = now - rule.window_s
        if rule.metric in ENGINE_METRICS or rule.metric in HARDWARE_METRICS:
            w.values = [s.value for s in gauges.get(rule.metric, []) if s.t >= start]
            return w
        chosen = [
            o
            for o in outcomes
            if o.t_end_wall >= start
            and (rule.upstream is None or o.upstream.rstrip("/") == rule.upstream)
        ]
        if rule.metric == "error_rate":
            judged = [o for o in chosen if o.state != "cancelled"]
            if judged:
                failed = [o for o in judged if o.state == "failed"]
                w.values = [len(failed) / len(judged)] * len(judged)
                w.ids = [o.id for o in failed]
            return w
        for o in chosen:
            if o.state != "done":
                continue  # a failed or cancelled request's numbers are error_rate's
            values = _own_value(rule, o)
            if not values:
                continue
            w.values += values
            own = max(values) if rule.direction == "above" else min(values)
            if rule.crossed(own):
                w.ids.append(o.id)
        return w

    def _step(self, rule: AlertRule, now: float, outcomes: list[RequestOutcome],
              gauges: dict[str, list[_Sample]]) -> AlertEvent | None:  # fmt: skip
        st = self.status[rule.name]
        w = self._window(rule, now, outcomes, gauges)
        st.samples = len(w.values)
        st.value = _reduce(w.values, rule.stat) if w.values else None
        if rule.metric == "error_rate" and w.values:
            st.value = w.values[0]
        ids = tuple(w.ids[-MAX_IDS:])
        if st.state == "ok":
            if (
                st.value is not None
                and st.samples >= rule.min_samples
                and now >= st.cooldown_until
                and rule.crossed(st.value)
            ):
                st.state, st.since = "firing", now
                st.fired += 1
                return AlertEvent(rule, "firing", st.value, st.samples, ids, self._up(rule), now)
            return None
        if st.value is None or rule.recovered(st.value):
            st.state, st.since = "ok", now
            st.resolved += 1
            st.cooldown_until = now + rule.cooldown_s
            return AlertEvent(rule, "resolved", st.value, st.samples, ids, self._up(rule), now)
        return None

    def _up(self, rule: AlertRule) -> str | None:
        return rule.upstream or self.upstream

    # -- the thread -----------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="infertop-alerts", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(TICK_S)
            self._wake.clear()
            if self._stop.is_set():
                return
            self.evaluate()

    def close(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    # -- /infertop/metrics ----------------------------------------------------------------
    def exposition(self) -> str:
        """Alert state in the Prometheus text format: ``ALERTS`` (as Prometheus writes
        its own: one series, value 1, for each rule firing now) and, for every rule,
        ``infertop_alert_firing`` (0/1), ``infertop_alert_value`` (the window's value
        at the last evaluation; absent with no data) and the fire/resolve counts."""

        def esc(v: str) -> str:
            return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")

        out = ["# HELP ALERTS Alert rules firing now.", "# TYPE ALERTS gauge"]
        for rule in self.rules:
            if self.status[rule.name].state == "firing":
                out.append(
                    f'ALERTS{{alertname="{esc(rule.name)}",alertstate="firing",'
                    f'metric="{rule.metric}"}} 1'
                )
        series = (
            ("firing", "gauge", "1 while the rule fires.", lambda s: int(s.state == "firing")),
            ("value", "gauge", "The rule's value over its window.", lambda s: s.value),
            ("fired_total", "counter", "Times the rule fired.", lambda s: s.fired),
            ("resolved_total", "counter", "Times the rule resolved.", lambda s: s.resolved),
        )  # fmt: skip
        for name, kind, text, get in series:
            out += [f"# HELP infertop_alert_{name} {text}", f"# TYPE infertop_alert_{name} {kind}"]
            for rule in self.rules:
                v = get(self.status[rule.name])
                if v is not None:
                    out.append(f'infertop_alert_{name}{{alertname="{esc(rule.name)}"}} {v}')
        return "\n".join(out) + "\n"
