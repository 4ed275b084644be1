"""When the OTLP export sends (tui/otel/export.py): its rhythm from the SDK's batch
processor variables, and the back-off after a failed export."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Final

BATCH: Final = 512  # spans per export at most (OTEL_BSP_MAX_EXPORT_BATCH_SIZE)
FLUSH_S: Final = 5.0  # an export every (OTEL_BSP_SCHEDULE_DELAY, in ms)
QUEUE: Final = 4096  # finished requests waiting at most (OTEL_BSP_MAX_QUEUE_SIZE)
BACKOFF_MAX_S: Final = 60.0


@dataclass(frozen=True)
class BatchSettings:
    flush_s: float
    batch: int
    queue: int


def batch_settings(environ: dict[str, str] | None = None) -> BatchSettings:
    """The export's rhythm from the SDK's batch processor variables, where set to a
    positive whole number (else the default, as the SDK does): ``OTEL_BSP_SCHEDULE_DELAY``
    (ms between exports; :data:`FLUSH_S`, the SDK's 5 s), ``OTEL_BSP_MAX_EXPORT_BATCH_SIZE``
    (:data:`BATCH`, the SDK's 512), ``OTEL_BSP_MAX_QUEUE_SIZE`` (:data:`QUEUE`)."""
    env = os.environ if environ is None else environ

    def whole(name: str, default: int) -> int:
        value = env.get(name, "").strip()
        return int(value) if value.isdigit() and int(value) > 0 else default

    return BatchSettings(
        whole("OTEL_BSP_SCHEDULE_DELAY", round(FLUSH_S * 1000)) / 1000.0,
        whole("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", BATCH),
        whole("OTEL_BSP_MAX_QUEUE_SIZE", QUEUE),
    )


class Backoff:
    """After a failed export, rest ``first`` seconds (the exporter's: one flush
    interval, at least 1 s), doubling with each failure to :data:`BACKOFF_MAX_S`; a
    success ends it. A failed export costs the SDK's retries within its timeout (~6
    connection attempts, ~20-30 ms of CPU here), so a collector that stays dead is
    asked once a minute, not at every flush."""

    def __init__(self, first: float = 1.0) -> None:
        self.first = first
        self.seconds = 0.0
        self.until = 0.0

    def resting(self, now: float) -> bool:
        return now < self.until

    def failed(self, now: float) -> None:
        self.seconds = min(BACKOFF_MAX_S, max(self.first, self.seconds * 2))
        self.until = now + self.seconds

    def reset(self) -> None:
        self.seconds = self.until = 0.0
