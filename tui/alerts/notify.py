"""Where an alert event goes: a line (the TUI's, or the headless proxy's stderr), the
JSONL log, the webhook.

- The line: ``on_line(text, bell)``, called on the alert engine's thread (the TUI posts
  it as a Message from there; the proxy prints it).
- The log: one JSON object per event (:meth:`~tui.alerts.engine.AlertEvent.to_dict`),
  appended to a private file (0600, in a 0700 folder; a link or another user's file is
  refused) by :class:`~tui.core.session.SessionRecorder`, as the proxy's events file.
- The webhook: the same object POSTed as JSON from a thread of its own, each try within
  ``timeout_s``, retried ``retries`` times (after 0.5 s, 1 s, 2 s, ...) on a transport
  error or a 5xx/429; its queue holds :data:`QUEUE_LIMIT` events, an event past that is
  dropped and counted. A webhook that hangs or fails holds up nothing but its own
  thread. The URL is the user's; nothing else is sent anywhere.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from tui.alerts.engine import AlertEvent
from tui.alerts.rules import AlertingSettings
from tui.core.session import SessionRecorder

QUEUE_LIMIT: Final = 100
USER_AGENT: Final = "infertop-alerts"


@dataclass
class WebhookStats:
    sent: int = 0
    failed: int = 0  # events given up on after every try
    dropped: int = 0  # events that found the queue full
    last_error: str | None = None


class Webhook:
    """POSTs events to one URL from its own thread (see the module docstring)."""

    def __init__(self, url: str, timeout_s: float = 5.0, retries: int = 2) -> None:
        self.url = url
        self.timeout_s = timeout_s
        self.retries = retries
        self.stats = WebhookStats()
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue(QUEUE_LIMIT)
        self._thread = threading.Thread(target=self._run, name="infertop-webhook", daemon=True)
        self._thread.start()

    def put(self, payload: dict[str, Any]) -> None:
        try:
            self._queue.put_nowait(payload)
        except queue.Full:
            self.stats.dropped += 1

    def _run(self) -> None:
        import httpx

        with httpx.Client(
            timeout=httpx.Timeout(self.timeout_s),
            headers={"User-Agent": USER_AGENT},
            follow_redirects=False,
            trust_env=False,
        ) as client:
            while True:
                payload = self._queue.get()
                if payload is None:
                    return
                self._send(client, payload)

    def _send(self, client: Any, payload: dict[str, Any]) -> None:
        import httpx

        body = json.dumps(payload).encode()
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(min(0.5 * 2 ** (attempt - 1), 8.0))
            try:
                r = client.post(
                    self.url, content=body, headers={"Content-Type": "application/json"}
                )
            except httpx.HTTPError as e:
                self.stats.last_error = f"{type(e).__name__}: {e}"[:200]
                continue
            if r.status_code < 300:
                self.stats.sent += 1
                return
            self.stats.last_error = f"HTTP {r.status_code}"
            if r.status_code < 500 and r.status_code != 429:
                break  # the receiver refuses it: trying again will not help
        self.stats.failed += 1

    def close(self, timeout_s: float = 5.0) -> None:
        try:
            self._queue.put(None, timeout=timeout_s)
        except queue.Full:
            return
        self._thread.join(timeout_s)


class Notifier:
    """The alert engine's ``notify``: every event to the line, the log and the webhook
    that ``settings`` names."""

    def __init__(
        self,
        settings: AlertingSettings,
        on_line: Callable[[str, bool], None] | None = None,
    ) -> None:
        self.settings = settings
        self.on_line = on_line
        self.log = SessionRecorder(Path(settings.log).expanduser()) if settings.log else None
        self.log_error: str | None = None
        self.webhook = (
            Webhook(settings.webhook, settings.webhook_timeout_s, settings.webhook_retries)
            if settings.webhook
            else None
        )
        self.events: list[AlertEvent] = []  # the most recent, for a screen to list

    def __call__(self, event: AlertEvent) -> None:
        self.events = [*self.events[-99:], event]
        payload = event.to_dict()
        if self.webhook is not None:
            self.webhook.put(payload)
        if self.log is not None:
            try:
                self.log.append(payload)
            except OSError as e:
                self.log_error = f"{self.log.path}: {e.strerror or e}"
        if self.on_line is not None:
            self.on_line(event.line(), self.settings.bell)

    def close(self, timeout_s: float = 5.0) -> None:
        if self.webhook is not None:
            self.webhook.close(timeout_s)

    def exposition(self) -> str:
        if self.webhook is None:
            return ""
        s = self.webhook.stats
        lines = []
        for name, value in (("sent", s.sent), ("failed", s.failed), ("dropped", s.dropped)):
            metric = f"infertop_alert_webhook_{name}_total"
            lines += [f"# TYPE {metric} counter", f"{metric} {value}"]
        return "\n".join(lines) + "\n"
