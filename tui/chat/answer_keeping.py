"""AnswerKeeping: what the chat core keeps of each finished answer.

Once an answer ended (:meth:`~tui.chat.core.ChatCore.run_turn`), the core judges it
(its verdict: why it took its time, tui/core/verdict.py), publishes its outcome to
:attr:`~tui.chat.core.ChatCore.outcomes` (the ledger, OTLP export, alerts), adds it to
the slot's messages (the next turn's context) and history windows (the sparklines), and
appends its session record (a write that fails is said once, as a Notice).
"""

from __future__ import annotations

import asyncio

from tui.chat.events import Notice
from tui.chat.slots import EngineSlots
from tui.core.live import LiveRequest
from tui.core.metrics import RequestMetrics
from tui.core.outcome import INFERTOP_ITSELF, Outcomes, Source, Where, outcome_of, timeline_state
from tui.core.session import SessionRecorder, session_record
from tui.core.verdict import Seen, Verdict, judge
from tui.engines.base import GenerationRequest


class AnswerKeeping(EngineSlots):
    """See the module docstring; a base of :class:`~tui.chat.core.ChatCore`, whose
    ``__init__`` sets the state."""

    outcomes: Outcomes
    source: Source
    recorder: SessionRecorder | None
    _record_error_shown: bool

    def verdict(self, name: str, live: LiveRequest, metrics: RequestMetrics) -> Verdict:
        """Why the answer took its time (tui/core/verdict.py): the chat sends one request
        to an engine at a time, so none of its own was ahead of it; the engine's slots
        from what it reported at load (llama-server's /props)."""
        info = self.info(name)
        slots = info.parameters.get("total_slots") if info is not None else None
        seen = Seen(
            others_at_send=0,
            others_max=0,
            slots_total=slots if isinstance(slots, int) and not isinstance(slots, bool) else None,
        )
        tl = live.timeline
        return judge(metrics, tl.truth, seen, timeline_state(tl))

    def _remember(
        self, slot: str, request: GenerationRequest, live: LiveRequest, m: RequestMetrics
    ) -> None:
        """The answer joins the slot's messages (the next turn's context) and, when it
        has a first token, the history windows."""
        if live.timeline.text:
            prompt = request.messages[-1].get("content", "") if request.messages else ""
            self.messages[slot] += [
                {"role": "user", "content": prompt},
                {"role": "assistant", "content": live.timeline.text},
            ]
        self.push_history(slot, m)

    def _publish(
        self,
        name: str,
        request: GenerationRequest,
        live: LiveRequest,
        m: RequestMetrics,
        verdict: Verdict | None = None,
    ) -> None:
        """The answer's outcome to :attr:`outcomes` (nothing when it was never sent)."""
        host = self.hosts.get(name)
        info = self.info(name)
        model = info.model if info is not None else None
        engine = host.engine if host is not None else None
        if engine is not None:
            where = engine.where(model)
        else:
            spec = self.config.engines[name]
            where = Where(
                spec.kind, spec.kind, spec.url or "in-process", model or spec.model, spec.kind
            )
        outcome = outcome_of(
            request.request_id,
            self.source,
            where,
            INFERTOP_ITSELF,
            live.timeline,
            m,
            trace=request.trace,
            verdict=verdict,
        )
        if outcome is not None:
            self.outcomes.publish(outcome)

    def push_history(self, slot: str, m: RequestMetrics) -> None:
        """An answer's metrics into the slot's windows (answers with no first token
        have none to give)."""
        if m.ttft_ms is None:
            return
        self.last_metrics[slot] = m
        w = self.history[slot]
        w["ttft"].push(m.ttft_ms)
        for key, value in (("itl", m.itl_ms_p50), ("decode", m.decode_tps)):
            if value is not None:
                w[key].push(value)
        if m.prefill_tps is not None:
            w["prefill"].push(m.prefill_tps)

    async def _record(
        self,
        slot: str,
        name: str,
        request: GenerationRequest,
        live: LiveRequest,
        metrics: RequestMetrics,
    ) -> None:
        if self.recorder is None:
            return
        spec = self.config.engines[name]
        info = self.info(name)
        rec = session_record(
            engine=name,
            kind=spec.kind,
            model=info.model if info else str(spec.model),
            messages=request.messages,
            params=request.params(),
            timeline=live.timeline,
            metrics=metrics,
            request_id=request.request_id,
            slot=slot,
            build=info.build if info else None,
            disturbed=live.disturbed,
        )
        try:
            await asyncio.to_thread(self.recorder.append, rec)
        except OSError as e:
            if not self._record_error_shown:
                self._record_error_shown = True
                why = f"session log not written ({self.recorder.path}): {e.strerror}"
                self._emit(Notice(why, "error"))
