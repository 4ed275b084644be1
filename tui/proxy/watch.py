"""ProxyWatch: attached to a running proxy's ``/infertop/events`` (``infertop --watch URL``).

A thread with its own event loop reads the stream with infertop's lean HTTP client
(kernel-stamped, bounded: a line may hold 16 MiB, and a stream that says nothing for
:data:`STALL_S` seconds — the proxy sends a tick every half second — counts as lost)
and keeps the rows; the requests view copies a :class:`WatchSnapshot` on its own timer.
Every line is untrusted: a row that fails :func:`~tui.proxy.rows.row_from_json` is
skipped and counted, never shown. A lost stream is retried after 1, 2, 4, 8, 16, 30 s
(the status line says why and when). One request's timeline, and on request its text,
are fetched one at a time (:meth:`ProxyWatch.detail`).

Series for the sparklines (one value per finished request, all clients' traffic): TTFT
(streamed requests), ITL p50, decode tok/s, prefill tok/s (engine-reported where the
engine gives it); and ``rate``: all output tokens per second, from the growth of the
proxy's token total between ticks.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field, replace
from typing import Any

from tui.core.inside import EngineInside, inside_from_dict
from tui.core.safe_text import terminal_label
from tui.core.verdict import Verdict, verdict_from_dict
from tui.proxy.book import WatchEvent
from tui.proxy.rows import TEXT_LIMIT, RequestRow, row_from_json
from tui.transport.http1 import Http1Pool, fast_path_ok
from tui.transport.http_io import TRANSPORT_ERRORS, HttpTimeouts
from tui.transport.sse import EventTooLarge, NDJSONDecoder
from tui.transport.whole import SCRAPE_LIMIT, deadline_client, get_whole, json_body

LINK_ERRORS: tuple[type[BaseException], ...] = (*TRANSPORT_ERRORS, EventTooLarge)
STALL_S = 10.0
BACKOFF_S = (1, 2, 4, 8, 16, 30)
KEEP = 500
SERIES = 120
SERIES_KEYS = ("ttft", "itl", "decode", "prefill", "rate")


@dataclass
class WatchSnapshot:
    """What the view draws: rows (ages as of now), status, totals, series."""

    rows: list[RequestRow]
    status: str
    attached: bool
    info: dict[str, Any]
    totals: dict[str, int]
    series: dict[str, list[float]] = field(default_factory=dict)
    bad_lines: int = 0
    version: int = 0
    inside: EngineInside | None = None  # the engine's inside, as the proxy last read it
    verdicts: dict[str, Verdict] = field(default_factory=dict)  # request id -> its verdict
    sessions: list[dict[str, Any]] = field(default_factory=list)  # (session_summary's)


class WatchError(Exception):
    pass


SESSIONS_SHOWN = 20
SESSION_NUMBERS = (
    "turns",
    "prefill_ms",
    "decode_ms",
    "queue_ms",
    "client_ms",
    "cached_tokens",
    "computed_tokens",
    "context_tokens",
)


def session_summaries(v: Any) -> list[dict[str, Any]]:
    """The proxy's session summaries (tui/proxy/sessions.py), read as untrusted: each an
    object with a text id, client and model and finite numbers; others dropped."""
    out: list[dict[str, Any]] = []
    for d in v[:SESSIONS_SHOWN] if isinstance(v, list) else []:
        if not isinstance(d, dict) or not isinstance(d.get("id"), str):
            continue
        row: dict[str, Any] = {
            k: (d[k][:TEXT_LIMIT] if isinstance(d.get(k), str) else None)
            for k in ("id", "client", "model")
        }
        for k in SESSION_NUMBERS:
            row[k] = _finite(d.get(k))
        out.append(row)
    return out


def _finite(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        return None
    return float(v)


class ProxyWatch:
    """See the module docstring. ``start()``, ``snapshot()``, ``detail()``, ``stop()``."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        if not fast_path_ok(self.url):
            raise WatchError(f"--watch needs a plain http:// URL (an ssh tunnel's end): {url!r}")
        self._lock = threading.Lock()
        self._rows: OrderedDict[str, RequestRow] = OrderedDict()
        self._seen: dict[str, float] = {}  # id -> monotonic time its age was given
        self._series = {k: deque[float](maxlen=SERIES) for k in SERIES_KEYS}
        self._info: dict[str, Any] = {}
        self._totals: dict[str, int] = {}
        self._last_tokens: tuple[float, int] | None = None
        self._inside: EngineInside | None = None
        self._verdicts: OrderedDict[str, Verdict] = OrderedDict()
        self._sessions: list[dict[str, Any]] = []
        self.status = f"attaching to {self.url}…"
        self.attached = False
        self.bad_lines = 0
        self.last_bad = ""
        self.version = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None

    # -- the thread ---------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="proxy-watch", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        loop, task = self._loop, self._task
        if loop is not None and task is not None:
            loop.call_soon_threadsafe(task.cancel)
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._task = asyncio.current_task()
            attempt = 0
            while not self._stop.is_set():
                try:
                    await self._attach()
                    why = "the proxy ended the stream"
                except asyncio.CancelledError:
                    return
                except WatchError as e:
                    why = str(e)
                except LINK_ERRORS as e:
                    why = _transport_words(e)
                attempt = 0 if self.attached else attempt + 1
                wait = BACKOFF_S[min(attempt, len(BACKOFF_S) - 1)]
                with self._lock:
                    self.attached = False
                    self.status = f"proxy lost: {why} — retrying in {wait} s"
                    self.version += 1
                try:
                    await asyncio.sleep(wait)
                except asyncio.CancelledError:
                    return

        try:
            asyncio.run(main())
        except RuntimeError:  # stopped while starting
            pass

    async def _attach(self) -> None:
        timeouts = HttpTimeouts(5.0, STALL_S, STALL_S)
        pool = Http1Pool({"User-Agent": "infertop-watch"}, timeouts)
        try:
            resp = await pool.request("GET", self.url + "/infertop/events")
            try:
                if resp.status_code != 200:
                    body = await resp.aread(4096, timeouts)
                    raise WatchError(
                        f"HTTP {resp.status_code} from {self.url}/infertop/events: "
                        + terminal_label(body.decode("utf-8", "replace"), 200)
                    )
                decoder = NDJSONDecoder()

                def on_part(_t: int, data: bytes) -> bool:
                    for line in decoder.feed(data):
                        self.take_line(line)
                    return self._stop.is_set()

                await resp.push_body(timeouts, on_part)
            finally:
                await resp.aclose()
        finally:
            pool.close()

    # -- the lines ------------------------------------------------------------------------
    def take_line(self, line: str) -> None:
        """One line of the stream (untrusted: a bad one is counted and skipped)."""
        try:
            obj = json_body(line.encode())
            if not isinstance(obj, dict):
                raise ValueError("not an object")
            self._apply(obj)
        except (ValueError, TypeError, KeyError) as e:
            with self._lock:
                self.bad_lines += 1
                self.last_bad = str(e)[:200]

    def _apply(self, obj: dict[str, Any]) -> None:
        kind = obj.get("event")
        now = time.monotonic()
        with self._lock:
            if kind == WatchEvent.HELLO:
                rows = [row_from_json(r) for r in _list(obj.get("rows"))]
                self._rows.clear()
                self._seen.clear()
                for r in rows:
                    self._put(r, now)
                    self._finished(r, None)
                info = obj.get("proxy")
                self._info = info if isinstance(info, dict) else {}
                self.attached = True
                self.status = "attached"
            elif kind in (WatchEvent.START, WatchEvent.END):
                row = row_from_json(obj.get("row"))
                self._put(row, now)
                if kind == WatchEvent.END:
                    m = obj.get("metrics")
                    self._finished(row, m if isinstance(m, dict) else None)
                    verdict = verdict_from_dict(obj.get("verdict"))
                    if verdict is not None:
                        self._verdicts[row.id] = verdict
                        while len(self._verdicts) > KEEP:
                            self._verdicts.popitem(last=False)
            elif kind == WatchEvent.TICK:
                for r in _list(obj.get("rows")):
                    self._put(row_from_json(r), now)
            else:
                raise ValueError(f"unknown event {str(kind)[:20]!r}")
            totals = obj.get("totals")
            if isinstance(totals, dict):
                self._take_totals(totals, now)
            if kind in (WatchEvent.HELLO, WatchEvent.TICK):
                self._inside = inside_from_dict(obj.get("inside"))
                self._sessions = session_summaries(obj.get("sessions"))
            self.version += 1

    def _put(self, row: RequestRow, now: float) -> None:
        self._rows[row.id] = row
        self._rows.move_to_end(row.id)
        self._seen[row.id] = now
        while len(self._rows) > KEEP:
            old, _ = self._rows.popitem(last=False)
            self._seen.pop(old, None)

    def _finished(self, row: RequestRow, m: dict[str, Any] | None) -> None:
        if row.in_flight:
            return
        s = self._series
        if row.ttft_ms is not None and row.stream is not False:
            s["ttft"].append(row.ttft_ms)
        if row.itl_p50_ms is not None:
            s["itl"].append(row.itl_p50_ms)
        if row.tps is not None:
            s["decode"].append(row.tps)
        prefill = _finite((m or {}).get("prefill_tps"))
        if prefill is not None:
            s["prefill"].append(prefill)

    def _take_totals(self, totals: dict[str, Any], now: float) -> None:
        clean = {k: v for k, v in totals.items() if isinstance(v, int) and v >= 0}
        self._totals = {str(k)[:20]: v for k, v in list(clean.items())[:20]}
        tokens = clean.get("output_tokens")
        if tokens is None:
            return
        last = self._last_tokens
        if last is not None and now - last[0] >= 0.4 and tokens >= last[1]:
            self._series["rate"].append((tokens - last[1]) / (now - last[0]))
            self._last_tokens = (now, tokens)
        elif last is None or tokens < last[1]:
            self._last_tokens = (now, tokens)

    # -- what the view asks -----------------------------------------------------------------
    def snapshot(self) -> WatchSnapshot:
        now = time.monotonic()
        with self._lock:
            rows = [
                replace(r, age_ms=r.age_ms + 1000 * (now - self._seen.get(r.id, now)))
                for r in self._rows.values()
            ]
            return WatchSnapshot(
                rows=rows,
                status=self.status,
                attached=self.attached,
                info=dict(self._info),
                totals=dict(self._totals),
                series={k: list(v) for k, v in self._series.items()},
                bad_lines=self.bad_lines,
                version=self.version,
                inside=self._inside,
                verdicts=dict(self._verdicts),
                sessions=list(self._sessions),
            )

    def detail(self, rid: str, with_text: bool = False, timeout: float = 5.0) -> dict[str, Any]:
        """One request's timeline (and text); WatchError with a one-line reason."""
        url = f"{self.url}/infertop/requests/{_quote(rid)}" + ("?text=1" if with_text else "")
        client = deadline_client(timeout=timeout)
        try:
            r = get_whole(client, url, limit=SCRAPE_LIMIT, deadline_s=timeout)
        except TRANSPORT_ERRORS as e:
            raise WatchError(_transport_words(e)) from None
        finally:
            client.close()
        if r.status_code != 200:
            raise WatchError(f"HTTP {r.status_code}: " + terminal_label(r.text, 200))
        try:
            obj = json_body(r.content)
        except ValueError:
            raise WatchError("the proxy's answer is not JSON") from None
        if not isinstance(obj, dict):
            raise WatchError("the proxy's answer is not an object")
        return obj


def _list(v: Any) -> list[Any]:
    if not isinstance(v, list):
        raise ValueError("rows is not a list")
    return v


def _quote(rid: str) -> str:
    from urllib.parse import quote

    return quote(rid, safe="")


def _transport_words(e: BaseException) -> str:
    name = type(e).__name__
    text = " ".join(str(e).split())[:160]
    if "refused" in text.lower() or isinstance(e, ConnectionRefusedError):
        return "connection refused (is the proxy running?)"
    return f"{name}: {text}" if text else name
