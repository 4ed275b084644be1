"""llama.cpp's llama-server: the OpenAI API plus its own ``timings`` as engine truth.

The last stream chunk carries ``timings`` (what each field means, and the engine's report
made of it: tui/engines/dialects/llama.py, which the proxy reads it with too).
``cache_prompt: false`` is sent when the request asks for a cold prefill; ``ignore_eos``
when it asks for exactly max_tokens.

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
from tui.engines.dialects.base import StreamDecoder
from tui.engines.dialects.llama import decoder_truth
from tui.engines.files.gguf import read_gguf_metadata
from tui.engines.http.openai_compat import OpenAICompatEngine
from tui.transport.http_io import TRANSPORT_ERRORS
from tui.transport.prometheus import Scrape
from tui.transport.whole import json_body


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
        return await self.request_metrics()

    def engine_truth(self, state: StreamDecoder, context: Any) -> EngineTruth | None:
        return decoder_truth(state)


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
