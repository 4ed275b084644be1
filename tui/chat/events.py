"""What the chat core tells its front end (one listener; the TUI posts each as a Message).

Every event is made on the core's own event loop (the front end's), never in an engine's
thread: stream events stay in the answer's :class:`~tui.core.live.LiveRequest`, which a
front end reads when it draws.
"""

from __future__ import annotations

from dataclasses import dataclass

from tui.chat.host import HostState
from tui.core.live import LiveRequest
from tui.core.metrics import RequestMetrics
from tui.core.verdict import Verdict
from tui.engines.placement import ABPlan


@dataclass(frozen=True)
class EngineStateChanged:
    """The engine in ``slot`` is now ``state`` (loading, ready, generating, error)."""

    slot: str
    engine: str
    state: HostState
    detail: str = ""


@dataclass(frozen=True)
class AnswerWaiting:
    """A sequential A/B turn: the answer in ``slot`` waits for ``first`` to finish."""

    slot: str
    request_id: str
    first: str
    plan: ABPlan


@dataclass(frozen=True)
class AnswerEnded:
    """An answer ended (finished, cancelled or failed); ``metrics`` are final and the
    session record is written."""

    slot: str
    live: LiveRequest
    metrics: RequestMetrics
    verdict: Verdict | None = None  # why it took its time (tui/core/verdict.py)


@dataclass(frozen=True)
class TurnEnded:
    """Every answer of turn ``turn`` ended; ``plan`` says how an A/B turn ran."""

    turn: int
    results: dict[str, RequestMetrics]
    plan: ABPlan | None


@dataclass(frozen=True)
class Notice:
    """Something the user should read (a session log that could not be written)."""

    text: str
    severity: str = "warning"


ChatEvent = EngineStateChanged | AnswerWaiting | AnswerEnded | TurnEnded | Notice
