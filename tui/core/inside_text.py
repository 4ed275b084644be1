"""The engine panel's words: one short line (the chat's strip at 80×24, a fleet cell) and
the full panel (F2, the requests view), from one :class:`~tui.core.inside.EngineInside`.

Every name in them (a model, a note) is the engine's: callers pass the lines through
:func:`tui.core.safe_text.terminal_safe` before a terminal shows them.
"""

from __future__ import annotations

import math
import re
import time
from datetime import datetime

from tui.core.inside import EngineInside, LoadedModelState, SlotState
from tui.core.spec import SpecCounts, pct

SLOT_LINES = 8  # slots listed one per line in the full panel; the rest are summed up


def num(v: float | None, fmt: str = "{:,.0f}") -> str:
    return "–" if v is None else fmt.format(v)


def tokens_k(n: float) -> str:
    """3,904 → "3.9k"; below 1,000 the count itself."""
    return f"{n / 1000:.1f}k" if n >= 1000 else f"{n:.0f}"


def size_text(n: float) -> str:
    if n < 2**30:
        return f"{n / 2**20:.0f} MiB"
    return f"{n / 2**30:.1f} GiB"


def spec_text(c: SpecCounts | None, *, positions: bool = False) -> str:
    """ "accepted 59 of 64 drafted (92 %) · mean length 3.95 · per position 100 % 95 % 80 %"."""
    if c is None or c.drafted <= 0:
        return "nothing drafted"
    text = f"accepted {c.accepted:,.0f} of {c.drafted:,.0f} drafted ({pct(c.acceptance)})"
    if c.mean_length is not None:
        text += f" · mean length {c.mean_length:.2f}"
    if positions and c.position_rates:
        text += " · per position " + " ".join(pct(r) for r in c.position_rates[:8])
    return text


def _spec_short(ins: EngineInside) -> str:
    c = (
        ins.spec_window
        if ins.spec_window is not None and ins.spec_window.drafted > 0
        else ins.spec_total
    )
    if c is None or c.acceptance is None:
        if ins.spec_accept_length is not None:
            return f"accept len {ins.spec_accept_length:.2f}"
        return ""
    length = f" ×{c.mean_length:.1f}" if c.mean_length is not None else ""
    return f"draft {pct(c.acceptance)}{length}"


def _expiry(expires_at: str | None, now: float | None = None) -> str:
    """Ollama's expires_at as "in 4m 12s" (RFC 3339; its nanoseconds cut to micro)."""
    if not expires_at:
        return "no expiry"
    text = re.sub(r"(\.\d{6})\d+", r"\1", expires_at.strip()).replace("Z", "+00:00")
    try:
        when = datetime.fromisoformat(text).timestamp()
    except ValueError:
        return "expiry unreadable"
    left = when - (time.time() if now is None else now)
    if math.isnan(left) or left > 10 * 365 * 86400:
        return "kept loaded"
    if left <= 0:
        return "expiring now"
    m, s = divmod(int(left), 60)
    h, m = divmod(m, 60)
    return f"expires in {h}h {m}m" if h else f"expires in {m}m {s}s"


def short_line(ins: EngineInside) -> str:
    """The panel in one line, for 80 columns: the queue first."""
    parts: list[str] = []
    if ins.kind == "llama-server":
        if ins.slots_total is not None or ins.slots_busy is not None:
            parts.append(f"slots {num(ins.slots_busy)}/{num(ins.slots_total)}")
        if ins.waiting:
            parts.append(f"deferred {num(ins.waiting)}")
        if ins.ctx_high_water is not None:
            parts.append(f"ctx max {ins.ctx_high_water:,.0f}")
    elif ins.kind in ("vllm", "sglang"):
        parts.append(f"run {num(ins.running)} wait {num(ins.waiting)}")
        if ins.kv_usage is not None:
            parts.append(f"KV {100 * ins.kv_usage:.0f}%")
        if ins.preemptions_per_min:
            parts.append(f"preempt {ins.preemptions_per_min:.1f}/min")
        hit = ins.prefix_hit_rate if ins.prefix_hit_rate is not None else ins.prefix_hit_rate_total
        if hit is not None:
            parts.append(f"hit {pct(hit)}")
    elif ins.kind == "ollama":
        if not ins.models:
            parts.append("no model loaded")
        for m in ins.models[:2]:
            parts.append(_model_short(m))
    spec = _spec_short(ins)
    if spec:
        parts.append(spec)
    return " · ".join(parts) if parts else "engine: nothing reported"


