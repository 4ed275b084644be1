"""Typed messages: the only way workers and threads reach widgets."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.message import Message

from tui.chat.events import ChatEvent
from tui.core.kv import KvState
from tui.telemetry.sampler import TelemetrySample

if TYPE_CHECKING:  # httpx stays off the start-up path
    from tui.engines.servers.discovery import PortFinding
    from tui.engines.servers.server_models import ServerModel


class TelemetrySampled(Message):
    """A hardware sample from the sampler thread."""

    def __init__(self, sample: TelemetrySample) -> None:
        super().__init__()
        self.sample = sample


class ServerSampled(Message):
    """Lines from the engine's server metrics (None: this engine has none), and the
    engine's inside in one line for the narrow strip ("": none)."""

    def __init__(self, engine: str, lines: list[str] | None, short: str = "") -> None:
        super().__init__()
        self.engine, self.lines, self.short = engine, lines, short


class KvUpdated(Message):
    """The KV cache state of an engine (``tui.core.kv.KvState``): from its stream's
    ContextFill events (in-process llama.cpp) or its server's /slots or /metrics."""

    def __init__(self, engine: str, state: KvState | None) -> None:
        super().__init__()
        self.engine, self.state = engine, state


class CoreEvent(Message):
    """Something the chat core reports (tui/chat/events.py), on its way to the screen."""

    def __init__(self, event: ChatEvent) -> None:
        super().__init__()
        self.event = event


class ServersFound(Message):
    """Discovery's findings, one per probed port (tui/engines/servers/discovery.py)."""

    def __init__(self, findings: list[PortFinding]) -> None:
        super().__init__()
        self.findings = findings


class ModelsListed(Message):
    """The models a server engine offers (tui/engines/servers/server_models.py)."""

    def __init__(self, engine: str, models: list[ServerModel]) -> None:
        super().__init__()
        self.engine, self.models = engine, models


class SideNote(Message):
    """A line from a part that runs beside the UI, on its own thread: an alert rule that
    fired or resolved (tui/alerts), the OTLP exporter's one note that its collector
    fails; and whether to ring the bell."""

    def __init__(self, text: str, bell: bool) -> None:
        super().__init__()
        self.text = text
        self.bell = bell
