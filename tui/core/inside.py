"""The engine's inside, as one read saw it: slots and queue, KV cache, prefix cache,
speculative decoding, loaded models.

One :class:`EngineInside` per read of an engine (tui/engines/inside reads llama-server's
/metrics, /slots and /props; vLLM's and SGLang's /metrics; Ollama's /api/ps). Every
field is the engine's own number or a rate computed from its counters over a window of
reads (:data:`WINDOW_S`), None where the engine did not say. docs/engine-inside.md
lists each metric read and what each field means; the short and full texts the panels
show are in :mod:`tui.core.inside_text`.

Plain data, JSON both ways (:meth:`EngineInside.to_dict` / :func:`inside_from_dict`):
the proxy sends it to the requests view, which reads it as untrusted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from tui.core.spec import SpecCounts, count

InsideKind = Literal["llama-server", "vllm", "sglang", "ollama"]
INSIDE_KINDS: Final[tuple[InsideKind, ...]] = ("llama-server", "vllm", "sglang", "ollama")
WINDOW_S: Final = 60.0  # rates (preemptions/min, hit rate, tok/step, acceptance) over this
SLOTS_KEPT: Final = 64  # slots described one by one; the rest are counted
MODELS_KEPT: Final = 16  # Ollama models listed
NAME_CHARS: Final = 200


@dataclass(frozen=True, slots=True)
class SlotState:
    """One llama-server slot (``/slots``): its context size, whether it works now, the
    tokens it holds (prompt, of them from cache) and has decoded for its current task."""

    id: int
    n_ctx: int | None = None
    busy: bool = False
    n_prompt: int | None = None  # n_prompt_tokens (prompt, then + each decoded token)
    n_cached: int | None = None  # n_prompt_tokens_cache
    n_decoded: int | None = None  # next_token[0].n_decoded
    speculative: bool | None = None

    @property
    def tokens(self) -> int | None:
        """Tokens the slot's cache holds now (None: not said). llama-server's
        ``n_prompt_tokens`` counts the prompt and then one more per decoded token while it
        generates (tui/core/kv.py), so the decoded tokens are in it already."""
        return self.n_prompt

    @property
    def fill(self) -> float | None:
        t = self.tokens
        if t is None or not self.n_ctx:
            return None
        return t / self.n_ctx


@dataclass(frozen=True, slots=True)
class LoadedModelState:
    """One model Ollama holds in memory (``/api/ps``)."""

    name: str
    size: int  # bytes in memory
    size_vram: int  # of them in GPU memory
    context_length: int | None = None
    expires_at: str | None = None  # RFC 3339, as Ollama says it

    @property
    def gpu_fraction(self) -> float | None:
        return None if self.size <= 0 else min(1.0, self.size_vram / self.size)


@dataclass(frozen=True, slots=True)
class EngineInside:
    """One read of an engine's inside (see the module docstring). Rates are over the
    reads of the last :data:`WINDOW_S` seconds since the engine's last restart."""

    kind: InsideKind
    t: float  # time.monotonic() of the read
    running: float | None = None  # requests being processed now
    waiting: float | None = None  # requests waiting for a slot / a batch place
    waiting_by_reason: tuple[tuple[str, float], ...] = ()
    slots_total: int | None = None
    slots_busy: int | None = None
    slots: tuple[SlotState, ...] = ()
    slots_unlisted: int = 0  # slots beyond SLOTS_KEPT (counted in slots_busy)
    ctx_high_water: float | None = None  # llama-server n_tokens_max
    busy_per_decode: float | None = None  # llama-server n_busy_slots_per_decode
    kv_usage: float | None = None  # 0..1
    preemptions_per_min: float | None = None
    preemptions_total: float | None = None
    prefix_hit_rate: float | None = None  # cached ÷ all prompt tokens, in the window
    prefix_tokens: float | None = None  # all prompt tokens in the window
    prefix_hit_rate_total: float | None = None  # since the engine started
    tokens_per_step: float | None = None  # vLLM iteration tokens, mean in the window
    spec_window: SpecCounts | None = None
    spec_total: SpecCounts | None = None
    spec_accept_length: float | None = None  # SGLang's own gauge
    models: tuple[LoadedModelState, ...] = ()
    restarted: bool = False  # a counter went back at this read: rates restarted
    window_s: float | None = None  # the span the rates cover
    notes: tuple[str, ...] = field(default_factory=tuple)  # what was not read, and why

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "t": self.t,
            "running": self.running,
            "waiting": self.waiting,
            "waiting_by_reason": [list(p) for p in self.waiting_by_reason],
            "slots_total": self.slots_total,
            "slots_busy": self.slots_busy,
            "slots": [
                [s.id, s.n_ctx, s.busy, s.n_prompt, s.n_cached, s.n_decoded, s.speculative]
                for s in self.slots
            ],
            "slots_unlisted": self.slots_unlisted,
            "ctx_high_water": self.ctx_high_water,
            "busy_per_decode": self.busy_per_decode,
            "kv_usage": self.kv_usage,
            "preemptions_per_min": self.preemptions_per_min,
            "preemptions_total": self.preemptions_total,
            "prefix_hit_rate": self.prefix_hit_rate,
            "prefix_tokens": self.prefix_tokens,
            "prefix_hit_rate_total": self.prefix_hit_rate_total,
            "tokens_per_step": self.tokens_per_step,
            "spec_window": None if self.spec_window is None else self.spec_window.to_dict(),
            "spec_total": None if self.spec_total is None else self.spec_total.to_dict(),
            "spec_accept_length": self.spec_accept_length,
            "models": [
                [m.name, m.size, m.size_vram, m.context_length, m.expires_at] for m in self.models
            ],
            "restarted": self.restarted,
            "window_s": self.window_s,
            "notes": list(self.notes),
        }


