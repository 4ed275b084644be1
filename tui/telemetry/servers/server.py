"""Server-side panel lines for engines that run behind a server.

- vLLM (kind "vllm"): KV-cache usage %, running / waiting requests (its /metrics gauges).
- llama-server (kind "llama-server"): busy / total slots, requests processing / deferred,
  engine prefill and decode tok/s from its *_total counters between two scrapes.
- Ollama (kind "ollama"): each loaded model's placement; spill to CPU when
  size_vram < size (Ollama's /api/ps).

The scrapers live in tui.telemetry.{vllm_metrics, llamacpp_metrics, ollama_ps}; they are
imported lazily, so this module works (and says "no server metrics") without them.
``ServerProbe.sample()`` never raises: a failed scrape is a line saying why. After a
sample, ``ServerProbe.kv`` holds the KV cache state it saw (llama-server: the slot's tokens
from /slots with the model's layout; vLLM: its KV usage and blocks), or None.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tui.core.kv import KvLayout, KvState, state_from_fill, state_from_vllm, tokens_from_slots
from tui.transport.access import HttpAccess


class ServerProbe:
    """Scrapes one engine's server; build with :func:`server_probe`."""

    def __init__(self, title: str, scrape: Callable[[], list[str]]) -> None:
        self.title = title
        self._scrape = scrape
        self.kv: KvState | None = None

    def sample(self) -> list[str]:
        try:
            return self._scrape()
        except Exception as e:  # ScrapeError and friends: shown, never raised
            why = str(e).splitlines()[0] if str(e) else type(e).__name__
            return [f"{self.title}: no metrics ({why})"]


def _base(url: str) -> str:
    url = url.strip().rstrip("/")
    return url[:-3] if url.endswith("/v1") else url


def _pct(v: float | None) -> str:
    return "–" if v is None else f"{100 * v:.0f}%"


def _num(v: float | None, fmt: str = "{:.0f}") -> str:
    return "–" if v is None else fmt.format(v)


def server_probe(
    kind: str,
    url: str | None,
    access: HttpAccess | None,
    kv_layout: KvLayout | None = None,
    kv_unknown: str = "",
) -> ServerProbe | None:
    """A probe for an engine of ``kind`` at ``url`` when that kind has server-side metrics,
    else None. ``access``: the engine's own headers and TLS setting (see
    tui.engines.http.http_common.access_for). ``kv_layout``: the served model's KV layout, when
    known (llama-server; ``kv_unknown`` says why not)."""
    if not url:
        return None
    base = _base(url)
    try:
        if kind == "vllm":
            from tui.telemetry.servers.vllm_metrics import VLLMMetrics

            vm = VLLMMetrics(base, access=access)

            def vllm_lines() -> list[str]:
                s = vm.sample()
                probe.kv = state_from_vllm(s.kv_cache_usage, s.cache_config)
                return [
                    f"vLLM KV cache {_pct(s.kv_cache_usage)} · running {_num(s.running)}"
                    f" · waiting {_num(s.waiting)}"
                ]

            probe = ServerProbe("vLLM", vllm_lines)
            return probe
        if kind == "llama-server":
            from tui.telemetry.servers.llamacpp_metrics import LlamaServerMetrics

            lm = LlamaServerMetrics(base, access=access)

            def llama_lines() -> list[str]:
                s: Any = lm.sample()
                tokens, n_ctx = tokens_from_slots(s.slots)
                probe.kv = state_from_fill(tokens, n_ctx, kv_layout, kv_unknown)
                line = (
                    f"llama-server slots {_num(s.busy_slots)}/{_num(s.total_slots)} busy"
                    f" · processing {_num(s.requests_processing)}"
                    f" · deferred {_num(s.requests_deferred)}"
                )
                speeds = (
                    f"server prefill {_num(s.prefill_tps, '{:.1f}')} tok/s"
                    f" · decode {_num(s.decode_tps, '{:.1f}')} tok/s (since last scrape)"
                )
                return [line, speeds]

            probe = ServerProbe("llama-server", llama_lines)
            return probe
        if kind == "ollama":
            from tui.telemetry.servers.ollama_ps import loaded_models

            def ollama_lines() -> list[str]:
                models = loaded_models(base, access=access)
                if not models:
                    return ["Ollama: no model loaded"]
                out = []
                for m in models:
                    spill = " — SPILLED to CPU" if m.size_vram < m.size else ""
                    out.append(f"Ollama {m.name}: {m.placement}{spill}")
                return out

            return ServerProbe("Ollama", ollama_lines)
    except ImportError:
        return None
    return None
