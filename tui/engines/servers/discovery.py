"""Find the LLM servers already running on this machine: probe loopback ports.

At start-up (in the background: never before the first paint) infertop looks at the
default ports of the engines people run — :data:`DEFAULT_PORTS`, one table, replaced by
``[discovery] ports`` in config — on 127.0.0.1 only, each with a short timeout, and tells
each one's kind as ``--url`` does (tui/engines/servers/detect.py: a few GETs, never a prompt).
Each server found becomes an engine named by kind and port (``ollama:11434``). A port
where nothing listens, that never answers, or that answers but is no LLM server is left
alone (its :class:`PortFinding` says which).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from tui.engines.base import EngineError, EngineSpec

LOOPBACK = "127.0.0.1"  # the only host discovery contacts

# The default port of each engine people run locally (name, port). Several engines share
# 8080; the name is what usually answers there, not what is assumed: each port's kind is
# detected.
DEFAULT_PORTS: tuple[tuple[str, int], ...] = (
    ("Ollama", 11434),
    ("llama-server / llamafile / LocalAI", 8080),
    ("vLLM", 8000),
    ("SGLang", 30000),
    ("LM Studio", 1234),
    ("KoboldCpp", 5001),
    ("Jan", 1337),
    ("TGI", 3000),
)
DEFAULT_TIMEOUT_S = 1.0  # per request of a probe
MAX_PORTS = 64  # a longer list in config is cut here: discovery stays a few requests

FOUND, CLOSED, SILENT, NOT_LLM = "found", "closed", "no answer", "not an LLM server"


@dataclass(frozen=True)
class PortFinding:
    """What one probed port held: ``status`` FOUND (with ``spec``), CLOSED, SILENT or
    NOT_LLM; ``detail`` in words (terminal-safe only once filtered by the caller)."""

    port: int
    status: str
    detail: str = ""
    spec: EngineSpec | None = None
    models: tuple[str, ...] = ()
    took_ms: float = 0.0


def default_ports() -> list[int]:
    return [port for _, port in DEFAULT_PORTS]


def engine_name(kind: str, port: int) -> str:
    """The engine name of a server found by discovery: ``kind:port``."""
    return f"{kind}:{port}"


def _listening(port: int, timeout_s: float) -> bool:
    """Whether a TCP connect to the loopback port succeeds within the timeout."""
    try:
        with socket.create_connection((LOOPBACK, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def probe_port(port: int, timeout_s: float = DEFAULT_TIMEOUT_S) -> PortFinding:
    """Probe one loopback port: connect, then detect its kind (GETs only)."""
    from tui.engines.servers.detect import detect_server

    t0 = time.perf_counter()

    def done(
        status: str, detail: str, spec: EngineSpec | None = None, models: Sequence[str] = ()
    ) -> PortFinding:
        took = (time.perf_counter() - t0) * 1000
        return PortFinding(port, status, detail, spec, tuple(models), took)

    if not _listening(port, timeout_s):
        return done(CLOSED, "nothing listening")
    url = f"http://{LOOPBACK}:{port}"
    try:
        found = detect_server(url, timeout_s)
    except EngineError as e:
        text = str(e)
        if "not an LLM server" in text:
            return done(NOT_LLM, text)
        return done(SILENT, text)
    spec = EngineSpec(
        name=engine_name(found.kind, port),
        kind=found.kind,
        url=url,
        model=found.models[0] if found.models else None,
    )
    return done(FOUND, found.describe(), spec, found.models)


def discover(
    ports: Iterable[int], timeout_s: float = DEFAULT_TIMEOUT_S, skip_urls: Sequence[str] = ()
) -> list[PortFinding]:
    """Probe each port (at most MAX_PORTS, each once, in parallel); findings in the
    ports' order. A port whose URL is in ``skip_urls`` (an engine already configured
    there) is not probed."""
    wanted = list(dict.fromkeys(p for p in ports if 0 < p < 65536))[:MAX_PORTS]
    skip = {u.rstrip("/") for u in skip_urls}
    todo = [p for p in wanted if f"http://{LOOPBACK}:{p}" not in skip]
    if not todo:
        return []
    with ThreadPoolExecutor(max_workers=min(8, len(todo)), thread_name_prefix="discover") as ex:
        return list(ex.map(lambda p: probe_port(p, timeout_s), todo))


def loopback_urls(specs: Iterable[EngineSpec]) -> list[str]:
    """The URLs of configured engines, in the form discovery probes (so a server already
    in config is not added twice under another name)."""
    out = []
    for spec in specs:
        url = (spec.url or "").rstrip("/")
        for host in ("localhost", "[::1]"):
            url = url.replace(f"//{host}:", f"//{LOOPBACK}:")
        if url.endswith("/v1"):
            url = url[:-3]
        if url:
            out.append(url)
    return out
