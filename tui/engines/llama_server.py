"""llama.cpp's llama-server: the OpenAI API plus its own ``timings`` as engine truth.

The last stream chunk carries ``timings``: prompt_n (prompt tokens evaluated; prefix-cache
hits excluded), prompt_ms, predicted_n, predicted_ms, predicted_per_second, cache_n
(prompt tokens reused from the cache). predicted_ms spans first to last generated token,
so the engine's decode speed is (predicted_n − 1) / predicted_ms — the same definition
as ours, and exactly llama-server's predicted_per_second. ``cache_prompt: false`` is sent
when the request asks for a cold prefill; ``ignore_eos`` when it asks for exactly
max_tokens.
"""

from __future__ import annotations

from typing import Any, ClassVar

import httpx

from tui.core.events import EngineTruth
from tui.engines.base import EngineInfo, GenerationRequest
from tui.engines.openai_compat import OpenAICompatEngine
from tui.engines.openai_stream import OpenAIStreamState


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

    async def _prepare(self) -> None:
        await super()._prepare()
        client = await self._client_ready()
        try:
            r = await client.get(self.base + "/props")
            if r.status_code == 200 and isinstance(r.json(), dict):
                self.props = r.json()
        except (httpx.HTTPError, ValueError):
            self.props = {}

    def info(self) -> EngineInfo:
        info = super().info()
        gen = self.props.get("default_generation_settings") or {}
        n_ctx = gen.get("n_ctx") if isinstance(gen, dict) else None
        info.context_size = n_ctx if isinstance(n_ctx, int) else None
        info.parameters["total_slots"] = self.props.get("total_slots")
        info.parameters["build_info"] = self.props.get("build_info")
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

    def engine_truth(self, state: OpenAIStreamState, context: Any) -> EngineTruth | None:
        timings = state.extra.get("timings")
        if not isinstance(timings, dict):
            return None
        return truth_from_timings(timings, state.usage)
