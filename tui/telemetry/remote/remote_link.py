"""A hardware source fed over a link (SSH, an exporter's HTTP): the link's own thread.

The link runs in its own daemon thread: it connects, reads samples and keeps the latest.
``sample()`` (called from the sampler's thread) only copies that under a lock, so a slow,
dead or hanging link never blocks the sampler or the UI. When the link is lost (the
subclass's session ends with :class:`LinkLost`, or with any other error), the last good
numbers stay and the sample says so in ``link``:
"remote telemetry lost: REASON — retrying in N s", then the link reconnects with
exponential backoff (1, 2, 4, 8, 16, 30, 30 … s); the backoff starts over once a session
has delivered a sample. Samples repeated while the link is down carry ``link`` (the
sampler does not add them to its history).
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from collections.abc import Callable

from tui.core.safe_text import terminal_label
from tui.telemetry.devices.nvml import ABSENT, NvmlSample
from tui.telemetry.sampler import TelemetrySample

BACKOFF_S = (1.0, 2.0, 4.0, 8.0, 16.0, 30.0)


class LinkLost(Exception):
    """The link ended; ``reason`` is what the panel says (ssh's last line, ...)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class RemoteLink:
    """Base of the SSH and exporter sources: subclasses implement :meth:`session`."""

    def __init__(
        self,
        label: str,
        interval_s: float,
        backoff_s: tuple[float, ...] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label = label
        self.interval_s = interval_s
        self.backoff_s = backoff_s or BACKOFF_S
        self._clock = clock
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._latest: TelemetrySample | None = None
        self._up = False
        self._reason: str | None = None
        self._retry_at: float | None = None
        self._delivered = False  # in the current session
        self.sessions = 0  # sessions started (tests read these)
        self.losses = 0
        self.samples = 0

    # -- the HardwareSource protocol -------------------------------------------------------
    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(
            target=self._run, name=f"telemetry link: {self.label}", daemon=True
        )
        self._thread.start()

    def sample(self, pid: int | None) -> TelemetrySample:
        with self._lock:
            latest, up, reason, retry_at = self._latest, self._up, self._reason, self._retry_at
        link = None if up else self.link_text(reason, retry_at)
        if latest is None:
            waiting = "no sample yet" if reason is None else "no sample since the link was lost"
            return TelemetrySample(
                self._clock(), None, NvmlSample(ABSENT, waiting), source=self.label, link=link
            )
        return latest if link is None else dataclasses.replace(latest, link=link)

    def close(self) -> None:
        self._stopping.set()
        self.interrupt()
        if self._thread is not None:
            self._thread.join(2.0)

    # -- for subclasses ----------------------------------------------------------------------
    def session(self) -> None:
        """Connect and deliver samples until stopped (return) or the link is lost (raise)."""
        raise NotImplementedError

    def interrupt(self) -> None:
        """Make a running :meth:`session` end soon (called from another thread)."""

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; True when the source is being closed."""
        return self._stopping.wait(max(0.0, seconds))

    def deliver(self, sample: TelemetrySample) -> None:
        with self._lock:
            self._latest = sample
            self._up = True
            self._reason = self._retry_at = None
            self._delivered = True
            self.samples += 1

    def link_text(self, reason: str | None, retry_at: float | None) -> str:
        if reason is None:
            return f"connecting to {self.label}…"
        if retry_at is not None:
            left = retry_at - self._clock()
            if left > 0:
                return f"remote telemetry lost: {reason} — retrying in {math.ceil(left)} s"
        return f"remote telemetry lost: {reason} — reconnecting…"

    # -- the link's thread -------------------------------------------------------------------
    def _run(self) -> None:
        failures = 0
        while not self._stopping.is_set():
            with self._lock:
                self._delivered = False
                self._retry_at = None
            self.sessions += 1
            try:
                self.session()
                reason = "the link ended"
            except LinkLost as e:
                reason = e.reason
            except Exception as e:  # a bug or an odd platform error: still only the link
                reason = f"{type(e).__name__}: {e}"
            if self._stopping.is_set():
                break
            if self._delivered:
                failures = 0
            delay = self.backoff_s[min(failures, len(self.backoff_s) - 1)]
            failures += 1
            with self._lock:
                self._up = False
                # ssh's stderr, an exporter's answer: shown on the panel, so terminal-safe
                self._reason = terminal_label(" ".join(reason.split()), 200) or "the link ended"
                self._retry_at = self._clock() + delay
                self.losses += 1
            if self.wait(delay):
                break
