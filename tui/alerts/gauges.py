"""The engine's own numbers for alert rules: its ``/metrics`` read every ``interval_s``
on a thread of its own, only while a rule needs them (``requests_waiting``,
``kv_cache``).

- ``requests_waiting``: vLLM's ``vllm:num_requests_waiting`` (summed over engines), or
  llama-server's ``llamacpp:requests_deferred``.
- ``kv_cache``: vLLM's ``vllm:kv_cache_usage_perc`` (its older name
  ``vllm:gpu_cache_usage_perc``), or llama-server's ``llamacpp:kv_cache_usage_ratio``
  where its build exports it; as a percentage.

A read that fails (the server down, no ``--metrics``, not the exposition format) gives
no sample; it is said once (``note``) and tried again at the next interval. Reads are
bounded in bytes and time (tui/transport/prometheus.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Final

from tui.alerts.engine import AlertEngine
from tui.transport.prometheus import Scrape, ScrapeError, fetch

WAITING: Final = ("vllm:num_requests_waiting", "llamacpp:requests_deferred")
KV_CACHE: Final = (
    "vllm:kv_cache_usage_perc",
    "vllm:gpu_cache_usage_perc",
    "llamacpp:kv_cache_usage_ratio",
)


def engine_numbers(scrape: Scrape) -> tuple[float | None, float | None]:
    """(requests waiting, KV cache use in %) of one scrape (None: not exported)."""
    waiting = next((v for n in WAITING if (v := scrape.total(n)) is not None), None)
    kv = None
    for name in KV_CACHE:
        if scrape.has(name):
            samples = list(scrape.samples[name].values())
            kv = 100.0 * sum(samples) / len(samples) if samples else None
            break
    return waiting, kv


class EngineGauges:
    """Reads an engine's /metrics for the alert engine (see the module docstring)."""

    def __init__(
        self,
        base_url: str,
        engine: AlertEngine,
        interval_s: float = 2.0,
        note: Callable[[str], None] | None = None,
    ) -> None:
        self.url = base_url.rstrip("/") + "/metrics"
        self.engine = engine
        self.interval_s = interval_s
        self.note = note
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="infertop-gauges", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def read_once(self) -> None:
        try:
            scrape = fetch(self.url, timeout_s=min(2.0, self.interval_s))
        except (ScrapeError, OSError, ValueError) as e:
            self.failures += 1
            if self.failures == 1 and self.note is not None:
                self.note(f"alerts: cannot read {self.url} ({e}); the engine's rules wait")
            return
        waiting, kv = engine_numbers(scrape)
        self.engine.gauge("requests_waiting", waiting)
        self.engine.gauge("kv_cache", kv)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.read_once()
            self._stop.wait(self.interval_s)

    def close(self, timeout_s: float = 3.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)