def _model_short(m: LoadedModelState) -> str:
    gpu = m.gpu_fraction
    where = "" if gpu is None else f" {100 * gpu:.0f}% GPU"
    return f"{m.name} {size_text(m.size)}{where}"


def _slot_line(s: SlotState) -> str:
    if not s.busy:
        held = f" · holds {s.tokens:,}" if s.tokens else ""
        return f"slot {s.id}  idle{held}"
    ctx = f"{num(s.tokens)}/{num(s.n_ctx)}"
    fill = f" ({100 * s.fill:.0f}%)" if s.fill is not None else ""
    cached = f" · {s.n_cached:,} from cache" if s.n_cached else ""
    return f"slot {s.id}  ctx {ctx}{fill} · decoded {num(s.n_decoded)}{cached}"


def full_lines(ins: EngineInside, now: float | None = None) -> list[str]:
    """The whole panel (F2 in the chat, the requests view)."""
    lines: list[str] = []
    if ins.kind == "llama-server":
        lines += _llama_lines(ins)
    elif ins.kind == "vllm":
        lines += _vllm_lines(ins)
    elif ins.kind == "sglang":
        lines.append(
            f"SGLang · running {num(ins.running)} · queue {num(ins.waiting)}"
            + (f" · KV {100 * ins.kv_usage:.0f}%" if ins.kv_usage is not None else "")
        )
        lines.append(
            f"cache hit {pct(ins.prefix_hit_rate_total)} · acceptance length "
            + num(ins.spec_accept_length, "{:.2f}")
        )
    else:
        lines.append(f"Ollama · {len(ins.models)} model(s) loaded")
        for m in ins.models:
            ctx = f"ctx {m.context_length:,}" if m.context_length else "ctx –"
            lines.append(f"{_model_short(m)} · {ctx} · {_expiry(m.expires_at, now)}")
    if ins.spec_total is not None and ins.spec_total.drafted > 0:
        window = ins.spec_window
        if window is not None and window.drafted > 0:
            lines.append(
                f"speculation (last {num(ins.window_s)} s): {spec_text(window, positions=True)}"
            )
        lines.append(
            f"speculation (since start): {spec_text(ins.spec_total, positions=window is None)}"
        )
    if ins.restarted:
        lines.append("counters went back (engine restarted?): rates restarted")
    lines += list(ins.notes)
    return lines


def _llama_lines(ins: EngineInside) -> list[str]:
    out = [
        f"llama-server · slots {num(ins.slots_busy)}/{num(ins.slots_total)} busy"
        f" · processing {num(ins.running)} · deferred {num(ins.waiting)}"
    ]
    for s in ins.slots[:SLOT_LINES]:
        out.append(_slot_line(s))
    more = len(ins.slots) - SLOT_LINES + ins.slots_unlisted
    if more > 0:
        out.append(f"… {more:,} more slots")
    high = f"context high-water {num(ins.ctx_high_water)} tok"
    if ins.busy_per_decode is not None:
        high += f" · {ins.busy_per_decode:.1f} busy slots per decode"
    out.append(high)
    if ins.prefix_hit_rate is not None:
        out.append(
            f"prompt cache hit {pct(ins.prefix_hit_rate)} of {num(ins.prefix_tokens)} prompt tok"
            f" (last {num(ins.window_s)} s) · {pct(ins.prefix_hit_rate_total)} since start"
        )
    elif ins.prefix_hit_rate_total is not None:
        out.append(f"prompt cache hit {pct(ins.prefix_hit_rate_total)} since start")
    return out


def _vllm_lines(ins: EngineInside) -> list[str]:
    why = ", ".join(f"{r} {v:,.0f}" for r, v in ins.waiting_by_reason if v)
    kv = "–" if ins.kv_usage is None else f"{100 * ins.kv_usage:.1f}%"
    out = [
        f"vLLM KV cache {kv} · running {num(ins.running)} · waiting {num(ins.waiting)}"
        + (f" ({why})" if why else "")
    ]
    second = f"preemptions {num(ins.preemptions_per_min, '{:.1f}')}/min"
    if ins.preemptions_total is not None:
        second += f" ({ins.preemptions_total:,.0f} since start)"
    if ins.tokens_per_step is not None:
        second += f" · {ins.tokens_per_step:.1f} tok/step"
    out.append(second)
    if ins.prefix_hit_rate is not None or ins.prefix_hit_rate_total is not None:
        out.append(
            f"prefix cache hit {pct(ins.prefix_hit_rate)} of {num(ins.prefix_tokens)} prompt tok"
            f" (last {num(ins.window_s)} s, by source)"
            f" · {pct(ins.prefix_hit_rate_total)} since start"
        )
    return out
