"""The server-side view of a chat's engine — its inside: slots and queue, KV and prefix
cache, speculative decoding (tui/engines/inside), or for other kinds its own /metrics
lines (tui/telemetry/servers/server.py) — sampled in a thread of the caller's at the
telemetry interval, and never more than once a second (InsideReader's rule)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from tui.core.inside import EngineInside
from tui.core.inside_text import full_lines, short_line
from tui.core.kv import KvLayout, KvState, state_from_fill, state_from_vllm, tokens_from_slots
from tui.engines.base import EngineError, EngineSpec
from tui.engines.inside.reader import InsideReader, inside_kind
from tui.telemetry.servers.server import server_probe
from tui.transport.access import HttpAccess

INSIDE_INTERVAL_S = 1.0


def engine_lines(reader: InsideReader, inside: EngineInside | None) -> list[str]:
    """The panel's lines: the inside in full, then (llama-server) the engine's prefill and
    decode speeds since the previous read; a failed read says why."""
    if inside is None:
        why = (reader.error or "not read yet").splitlines()[0]
        return [f"{reader.kind or 'server'}: no metrics ({why})"]
    lines = full_lines(inside)
    scrape = reader.last_scrape
    if inside.kind == "llama-server" and scrape is not None and scrape.samples:
        from tui.telemetry.servers.llamacpp_metrics import summarize

        s = summarize(reader.prev_scrape, scrape)
        if s.prefill_tps is not None or s.decode_tps is not None:
            pre = "–" if s.prefill_tps is None else f"{s.prefill_tps:.1f}"
            dec = "–" if s.decode_tps is None else f"{s.decode_tps:.1f}"
            lines.append(f"server prefill {pre} tok/s · decode {dec} tok/s (since last read)")
    return lines


def kv_of(
    reader: InsideReader, inside: EngineInside | None, kv: tuple[KvLayout | None, str]
) -> KvState | None:
    """The KV cache the read saw: llama-server's slot tokens with the model's layout; vLLM's
    own use of its blocks (cache_config_info's labels)."""
    if inside is None:
        return None
    if inside.kind == "llama-server":
        tokens, n_ctx = tokens_from_slots(reader.last_slots)
        return state_from_fill(tokens, n_ctx, *kv)
    if inside.kind == "vllm":
        config: dict[str, str] = {}
        scrape = reader.last_scrape
        if scrape is not None:
            for labels in scrape.samples.get("vllm:cache_config_info", {}):
                config = dict(labels)
                break
        return state_from_vllm(inside.kv_usage, config)
    return None


def watch_server(
    spec: EngineSpec,
    kv: tuple[KvLayout | None, str],
    interval_s: float,
    stopped: Callable[[], bool],
    on_lines: Callable[[list[str] | None], object],
    on_kv: Callable[[KvState], object],
    on_short: Callable[[str], object] | None = None,
) -> None:
    """Blocking, until ``stopped()``: hand each read's lines to ``on_lines`` (None: this
    engine has no server metrics, and the watch ends), its one-line form to ``on_short``
    and each changed KV state to ``on_kv``."""
    from tui.engines.http.http_common import access_for  # httpx: not on the start-up path

    try:
        access = access_for(spec) if spec.url else None
    except EngineError as e:
        on_lines([f"server metrics: {e}"])
        return
    kind = inside_kind(spec.kind)
    if kind is None or not spec.url:
        _watch_probe(spec, kv, interval_s, stopped, on_lines, on_kv, access)
        return
    reader = InsideReader(kind, spec.url, access, min_interval_s=INSIDE_INTERVAL_S)
    try:
        _watch_inside(reader, kv, interval_s, stopped, on_lines, on_kv, on_short)
    finally:
        reader.close()


def _watch_inside(
    reader: InsideReader,
    kv: tuple[KvLayout | None, str],
    interval_s: float,
    stopped: Callable[[], bool],
    on_lines: Callable[[list[str] | None], object],
    on_kv: Callable[[KvState], object],
    on_short: Callable[[str], object] | None,
) -> None:
    kv_shown = None
    wake = threading.Event()
    while not stopped():
        inside = reader.sample()
        if on_short is not None:  # (first: a front end may post it with the lines)
            on_short(short_line(inside) if inside is not None else "")
        on_lines(engine_lines(reader, inside))
        state = kv_of(reader, inside, kv)
        if state is not None and state != kv_shown:  # only what changed
            kv_shown = state
            on_kv(state)
        deadline = time.monotonic() + max(interval_s, INSIDE_INTERVAL_S)
        while time.monotonic() < deadline and not stopped():
            wake.wait(0.05)


def _watch_probe(
    spec: EngineSpec,
    kv: tuple[KvLayout | None, str],
    interval_s: float,
    stopped: Callable[[], bool],
    on_lines: Callable[[list[str] | None], object],
    on_kv: Callable[[KvState], object],
    access: HttpAccess | None,
) -> None:
    probe = server_probe(spec.kind, spec.url, access, *kv)
    if probe is None:
        on_lines(None)
        return
    kv_shown = None
    wake = threading.Event()
    while not stopped():
        on_lines(probe.sample())
        if probe.kv is not None and probe.kv != kv_shown:
            kv_shown = probe.kv
            on_kv(probe.kv)
        deadline = time.monotonic() + max(interval_s, 0.5)
        while time.monotonic() < deadline and not stopped():
            wake.wait(0.05)
