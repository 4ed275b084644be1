"""The server-side view of a chat's engine: its own /metrics (or /slots, /api/ps) sampled
at the telemetry interval, in a thread of the caller's (tui/telemetry/servers/server.py reads)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from tui.core.kv import KvLayout, KvState
from tui.engines.base import EngineError, EngineSpec
from tui.telemetry.servers.server import server_probe


def watch_server(
    spec: EngineSpec,
    kv: tuple[KvLayout | None, str],
    interval_s: float,
    stopped: Callable[[], bool],
    on_lines: Callable[[list[str] | None], object],
    on_kv: Callable[[KvState], object],
) -> None:
    """Blocking, until ``stopped()``: hand each sample's lines to ``on_lines`` (None: this
    engine has no server metrics, and the watch ends) and each changed KV state to
    ``on_kv``."""
    from tui.engines.http.http_common import access_for  # httpx: not on the start-up path

    try:
        access = access_for(spec) if spec.url else None
    except EngineError as e:
        on_lines([f"server metrics: {e}"])
        return
    probe = server_probe(spec.kind, spec.url, access, *kv)
    if probe is None:
        on_lines(None)
        return
    kv_shown = None
    wake = threading.Event()
    while not stopped():
        on_lines(probe.sample())
        if probe.kv is not None and probe.kv != kv_shown:  # only what changed
            kv_shown = probe.kv
            on_kv(probe.kv)
        deadline = time.monotonic() + max(interval_s, 0.5)
        while time.monotonic() < deadline and not stopped():
            wake.wait(0.05)
