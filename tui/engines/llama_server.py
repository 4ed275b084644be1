"""llama.cpp's llama-server: the OpenAI API plus its own ``timings`` as engine truth.

The last stream chunk carries ``timings``: prompt_n (prompt tokens evaluated; prefix-cache
hits excluded), prompt_ms, predicted_n, predicted_ms, predicted_per_second, cache_n
(prompt tokens reused from the cache). predicted_ms spans first to last generated token,
so the engine's decode speed is (predicted_n − 1) / predicted_ms — the same definition
as ours, and exactly llama-server's predicted_per_second. ``cache_prompt: false`` is sent
when the request asks for a cold prefill; ``ignore_eos`` when it asks for exactly
max_tokens.

KV cache: the slot's context size comes from /props; the cache's per-token size from the
model's own GGUF metadata, read from the file /props names when the server is on this
machine (a loopback URL and a readable file) — for a remote server it is unknown, and
said so (``kv_layout_unknown``). llama-server does not report its cache type: f16, its
default, is assumed and marked as such.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlsplit

from tui.core.events import EngineTruth
from tui.core.kv import UnsupportedLayout, layout_from_metadata
from tui.engines.base import EngineError, EngineInfo, GenerationRequest
from tui.engines.gguf import read_gguf_metadata
from tui.engines.openai_compat import OpenAICompatEngine
from tui.engines.openai_stream import OpenAIStreamState
from tui.transport.http_io import TRANSPORT_ERRORS
from tui.transport.prometheus import Scrape, ScrapeError, parse
from tui.transport.whole import json_body


def truth_from_timings(timings: dict[str, Any], usage: dict[str, Any] | None) -> EngineTruth:
    """EngineTruth from llama-server's ``timings`` (and ``usage`` for the totals)."""

    def num(d: dict[str, Any] | None, key: str) -> float | None:
        v = (d or {}).get(key)
        return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None

    def count(d: dict[str, Any] | None, key: str) -> int | None:
        v = num(d, key)
        return None if v is None else int(v)

    prompt_n, cache_n = count(timings, "prompt_n"), count(timings, "cache_n")
    prompt_total = count(usage, "prompt_tokens")
    if prompt_total is None and prompt_n is not None:
        prompt_total = prompt_n + (cache_n or 0)
    predicted_n = count(timings, "predicted_n")
    return EngineTruth(
        prompt_tokens=prompt_total,
        prompt_eval_tokens=prompt_n,
        prompt_ms=num(timings, "prompt_ms"),
        output_tokens=count(usage, "completion_tokens") or predicted_n,
        # predicted_ms runs from the first generated token to the last: N − 1 tokens in it
        # (llama-server's own predicted_per_second is (predicted_n − 1) / predicted_ms).
        decode_tokens=None if predicted_n is None else max(predicted_n - 1, 0),
        decode_ms=num(timings, "predicted_ms"),
        cached_tokens=cache_n,
        source="llama-server timings",
        raw=dict(timings),
    )


class LlamaServerEngine(OpenAICompatEngine):
    kind: ClassVar[str] = "llama-server"

    def __init__(self, spec: Any) -> None:
        super().__init__(spec)
        self.props: dict[str, Any] = {}
        self.kv_layout: dict[str, Any] | None = None
        self.kv_layout_unknown = "the server's /props has not been read"

    async def _prepare(self) -> None:
        await super()._prepare()
        try:
            r = await self.request_raw("GET", "/props")
            props = json_body(r.content) if r.status_code == 200 else None
            self.props = props if isinstance(props, dict) else {}
        except TRANSPORT_ERRORS:
            self.props = {}
        except ValueError:  # not JSON
            self.props = {}
        self.kv_layout, self.kv_layout_unknown = await asyncio.to_thread(
            server_kv_layout, self.base, self.props.get("model_path")
        )

    def info(self) -> EngineInfo:
        info = super().info()
        gen = self.props.get("default_generation_settings") or {}
        n_ctx = gen.get("n_ctx") if isinstance(gen, dict) else None
        info.context_size = n_ctx if isinstance(n_ctx, int) else None
        info.parameters["total_slots"] = self.props.get("total_slots")
        info.parameters["build_info"] = self.props.get("build_info")
        info.parameters["kv_layout"] = self.kv_layout
        info.parameters["kv_layout_unknown"] = self.kv_layout_unknown
        path = self.props.get("model_path")
        if isinstance(path, str) and path and info.model in ("(server default)", "", None):
            info.model = path
        return info

    def build_body(self, request: GenerationRequest) -> dict[str, Any]:
        body = super().build_body(request)
        body["cache_prompt"] = bool(request.cache_prompt)
        if request.ignore_eos:
            body["ignore_eos"] = True
        if self.spec.options.get("timings_per_token"):
            body["timings_per_token"] = True
        return body

    async def metrics_scrape(self) -> Scrape | None:
        """/metrics now, parsed (None when the server was started without --metrics or
        it cannot be read): the bench's per-level account (tui/bench/level_truth.py)."""
        try:
            r = await self.request_raw("GET", "/metrics")
            return parse(r.content.decode("utf-8", "replace")) if r.status_code == 200 else None
        except TRANSPORT_ERRORS:
            return None
        except ScrapeError:
            return None

    def engine_truth(self, state: OpenAIStreamState, context: Any) -> EngineTruth | None:
        timings = state.extra.get("timings")
        if not isinstance(timings, dict):
            return None
        return truth_from_timings(timings, state.usage)


LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


def server_kv_layout(base_url: str, model_path: object) -> tuple[dict[str, Any] | None, str]:
    """(KV layout as a dict, "") from the GGUF that a server on this machine serves, or
    (None, why not). The cache type is llama-server's default, f16, marked as assumed."""
    if not isinstance(model_path, str) or not model_path:
        return None, "the server's /props names no model file"
    host = urlsplit(base_url).hostname or ""
    if host not in LOOPBACK_HOSTS:
        return None, "remote server: its model file is not readable here"
    path = Path(model_path)
    if not path.is_file():
        return None, f"the model file is not readable here: {path.name}"
    try:
        meta = read_gguf_metadata(path)
        layout = layout_from_metadata(meta, cache_type_assumed=True)
    except (EngineError, UnsupportedLayout) as e:
        return None, str(e)
    return layout.to_dict(), ""
