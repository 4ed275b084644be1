"""ProxiedRequest: one generation request passing through the proxy, as it is measured.

Its :class:`~tui.core.timeline.RequestTimeline` is fed the same stream events an
infertop engine emits (RequestSent when the request is forwarded upstream, FirstByte,
TextChunk per chunk with text, Usage, EngineReport, Finished or Failed), each stamped
where the upstream's bytes arrived, so :func:`~tui.core.metrics.compute_metrics` gives
its numbers by the one set of definitions. Live numbers for the view: :mod:`.rows`.

Other people's data stays in memory and bounded: the request body is kept up to
:data:`BODY_KEPT` bytes and the answer's text up to :data:`TEXT_KEPT` characters (past
that each chunk keeps "…" in place of its text, so the timeline still says which chunks
carried text); both are dropped when the request leaves the proxy's short text window
(:mod:`.book`), and neither is ever written to a file or the metrics.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from tui.core.events import (
    EngineReport,
    EngineTruth,
    Failed,
    FailureKind,
    Finished,
    RequestSent,
    StampSource,
    StreamEvent,
    TextChunk,
)
from tui.core.live import LiveCounts
from tui.core.metrics import RequestMetrics, compute_metrics
from tui.core.outcome import (
    ClientIdentity,
    OutcomeState,
    RequestOutcome,
    bounded,
    wall_clock,
)
from tui.core.session import session_record
from tui.core.timeline import RequestTimeline
from tui.core.trace_context import TraceContext
from tui.proxy.peer_process import PeerProcess
from tui.proxy.rows import RequestRow, RequestState

BODY_KEPT = 1024 * 1024
TEXT_KEPT = 1024 * 1024
CUT = "…"
ERROR_CHARS = 300
_OUTCOME_STATES: dict[RequestState, OutcomeState] = {
    RequestState.DONE: "done",
    RequestState.FAILED: "failed",
    RequestState.CANCELLED: "cancelled",
}


class ProxiedRequest:
    """One generation request (see the module docstring)."""

    def __init__(
        self,
        rid: str,
        client: str,
        method: str,
        path: str,
        dialect: str,
        model: str | None,
        stream: bool | None,
        t_received_ns: int,
        body: bytes | None = None,
    ) -> None:
        self.id = rid
        self.client = client
        self.method = method
        self.path = path[:200]
        self.dialect = dialect
        self.model = None if model is None else model[:200]
        self.stream = stream
        self.t_received_ns = t_received_ns
        self.wall = time.time()
        self.body = body if body is None or len(body) <= BODY_KEPT else body[:BODY_KEPT]
        self.body_cut = body is not None and len(body) > BODY_KEPT
        self.timeline = RequestTimeline()
        self.state = RequestState.PREFILL
        self.status: int | None = None
        self.t_forwarded: int | None = None
        self.counts = LiveCounts()  # the live numbers (tui/core/live.py)
        self.text_chars = 0  # -1 once the text is dropped
        self.timeline_dropped = False
        self.note: str | None = None  # what the proxy could not observe, in words
        self.metrics: RequestMetrics | None = None
        self.alone = True  # no other generation request overlapped it (vLLM truth)
        self.truth_note: str | None = None
        self.truth_before: Any = None  # vLLM: the idle scrape before it (tui/proxy/truth.py)
        self.observer: Any = None  # what reads its answer (tui/proxy/observe.py)
        self.identity = ClientIdentity()  # who sent it (tui/proxy/identity.py)
        self.process: PeerProcess | None = None  # its client's process, once looked up
        self.trace: TraceContext | None = None  # its span's ids (tui/proxy/tracing.py)
        self.response_model: str | None = None  # the model its answer named

    # -- events ---------------------------------------------------------------------------
    def sent(self, t_ns: int, stamps: str) -> None:
        """The request left for the upstream at ``t_ns`` (start of TTFT, TTFR, e2e)."""
        self.t_forwarded = t_ns
        self.timeline.add(RequestSent(t_ns))
        self.timeline.add(StampSource(t_ns, stamps))

    def emit(self, ev: StreamEvent) -> None:
        """One stream event, in the order the upstream's bytes said it."""
        if type(ev) is TextChunk:
            text = ev.text
            if text:
                self.text_chars += len(text)
                if self.text_chars > TEXT_KEPT:
                    ev.text = CUT
                if self.counts.t_first is None:
                    self.state = RequestState.DECODING
                self.counts.add(ev)
        elif type(ev) is Failed:
            if self.timeline.t_end_ns is not None:
                return  # it already ended: the first word stands
            cancelled = ev.kind == "cancelled"  # (a failure kind: tui/core/events.py)
            self.state = RequestState.CANCELLED if cancelled else RequestState.FAILED
        elif type(ev) is Finished:
            if self.timeline.t_end_ns is not None:
                return
            self.state = RequestState.DONE
        self.timeline.add(ev)

    def fail(self, message: str, kind: FailureKind, t_ns: int | None = None) -> None:
        self.emit(Failed(t_ns or time.perf_counter_ns(), message[:ERROR_CHARS], kind))

    def set_truth(self, truth: EngineTruth) -> None:
        """vLLM's account, read after the request (tui/proxy/truth.py); the cached prompt
        tokens its usage said are kept beside it."""
        had = self.timeline.truth
        if had is not None and had.cached_tokens is not None and truth.cached_tokens is None:
            truth = dataclasses.replace(truth, cached_tokens=had.cached_tokens)
        self.timeline.add(EngineReport(self.timeline.t_end_ns or time.perf_counter_ns(), truth))

    @property
    def t_last(self) -> int | None:
        """When the last chunk with text arrived (None: none yet)."""
        return self.counts.t_last

    @property
    def tokens(self) -> int:
        """Output tokens so far (the live count: see tui/core/live.py)."""
        return self.counts.tokens

    @property
    def ended(self) -> bool:
        return self.timeline.t_end_ns is not None

    def finalize(self) -> RequestMetrics:
        """The metrics, by the one set of definitions (once the request has ended)."""
        self.metrics = compute_metrics(self.timeline)
        return self.metrics

    def forget_text(self) -> None:
        """Drop the request body and the answer's text (out of the text window)."""
        self.body = None
        tl = self.timeline
        tl.chunk_text = [CUT if x else "" for x in tl.chunk_text]
        self.text_chars = -1  # -1: dropped

    def forget_timeline(self) -> None:
        """Keep only the row and metrics (out of the timeline window)."""
        self.forget_text()
        self.timeline_dropped = True
        self.timeline = RequestTimeline(
            t_sent_ns=self.timeline.t_sent_ns, t_end_ns=self.timeline.t_end_ns
        )

    # -- views ----------------------------------------------------------------------------
    def row(self, now_ns: int | None = None) -> RequestRow:
        """The request as the view shows it now (live numbers, or its final metrics)."""
        now = time.perf_counter_ns() if now_ns is None else now_ns
        tl = self.timeline
        row = RequestRow(
            id=self.id,
            client=self.client,
            method=self.method,
            route=self.path,
            model=self.model,
            stream=self.stream,
            state=self.state,
            status=self.status,
            age_ms=(now - self.t_received_ns) / 1e6,
            prompt_tokens=tl.prompt_tokens,
            output_tokens=self.counts.tokens,
            output_estimated=self.counts.estimated,
            error=None if tl.error is None else tl.error[:ERROR_CHARS],
            who=self._who(),
            trace_id=None if self.trace is None else self.trace.trace_id,
        )
        m = self.metrics
        if m is not None:
            row.prompt_tokens = m.prompt_tokens
            row.output_tokens = m.output_tokens or 0
            row.output_estimated = m.output_tokens_estimated
            row.ttft_ms = m.ttft_ms if self.stream is not False else None
            row.ttfo_ms = m.ttfo_ms if self.stream is not False else None
            row.reasoning_tokens = m.reasoning_tokens
            row.tps = m.decode_tps
            row.itl_p50_ms = m.itl_ms_p50
            row.e2e_ms = m.e2e_ms
            return row
        c = self.counts
        row.ttft_ms = c.ttft_ms(self.t_forwarded)
        row.ttfo_ms = c.ttfo_ms(self.t_forwarded)
        row.reasoning_tokens = c.reasoning_tokens or None
        row.tps = c.decode_tps()
        row.itl_p50_ms = c.itl_p50_ms()
        return row

    def _who(self) -> str | None:
        """The client's label, its process once found; None: nothing but the address."""
        c = self.identity
        if c.process is None and self.process is not None and self.process.name:
            c = dataclasses.replace(c, process=bounded(self.process.name))
        label = c.label
        return None if label == c.address or label == "unknown" else label

    def summary(self, engine: str, kind: str) -> dict[str, Any]:
        """The request as one session-log record (``tui/core/session.py``), its text
        withheld: prompt, messages and text empty, each chunk's text "…" (it had text)
        or "" (it had none); the stamps, counts, metrics and engine report kept."""
        m = self.metrics or self.finalize()
        tl = self.timeline
        shown = RequestTimeline(
            t_sent_ns=tl.t_sent_ns,
            t_first_byte_ns=tl.t_first_byte_ns,
            t_end_ns=tl.t_end_ns,
            chunk_ns=tl.chunk_ns,
            chunk_text=[CUT if x else "" for x in tl.chunk_text],
            chunk_tokens=tl.chunk_tokens,
            chunk_part=tl.chunk_part,
            prompt_tokens=tl.prompt_tokens,
            usage_output_tokens=tl.usage_output_tokens,
            usage_reasoning_tokens=tl.usage_reasoning_tokens,
            truth=tl.truth,
            finish_reason=tl.finish_reason,
            error=tl.error,
            error_kind=tl.error_kind,
            stamp_source=tl.stamp_source,
        )
        rec = session_record(
            engine=engine,
            kind=kind,
            model=self.model or "",
            messages=[],
            params={"method": self.method, "route": self.path, "stream": self.stream},
            timeline=shown,
            metrics=m,
            request_id=self.id,
            slot="proxy",
        )
        rec["text"] = ""  # (the joined placeholders are no text)
        rec["proxy"] = {
            "client": self.client,
            "status": self.status,
            "state": self.state,
            "forward_delay_ms": self.forward_delay_ms,
            "text_withheld": True,
            "note": self.note,
            "truth_note": self.truth_note,
        }
        return rec

    def outcome(self, upstream: str, kind: str | None = None) -> RequestOutcome:
        """The finished request as every measuring place hands it on (numbers and names
        only: tui/core/outcome.py); ``upstream`` the server's URL, ``kind`` its kind."""
        m = self.metrics or self.finalize()
        tl = self.timeline
        client = self.identity
        if self.process is not None and self.process.name and client.process is None:
            client = dataclasses.replace(client, process=bounded(self.process.name))
            self.identity = client
        t0 = tl.t_sent_ns if tl.t_sent_ns is not None else self.t_received_ns
        t_end = tl.t_end_ns if tl.t_end_ns is not None else t0
        return RequestOutcome(
            id=self.id,
            source="proxy",
            state=_OUTCOME_STATES.get(self.state, "failed"),
            route=self.path,
            api=self.dialect,
            upstream=upstream,
            model=self.model,
            client=client,
            t0_wall=wall_clock(t0),
            t0_ns=t0,
            t_end_ns=t_end,
            metrics=m,
            truth=tl.truth,
            error_kind=tl.error_kind if self.state == RequestState.FAILED else None,
            streamed=self.stream,
            trace_id=None if self.trace is None else self.trace.trace_id,
            span_id=None if self.trace is None else self.trace.span_id,
            parent_span_id=None if self.trace is None else self.trace.parent_id,
            kind=kind,
            response_model=self.response_model,
        )

    @property
    def forward_delay_ms(self) -> float | None:
        """The proxy's own time before forwarding: request complete → sent upstream
        (connecting included)."""
        if self.t_forwarded is None:
            return None
        return (self.t_forwarded - self.t_received_ns) / 1e6
