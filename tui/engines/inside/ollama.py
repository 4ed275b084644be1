"""Ollama's inside: the models it holds in memory (``GET /api/ps``): each one's ``name``,
``size`` (bytes in memory), ``size_vram`` (of them in GPU memory; Ollama omits it when
zero), ``context_length`` and ``expires_at`` (when it will be unloaded, RFC 3339)."""

from __future__ import annotations

from tui.core.inside import MODELS_KEPT, NAME_CHARS, EngineInside, LoadedModelState
from tui.core.spec import count


def _whole(v: object) -> int | None:
    c = count(v)
    return None if c is None or c >= 2**63 else int(c)


def read_ollama(t: float, data: object) -> EngineInside:
    """One read of /api/ps's JSON (anything: a wrong shape lists no model, and says so)."""
    models = data.get("models") if isinstance(data, dict) else None
    if not isinstance(models, list):
        return EngineInside(kind="ollama", t=t, notes=("/api/ps did not list models",))
    kept: list[LoadedModelState] = []
    for m in models:
        if not isinstance(m, dict):
            continue
        if len(kept) >= MODELS_KEPT:
            break
        name = m.get("name") or m.get("model")
        expires = m.get("expires_at")
        kept.append(
            LoadedModelState(
                name=name[:NAME_CHARS] if isinstance(name, str) else "?",
                size=_whole(m.get("size")) or 0,
                size_vram=_whole(m.get("size_vram")) or 0,
                context_length=_whole(m.get("context_length")),
                expires_at=expires[:64] if isinstance(expires, str) else None,
            )
        )
    return EngineInside(kind="ollama", t=t, models=tuple(kept))
