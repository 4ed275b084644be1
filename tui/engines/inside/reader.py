"""InsideReader: one engine's inside, read at most once per :data:`MIN_INTERVAL_S`.

Blocking (call it from a thread: the chat's server watch, the fleet's poller, the
proxy's executor). Each read is bounded: every GET of one read shares one deadline
(:data:`DEADLINE_S`) and the byte cap of tui/engines/inside/fetch.py, so a dripping
/slots or an endless /metrics ends then, with a note saying so, never a traceback.
``may_read`` is the caller's rule for when a read is allowed at all (the proxy: only
while no request passes through it, tui/proxy/inside.py); a read it refuses is skipped,
and the last read stands.

The kind is the engine's (llama-server, vllm, sglang, ollama) or, for an
OpenAI-compatible server of unknown make, found from the first /metrics read's names.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

from tui.core.counter_window import CounterWindow
from tui.core.inside import WINDOW_S, EngineInside, InsideKind
from tui.engines.inside.fetch import Fetcher, InsideError
from tui.engines.inside.llama_server import read_llama_server
from tui.engines.inside.ollama import read_ollama
from tui.engines.inside.sglang import read_sglang
from tui.engines.inside.vllm import read_vllm
from tui.transport.access import HttpAccess
from tui.transport.prometheus import Scrape

MIN_INTERVAL_S: Final = 1.0
DEADLINE_S: Final = 2.0
# An engine kind (tui/engines/kinds.py) -> the inside it has.
KIND_INSIDE: Final[dict[str, InsideKind]] = {
    "llama-server": "llama-server",
    "vllm": "vllm",
    "ollama": "ollama",
    "sglang": "sglang",
}
PREFIXES: Final[tuple[tuple[str, InsideKind], ...]] = (
    ("llamacpp:", "llama-server"),
    ("vllm:", "vllm"),
    ("sglang:", "sglang"),
)


def inside_kind(engine_kind: str) -> InsideKind | None:
    return KIND_INSIDE.get(engine_kind)


def kind_from_scrape(scrape: Scrape) -> InsideKind | None:
    """Which engine a /metrics scrape is from, by its metric names."""
    for name in scrape.samples:
        for prefix, kind in PREFIXES:
            if name.startswith(prefix):
                return kind
    return None


def base_url(url: str) -> str:
    url = url.strip().rstrip("/")
    return url[:-3] if url.endswith("/v1") else url


class InsideReader:
    """See the module docstring. ``kind`` None: found from /metrics at the first read."""

    def __init__(
        self,
        kind: InsideKind | None,
        url: str,
        access: HttpAccess | None = None,
        *,
        min_interval_s: float = MIN_INTERVAL_S,
        deadline_s: float = DEADLINE_S,
        may_read: Callable[[], bool] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kind = kind
        self.base = base_url(url)
        self.access = access or HttpAccess()
        self.fetch = Fetcher(self.access)
        self.min_interval_s = min_interval_s
        self.deadline_s = deadline_s
        self.may_read = may_read
        self.clock = clock
        self.window = CounterWindow(WINDOW_S)
        self.total_slots: int | None = None
        self._props_read = False
        self.last: EngineInside | None = None
        self.last_scrape: Scrape | None = None  # the newest /metrics read (its own numbers)
        self.prev_scrape: Scrape | None = None  # the one before it
        self.last_slots: object = None  # the newest /slots answer, as parsed
        self.error: str | None = None
        self.reads = 0  # reads made (each one GET per endpoint it needs)
        self.skipped = 0  # reads refused by may_read
        self._last_try: float | None = None

    def close(self) -> None:
        """Let go of the kept connection (a reader read again opens a new one)."""
        self.fetch.close()

    def due(self) -> bool:
        t = self._last_try
        return t is None or self.clock() - t >= self.min_interval_s

    def sample(self) -> EngineInside | None:
        """Read now if due and allowed; the newest read (None: none succeeded yet, or the
        last one failed: ``error`` says why)."""
        if not self.due():
            return self.last
        if self.may_read is not None and not self.may_read():
            self.skipped += 1
            return self.last
        self._last_try = self.clock()
        try:
            self.last = self.read()
            self.error = None
        except InsideError as e:
            self.error = str(e)
            self.last = None
        return self.last

    def read(self) -> EngineInside:
        """One read, now (InsideError when nothing could be read)."""
        self.reads += 1
        end = time.monotonic() + self.deadline_s
        kind = self.kind
        if kind == "ollama":
            return read_ollama(self.clock(), self.fetch.json(self.base + "/api/ps", end))
        if kind == "llama-server":
            return self._llama(end)
        scrape = self.fetch.scrape(self.base + "/metrics", end)
        self.prev_scrape, self.last_scrape = self.last_scrape, scrape
        if kind is None:
            kind = kind_from_scrape(scrape)
            if kind is None:
                raise InsideError(f"{self.base}/metrics: no llama-server, vLLM or SGLang metrics")
            self.kind = kind
            if kind == "llama-server":
                return self._llama(end, scrape)
        if kind == "vllm":
            return read_vllm(self.clock(), scrape, self.window)
        return read_sglang(self.clock(), scrape)

    def _llama(self, end: float, scrape: Scrape | None = None) -> EngineInside:
        notes: list[str] = []
        if scrape is None:
            try:
                scrape = self.fetch.scrape(self.base + "/metrics", end)
            except InsideError as e:
                notes.append(f"no /metrics (start llama-server with --metrics): {e}")
                scrape = Scrape()
        if not self._props_read:
            self._props_read = True
            try:
                props = self.fetch.json(self.base + "/props", end)
                n = props.get("total_slots") if isinstance(props, dict) else None
                if isinstance(n, int) and not isinstance(n, bool) and 0 < n < 2**31:
                    self.total_slots = n
            except InsideError:
                pass
        slots: object = None
        try:
            slots = self.fetch.json(self.base + "/slots", end)
        except InsideError as e:
            notes.append(f"no /slots: {e}")
        if not scrape.samples and slots is None:
            raise InsideError("; ".join(notes))
        if scrape.samples:
            self.prev_scrape, self.last_scrape = self.last_scrape, scrape
        self.last_slots = slots
        return read_llama_server(
            self.clock(), scrape, slots, self.total_slots, self.window, tuple(notes)
        )
