"""The models a server offers, with what it says about each (size, quantisation, context).

- Ollama: ``/api/tags`` (every pulled model: size, parameter size, quantisation level)
  and ``/api/ps`` (the loaded ones: context length, and how much sits in GPU memory);
- vLLM: ``/v1/models`` (``max_model_len``);
- llama-server: ``/v1/models`` (``meta``: n_ctx, n_params, size, ftype; in router mode
  each model's ``status``: loaded or not);
- any other OpenAI-compatible server: ``/v1/models`` (ids only).

Every answer is untrusted: read within a deadline and SCRAPE_LIMIT bytes, at most
MAX_MODELS kept, names cut to MAX_NAME characters (and filtered when shown). A number
outside 0..MAX_NUMBER (a size of 400 digits, or of 5000, which Python's ``int`` refuses
to read) is taken as not said: that model stays listed without it, the others as they
are.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx

from tui.engines.base import EngineError, EngineSpec
from tui.engines.http.http_common import access_for, base_url
from tui.transport.whole import SCRAPE_LIMIT, deadline_client, get_whole

MAX_MODELS = 500
MAX_NAME = 200
MAX_NUMBER = 2**53  # sizes, counts, contexts beyond are not believed (nor a float's range)
_MAX_DIGITS = len(str(MAX_NUMBER))


@dataclass(frozen=True)
class ServerModel:
    """One model a server offers; None where the server does not say."""

    name: str
    size_bytes: int | None = None
    parameters: str | None = None  # "135M", "7.6B"
    quantization: str | None = None  # "Q4_1"
    context: int | None = None  # tokens
    loaded: str | None = None  # "loaded", "CPU", "GPU", "48% GPU"

    def details(self) -> str:
        """What is known, in one short line: "135M · Q4_1 · 94 MB · ctx 2048 · CPU"."""
        parts = [self.parameters, self.quantization]
        if self.size_bytes:
            parts.append(human_size(self.size_bytes))
        if self.context:
            parts.append(f"ctx {self.context}")
        parts.append(self.loaded)
        return " · ".join(p for p in parts if p)


def human_size(n: int) -> str:
    """Bytes in words ("94 MB"); "?" for a number past MAX_NUMBER (no file is)."""
    if n > MAX_NUMBER:
        return "?"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}" if n < 10 * scale else f"{n / scale:.0f} {unit}"
    return f"{n} B"


def human_params(n: int) -> str:
    """A parameter count in words ("135M"); "?" past MAX_NUMBER (a header that lies)."""
    if n > MAX_NUMBER:
        return "?"
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f}{unit}" if n < 10 * scale else f"{n / scale:.0f}{unit}"
    return str(n)


def _int(value: Any) -> int | None:
    ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_NUMBER
    return value if ok else None


def _json_int(digits: str) -> int | None:
    """JSON's integers as read here: one too long for any count is None (not an error
    that loses the whole list: ``int`` refuses strings of over 4300 digits)."""
    return int(digits) if len(digits) <= _MAX_DIGITS else None


def models_json(content: bytes) -> Any:
    """A model list's body parsed; ValueError (never another error) for what is not JSON
    this process can hold. Integers too long to be a count become None."""
    try:
        return json.loads(content, parse_int=_json_int)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    except (ValueError, TypeError) as e:  # JSONDecodeError, UnicodeError
        raise ValueError(f"not JSON: {' '.join(str(e).split())[:120]}") from None


def _str(value: Any) -> str | None:
    return value[:MAX_NAME] if isinstance(value, str) and value else None


def _table(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _items(data: Any, key: str) -> list[dict[str, Any]]:
    items = data.get(key) if isinstance(data, dict) else None
    if not isinstance(items, list):
        return []
    return [m for m in items[:MAX_MODELS] if isinstance(m, dict)]


def ollama_models(tags: Any, ps: Any) -> list[ServerModel]:
    """Ollama's pulled models (``/api/tags``) joined with the loaded ones (``/api/ps``)."""
    loaded: dict[str, tuple[str, int | None]] = {}
    for m in _items(ps, "models"):
        name = _str(m.get("name")) or _str(m.get("model"))
        size, vram = _int(m.get("size")), _int(m.get("size_vram"))
        if name is None:
            continue
        on = "loaded"
        if size and vram is not None:
            share = vram / size
            on = "CPU" if share <= 0.005 else "GPU" if share >= 0.995 else f"{share:.0%} GPU"
        loaded[name] = (on, _int(m.get("context_length")))
    out = []
    for m in _items(tags, "models"):
        name = _str(m.get("name")) or _str(m.get("model"))
        if name is None:
            continue
        details = _table(m.get("details"))
        where: str | None = None
        ctx: int | None = None
        if name in loaded:
            where, ctx = loaded[name]
        out.append(
            ServerModel(
                name,
                _int(m.get("size")),
                _str(details.get("parameter_size")),
                _str(details.get("quantization_level")),
                ctx,
                where,
            )
        )
    return out


def openai_models(data: Any) -> list[ServerModel]:
    """``/v1/models``: vLLM's max_model_len, llama-server's meta and router status."""
    out = []
    for m in _items(data, "data"):
        name = _str(m.get("id"))
        if name is None:
            continue
        meta = _table(m.get("meta"))
        n_params = _int(meta.get("n_params"))
        status = m.get("status")
        state = _str(status.get("value")) if isinstance(status, dict) else None
        out.append(
            ServerModel(
                name,
                _int(meta.get("size")),
                human_params(n_params) if n_params else None,
                _str(meta.get("ftype")),
                _int(m.get("max_model_len")) or _int(meta.get("n_ctx")),
                state,
            )
        )
    return out


def list_server_models(spec: EngineSpec, timeout_s: float = 2.0) -> list[ServerModel]:
    """The models ``spec``'s server offers (GETs only); EngineError when it cannot say."""
    base = base_url(spec)
    access = access_for(spec)
    client = deadline_client(timeout=timeout_s, headers=access.headers, verify=access.verify_tls)

    def get(path: str) -> Any:
        try:
            r = get_whole(client, base + path, limit=SCRAPE_LIMIT, deadline_s=timeout_s)
        except httpx.HTTPError as e:
            raise EngineError(f"{base}{path}: {type(e).__name__}") from None
        if r.status_code != 200:
            raise EngineError(f"{base}{path}: HTTP {r.status_code}")
        try:
            return models_json(r.content)
        except ValueError as e:
            raise EngineError(f"{base}{path}: {e}") from None

    try:
        if spec.kind == "ollama":
            tags = get("/api/tags")
            try:
                ps = get("/api/ps")
            except EngineError:
                ps = None  # which are loaded is a detail: the list stands without it
            return ollama_models(tags, ps)
        return openai_models(get("/v1/models"))
    finally:
        client.close()
