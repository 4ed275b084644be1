"""One measured request of a bench, one load level's worth of them, and how a depth
level's prior context was built (tui/bench/run/depth.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

from tui.core.metrics import RequestMetrics, compute_metrics
from tui.core.outcome import INFERTOP_ITSELF, RequestOutcome, Where, outcome_of
from tui.core.timeline import RequestTimeline
from tui.core.trace_context import TraceContext
from tui.core.verdict import Verdict


def finite(x: Any) -> Any:
    """JSON has no NaN/inf: the same structure with them as None.

    A list of numbers whose sum is finite has no NaN or inf in it (either would make the
    sum NaN or inf), so it is copied as it is: one C-level pass instead of a call per
    value (the per-token ITL lists are most of a report)."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        try:
            if math.isfinite(sum(x)):
                return list(x)
        except (TypeError, OverflowError):  # not all numbers; an int too big for a float
            pass
        return [finite(v) for v in x]
    return x


# Request phases. Only "cold" and "warm" enter the statistics; warm-up and calibration
# requests are kept in report.json for the record.
RequestPhase = Literal["calibrate", "warmup", "cold", "warm"]
PHASES: tuple[RequestPhase, ...] = ("calibrate", "warmup", "cold", "warm")
# How a request ended (see RequestRecord).
RequestStatus = Literal["ok", "failed", "cancelled", "cut"]
# What a level measured: closed-loop users ("concurrency"), an open-loop arrival process
# ("constant", "poisson", "gamma": tui/bench/run/arrivals.py), cold starts, a context
# depth (tui/bench/run/depth.py), a capacity probe (tui/bench/run/capacity.py).
LevelKind = Literal["concurrency", "constant", "poisson", "gamma", "cold", "depth", "probe"]


