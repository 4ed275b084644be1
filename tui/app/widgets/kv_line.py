"""KvLine: the KV cache in two lines — how full the context is, and what it costs.

llama.cpp (in-process or llama-server)::

    KV 1,234 / 2,048 tok (60%) ▕██████████░░░░░░▏
    27.1 MiB = 1,234 tok × 22.5 KiB (f16, 30 layers × 3 kv heads × 64)

vLLM::

    KV 12.5% of 4,096 blocks ▕██░░░░░░░░░░░░░░▏
    ≈512 blocks used × 16 tok/block (estimate) · vLLM /metrics

Numbers that are not the engine's own say "estimate" (see tui/core/kv.py for the formula
and ``KvState.estimate``). Hidden until an engine reports a state.
"""

from __future__ import annotations

from tui.app.widgets.text_lines import TextLines
from tui.core.kv import KvState

BAR_WIDTH = 16


def size_text(n: float) -> str:
    """Bytes as KiB / MiB / GiB (binary units, as llama.cpp prints them)."""
    if n < 2**20:
        return f"{n / 2**10:.1f} KiB"
    if n < 2**30:
        return f"{n / 2**20:.1f} MiB"
    return f"{n / 2**30:.2f} GiB"


def bar(fill: float | None, width: int = BAR_WIDTH) -> str:
    """▕████░░░░▏ with ``fill`` (0..1) of ``width`` cells full."""
    if fill is None:
        return ""
    full = round(max(0.0, min(1.0, fill)) * width)
    return "▕" + "█" * full + "░" * (width - full) + "▏"


def kv_lines(state: KvState, width: int = 0) -> list[str]:
    """The widget's text for ``state`` (pure: tested without an app); with ``width``,
    a second line that would not fit says the shape shorter ("30L × 3 kv × 64")."""
    lines = _kv_lines(state)
    if width and len(lines[1]) > width:
        lines[1] = lines[1].replace(" layers × ", "L × ").replace(" kv heads × ", " kv × ")
    return lines


def _kv_lines(state: KvState) -> list[str]:
    if state.usage_pct is not None or state.blocks_total is not None:
        return _vllm_lines(state)
    if state.tokens_in_context is None:
        first = "KV – tokens in context (the server did not say)"
    else:
        first = f"KV {state.tokens_in_context:,} / "
        first += f"{state.n_ctx:,} tok" if state.n_ctx else "? tok"
        if state.fill is not None:
            first += f" ({100 * state.fill:.0f}%) {bar(state.fill)}"
    layout = state.layout
    if layout is None:
        second = "memory unknown" + (f": {state.unknown_why}" if state.unknown_why else "")
    else:
        per = size_text(layout.bytes_per_token)
        shape = f"{layout.cache_type}, {layout.shape}"
        if state.kv_bytes is not None and state.tokens_in_context is not None:
            second = f"{size_text(state.kv_bytes)} = {state.tokens_in_context:,} tok × {per}"
        else:
            second = f"{per}/tok"
        second += f" ({shape})"
        if state.estimate:
            second += f" · estimate: {state.estimate_why}"
    return [first, second]


def _vllm_lines(state: KvState) -> list[str]:
    pct = "–" if state.usage_pct is None else f"{state.usage_pct:.1f}%"
    first = f"KV {pct}"
    if state.blocks_total is not None:
        first += f" of {state.blocks_total:,} blocks"
    if state.fill is not None:
        first += f" {bar(state.fill)}"
    parts = []
    if state.blocks_used is not None:
        used = f"≈{state.blocks_used:,} blocks used"
        if state.block_size:
            used += f" × {state.block_size} tok/block"
        parts.append(used + (" (estimate)" if state.estimate else ""))
    parts.append(state.source)
    return [first, " · ".join(parts)]


def kv_short(state: KvState | None) -> str:
    """The KV cache in a few cells, for the narrow layout's strip: "KV 222/2,048 tok
    4.9 MiB" (llama.cpp; "~" before an estimated size), "KV 12.5% of 4,096 blk" (vLLM)."""
    if state is None:
        return ""
    if state.usage_pct is not None or state.blocks_total is not None:
        pct = "–" if state.usage_pct is None else f"{state.usage_pct:.1f}%"
        blocks = f" of {state.blocks_total:,} blk" if state.blocks_total is not None else ""
        return f"KV {pct}{blocks}"
    if state.tokens_in_context is None:
        return ""
    text = (
        f"KV {state.tokens_in_context:,}/{state.n_ctx:,} tok"
        if state.n_ctx
        else (f"KV {state.tokens_in_context:,} tok")
    )
    if state.kv_bytes is not None:
        text += f" {'~' if state.estimate else ''}{size_text(state.kv_bytes)}"
    return text


class KvLine(TextLines):
    DEFAULT_CSS = """
    KvLine { height: 2; padding: 0 1; display: none; }
    """

    def __init__(self, id: str | None = None) -> None:
        super().__init__(wrap=False, id=id)
        self.state: KvState | None = None

    def show(self, state: KvState | None) -> None:
        """Draw ``state``; None hides the line (this engine reports no KV state). Its
        height is fixed, so a new state repaints the line without a layout pass."""
        self.state = state
        shown = state is not None
        if self.display != shown:
            self.display = shown
        if state is not None:
            self.show_lines(kv_lines(state, self.content_size.width))  # repaints what changed

    @property
    def text(self) -> str:
        return self.plain
