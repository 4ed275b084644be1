"""Optional engine hooks the bench uses when an engine offers them.

An engine (a :class:`tui.engines.base.Engine` subclass) may define any of:

- ``async capacity() -> int | None`` — how many requests it runs in parallel (llama-server
  total slots from /props, vLLM max running requests, Ollama's effective parallelism).
  None: unknown. Used to warn when a concurrency level would measure a queue.
- ``async restart() -> float`` — force a cold start and return the milliseconds until the
  engine is ready again (restart a server infertop started; unload the model). Raise
  EngineError when it cannot. ``cold_start_method: str`` says in words what it does.
- ``async count_prompt_tokens(request) -> int | None`` — the prompt tokens the engine
  will count for ``request`` (its own tokenizer and chat template).

Engines without a hook get the fallbacks below, each stated in the report: llama-server's
``total_slots`` (from /props, in ``info().parameters``) as its capacity; in-process
llama.cpp reloads its model for a cold start and runs one request at a time; Ollama's
``unload()`` (``keep_alive: 0``) makes the next request cold, and that request's engine
``load_ms`` (Ollama's load_duration) is its time to load. A server infertop did not start
(llama-server, vLLM, any OpenAI URL) cannot be restarted: the report says so.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from tui.engines.base import Engine, EngineError, GenerationRequest
from tui.engines.kinds import find_kind


def reload_is_cold(engine: Engine) -> str:
    """How close() + load() is a true cold start of this engine's kind (the model is
    reloaded; EngineKind.cold_restart); "" when it is not."""
    kind = find_kind(engine.kind)
    return kind.cold_restart if kind is not None else ""


@dataclass(frozen=True)
class Capacity:
    slots: int | None
    source: str  # "engine" | "kind" | "unknown"
    note: str = ""


async def engine_capacity(engine: Engine) -> Capacity:
    hook = getattr(engine, "capacity", None)
    if callable(hook):
        try:
            slots = await hook()
        except EngineError as e:
            return Capacity(None, "unknown", f"capacity query failed: {e}")
        if slots is not None:
            return Capacity(int(slots), "engine", "reported by the engine")
    try:
        slots = engine.info().parameters.get("total_slots")
    except Exception:  # noqa: BLE001 - info is best effort here
        slots = None
    if isinstance(slots, int) and slots > 0:
        return Capacity(slots, "engine", "total_slots from the server's /props")
    kind = find_kind(engine.kind)
    if kind is not None and kind.serial:  # it runs one request at a time
        return Capacity(1, "kind", kind.serial)
    return Capacity(None, "unknown", "the engine does not say how many requests it runs at once")


UNLOAD_METHOD = "unload the model (keep_alive: 0); load time = the engine's load_duration"


def cold_start_method(engine: Engine) -> str | None:
    """How a cold start is forced on this engine, or None when it cannot be."""
    if callable(getattr(engine, "restart", None)):
        return str(getattr(engine, "cold_start_method", "engine restart hook"))
    if reload_is_cold(engine):
        return reload_is_cold(engine)
    if callable(getattr(engine, "unload", None)):
        return UNLOAD_METHOD
    return None


def cold_unavailable_note(engine: Engine) -> str:
    if getattr(engine.spec, "url", None):
        return (
            f"a cold start cannot be forced on {engine.spec.name!r}: infertop did not start "
            "that server (restart it yourself and bench again)"
        )
    return f"a cold start cannot be forced on a {engine.kind!r} engine"


async def force_cold(engine: Engine) -> float | None:
    """Force a cold start; return ms until ready, or None when the engine reports the load
    time on the next request (Ollama). EngineError when it cannot be forced."""
    hook = getattr(engine, "restart", None)
    if callable(hook):
        return float(await hook())
    if not reload_is_cold(engine) and callable(getattr(engine, "unload", None)):
        await engine.unload()  # type: ignore[attr-defined]
        return None
    if reload_is_cold(engine):
        t0 = time.perf_counter_ns()
        await engine.close()
        await engine.load()
        return (time.perf_counter_ns() - t0) / 1e6
    raise EngineError(f"a cold start cannot be forced on a {engine.kind!r} engine")


async def count_prompt_tokens(engine: Engine, request: GenerationRequest) -> int | None:
    hook = getattr(engine, "count_prompt_tokens", None)
    if not callable(hook):
        return None
    try:
        n = await hook(request)
    except EngineError:
        return None
    return None if n is None else int(n)