@dataclass
class RequestRecord:
    """One request: where it belongs in the bench, its timeline and its metrics.

    ``status``: "ok" (finished with generated text), "failed" (a Failed event, or a
    stream that produced no text), "cancelled" (stopped by the user: not a failure, not
    in the statistics), "cut" (still in flight when an open-loop level's duration limit
    and drain ran out, or when a capacity probe stopped early: counted among the level's
    requests as not good, its tokens not counted). ``t_start_s`` / ``t_end_s`` are
    seconds since the bench started.
    """

    engine: str
    phase: RequestPhase
    level: str
    index: int
    request_id: str
    t_start_s: float
    t_end_s: float
    timeline: RequestTimeline
    metrics: RequestMetrics
    status: RequestStatus
    concurrency: int | None = None
    rate: float | None = None
    load_ms: float | None = None  # cold phase: the time to ready before this request
    prompt_tokens_target: int | None = None
    # bench called stream() → the engine's RequestSent. Near 0 for engines that stamp the
    # request when it is submitted; a queue inside the engine that stamps later shows here
    # (that wait is then not inside the engine-stamped TTFT).
    pre_send_wait_ms: float | None = None
    worker: int | None = None  # the client worker process that sent it (None: the bench's)
    max_tokens: int | None = None  # the output length asked of this request
    session: int | None = None  # --turns: the conversation it belongs to (tui/bench/run/sessions)
    turn: int | None = None  # and its turn number in it, from 1
    trace_id: str | None = None  # its span's W3C trace (with OTLP export or propagation)
    span_id: str | None = None
    # why it took its time (tui/core/verdict.py), given once when its level ended
    # (tui/bench/run/published.py); report.json writes it beside the record
    verdict: Verdict | None = field(default=None, compare=False)
    _parts: tuple[Any, Any, Any] | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def error(self) -> str | None:
        return self.timeline.error

    def to_dict(self) -> dict[str, Any]:
        """The record as report.json holds it (NaN/inf written as None).

        Its timeline and metrics are final once the record exists, so their dictionaries
        are built once and shared by every report written after (checkpoints included);
        the record's own fields are read fresh each time.
        """
        if self._parts is None:
            truth = self.timeline.truth
            self._parts = (
                finite(self.metrics.to_dict()),
                self.timeline.to_dict(),
                finite(truth.to_dict()) if truth is not None else None,
            )
        metrics, timeline, truth_dict = self._parts
        return {
            "engine": self.engine,
            "phase": self.phase,
            "level": self.level,
            "concurrency": self.concurrency,
            "rate": self.rate,
            "index": self.index,
            "request_id": self.request_id,
            "status": self.status,
            "t_start_s": self.t_start_s,
            "t_end_s": self.t_end_s,
            "load_ms": self.load_ms,
            "prompt_tokens_target": self.prompt_tokens_target,
            "pre_send_wait_ms": self.pre_send_wait_ms,
            "worker": self.worker,
            "max_tokens": self.max_tokens,
            "session": self.session,
            "turn": self.turn,
            "trace_id": self.trace_id,
            "span_id": self.span_id,
            "metrics": metrics,
            "timeline": timeline,
            "engine_truth": truth_dict,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RequestRecord:
        """Rebuild a record from report.json; metrics are recomputed from the timeline."""
        from tui.core.events import EngineTruth

        t = d.get("engine_truth")
        truth = None
        if t:
            keys = (
                "prompt_tokens prompt_eval_tokens prompt_ms output_tokens decode_tokens "
                "decode_ms cached_tokens load_ms source raw"
            ).split()
            truth = EngineTruth(**{k: t.get(k) for k in keys if k in t})
        tl = RequestTimeline.from_dict(d["timeline"], truth)
        return cls(
            engine=d["engine"],
            phase=d["phase"],
            level=d["level"],
            index=d["index"],
            request_id=d["request_id"],
            t_start_s=d["t_start_s"],
            t_end_s=d["t_end_s"],
            timeline=tl,
            metrics=compute_metrics(tl),
            status=d["status"],
            concurrency=d.get("concurrency"),
            rate=d.get("rate"),
            load_ms=d.get("load_ms"),
            prompt_tokens_target=d.get("prompt_tokens_target"),
            pre_send_wait_ms=d.get("pre_send_wait_ms"),
            worker=d.get("worker"),
            max_tokens=d.get("max_tokens"),
            session=d.get("session"),
            turn=d.get("turn"),
            trace_id=_trace_part(d.get("trace_id"), 32),
            span_id=_trace_part(d.get("span_id"), 16),
        )


def _trace_part(value: Any, digits: int) -> str | None:
    """A trace or span id read from a report (someone's file): lower-case hex of its
    length, else None."""
    if type(value) is not str or len(value) != digits:
        return None
    return value if all(c in "0123456789abcdef" for c in value) else None


def classify(tl: RequestTimeline) -> RequestStatus:
    """ok / failed / cancelled, from how the stream ended (see RequestRecord.status)."""
    if tl.finish_reason == "cancelled" or tl.error_kind == "cancelled":
        return "cancelled"
    if tl.error is not None:
        return "failed"
    if not any(tl.chunk_text):
        if tl.error is None:
            tl.error = "the stream ended without generated text"
            tl.error_kind = "protocol"
        return "failed"
    return "ok"


@dataclass
class LevelRun:
    """The requests of one engine at one load level (or its cold starts)."""

    engine: str
    label: str  # "c=8", "rate=2", "cold"
    kind: LevelKind
    concurrency: int | None = None
    rate: float | None = None
    records: list[RequestRecord] = field(default_factory=list)
    complete: bool = False  # False when the bench was stopped inside this level
    # the engine's own account of the level (tui/bench/level_truth.py), or None
    engine_truth: dict[str, Any] | None = None
    # requests the bench made during the level that were not measured ("GET /metrics": 2)
    extra_requests: dict[str, int] = field(default_factory=dict)
    # c = 1 with per-request engine truth: seconds between requests (the bench's own
    # scrapes), left out of the wall time
    paused_s: float = 0.0
    # open-loop levels: the arrival process asked, its schedule and what was sent
    # (tui/bench/run/open_loop.py); None for closed-loop levels
    arrivals: dict[str, Any] | None = None
    stop_reason: str | None = None  # why an open-loop level stopped early (saturation)

    @property
    def wall_s(self) -> float | None:
        """First request sent → last request ended, less :attr:`paused_s`, seconds (None
        with no requests)."""
        rs = [r for r in self.records if r.status != "cancelled"]
        if not rs:
            return None
        return max(r.t_end_s for r in rs) - min(r.t_start_s for r in rs) - self.paused_s


@dataclass
class DepthContext:
    """How the prior context of one depth was built and what the engine counted."""

    depth: int  # asked for
    level: str  # the label of the level measured with it ("depth=D", or "c=1" for 0)
    n_words: int
    question_tokens: int | None  # the engine's count for the question alone
    counted_tokens: int | None  # ... for question + context
    method: str
    probes: int = 0

    @property
    def counted_depth(self) -> int | None:
        if self.counted_tokens is None or self.question_tokens is None:
            return None
        return self.counted_tokens - self.question_tokens

    def to_dict(self) -> dict[str, object]:
        d = dict(self.__dict__)
        d["counted_depth"] = self.counted_depth
        return d


def record_outcome(record: RequestRecord, where: Where) -> RequestOutcome | None:
    """A bench request's outcome (tui/core/outcome.py; None: it was never sent): source
    "bench", the client infertop itself; a request the bench cancelled or cut is
    cancelled, else as its timeline ended; its verdict, where it has one."""
    cut = record.status in ("cancelled", "cut")
    return outcome_of(
        record.request_id,
        "bench",
        where,
        INFERTOP_ITSELF,
        record.timeline,
        record.metrics,
        "cancelled" if cut else None,
        trace=None
        if record.trace_id is None or record.span_id is None
        else TraceContext(record.trace_id, record.span_id),
        verdict=record.verdict,
    )
