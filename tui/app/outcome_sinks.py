"""OutcomeSinks: where the app's finished answers go besides the screen.

A base of :class:`~tui.app.app.InfertopApp`: the request ledger (every answer kept,
numbers only: tui/app/ledger_link.py) and the hand-off of ``--otlp``/alert rules
(tui/cli/handoff.py: OTLP export, alerts), each a sink of the chat core's outcomes; an
exporter's note or an alert's line is a notification here (:class:`SideNote`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.app import App
from textual.notifications import SeverityLevel

from tui.app.ledger_link import AppLedger, thread_note
from tui.app.messages import SideNote
from tui.chat.core import ChatCore
from tui.config import Config


class OutcomeSinks(App[None]):
    """See the module docstring; :class:`~tui.app.app.InfertopApp`'s ``__init__`` sets
    the state."""

    core: ChatCore
    ledger: AppLedger
    handoff: Any
    startup_notes: list[tuple[str, SeverityLevel]]

    def _open_ledger(self, ledger: Path | None, config: Config) -> None:
        """The request ledger: every answer (and bench request) kept, numbers only."""
        self.ledger = AppLedger(ledger, config.ledger)
        sink = self.ledger.open(thread_note(self))
        if sink is not None:
            self.core.outcomes.add(sink)
        elif self.ledger.error:
            self.startup_notes.append((self.ledger.error, "warning"))

    def _attach_handoff(self, handoff: Any) -> None:
        """OTLP export and alert rules (tui/cli/handoff.py): their sinks take every
        finished answer, each request gets its trace context, an alert is a line here."""
        from tui.core.trace_context import TraceMode

        for sink in handoff.sinks:
            self.core.outcomes.add(sink)
        mode: TraceMode = "propagate" if handoff.propagate else "record"
        self.core.trace = mode if handoff.recording else "off"
        exporter = handoff.exporter
        if exporter is not None and exporter.capture_content:
            from tui.otel.spans import answer_json, messages_json

            def tap(rid: str, msgs: list[dict[str, str]], text: str, finish: str | None) -> None:
                exporter.attach_content(rid, messages_json(msgs), answer_json(text, finish))

            self.core.content_tap = tap
        if exporter is not None:
            exporter.note = lambda text: self.post_message(SideNote(text, False))
        if handoff.notifier is not None:
            handoff.notifier.on_line = lambda text, bell: self.post_message(SideNote(text, bell))

    def on_side_note(self, msg: SideNote) -> None:
        self.notify(msg.text, severity="warning", timeout=10)
        if msg.bell:
            self.bell()