def _num(v: object) -> float | None:
    """A finite number, or None (NaN, infinities, bools and the rest are not)."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    f = float(v)
    return None if math.isnan(f) or math.isinf(f) else f


def _whole(v: object) -> int | None:
    c = count(v)
    return None if c is None or c >= 2**53 else int(c)


def _text(v: object) -> str | None:
    return v[:NAME_CHARS] if isinstance(v, str) else None


def _slot(v: object) -> SlotState | None:
    if not isinstance(v, list) or len(v) != 7:
        return None
    sid = _whole(v[0])
    if sid is None:
        return None
    spec = v[6] if isinstance(v[6], bool) else None
    return SlotState(
        sid, _whole(v[1]), v[2] is True, _whole(v[3]), _whole(v[4]), _whole(v[5]), spec
    )


def _model(v: object) -> LoadedModelState | None:
    if not isinstance(v, list) or len(v) != 5:
        return None
    name = _text(v[0])
    if name is None:
        return None
    return LoadedModelState(name, _whole(v[1]) or 0, _whole(v[2]) or 0, _whole(v[3]), _text(v[4]))


def inside_from_dict(d: object) -> EngineInside | None:
    """An :class:`EngineInside` from :meth:`EngineInside.to_dict`'s form, read as
    untrusted: None when it is not one; every list bounded, every bad entry dropped."""
    if not isinstance(d, dict) or d.get("kind") not in INSIDE_KINDS:
        return None
    t = _num(d.get("t"))
    reasons_raw = d.get("waiting_by_reason")
    reasons = []
    if isinstance(reasons_raw, list):
        for p in reasons_raw[:8]:
            if isinstance(p, list) and len(p) == 2 and isinstance(p[0], str):
                n = count(p[1])
                if n is not None:
                    reasons.append((p[0][:40], n))
    slots_raw = d.get("slots")
    slots = (
        [s for s in map(_slot, slots_raw[:SLOTS_KEPT]) if s] if isinstance(slots_raw, list) else []
    )
    models_raw = d.get("models")
    models = (
        [m for m in map(_model, models_raw[:MODELS_KEPT]) if m]
        if isinstance(models_raw, list)
        else []
    )
    notes_raw = d.get("notes")
    notes = (
        [n[:NAME_CHARS] for n in notes_raw[:8] if isinstance(n, str)]
        if isinstance(notes_raw, list)
        else []
    )
    kind: InsideKind = d["kind"]
    return EngineInside(
        kind=kind,
        t=t if t is not None else 0.0,
        running=count(d.get("running")),
        waiting=count(d.get("waiting")),
        waiting_by_reason=tuple(reasons),
        slots_total=_whole(d.get("slots_total")),
        slots_busy=_whole(d.get("slots_busy")),
        slots=tuple(slots),
        slots_unlisted=_whole(d.get("slots_unlisted")) or 0,
        ctx_high_water=count(d.get("ctx_high_water")),
        busy_per_decode=count(d.get("busy_per_decode")),
        kv_usage=_fraction(d.get("kv_usage")),
        preemptions_per_min=count(d.get("preemptions_per_min")),
        preemptions_total=count(d.get("preemptions_total")),
        prefix_hit_rate=_fraction(d.get("prefix_hit_rate")),
        prefix_tokens=count(d.get("prefix_tokens")),
        prefix_hit_rate_total=_fraction(d.get("prefix_hit_rate_total")),
        tokens_per_step=count(d.get("tokens_per_step")),
        spec_window=SpecCounts.from_dict(d.get("spec_window")),
        spec_total=SpecCounts.from_dict(d.get("spec_total")),
        spec_accept_length=count(d.get("spec_accept_length")),
        models=tuple(models),
        restarted=d.get("restarted") is True,
        window_s=count(d.get("window_s")),
        notes=tuple(notes),
    )


def _fraction(v: object) -> float | None:
    c = count(v)
    return None if c is None or c > 1.0 else c
