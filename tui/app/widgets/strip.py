"""The narrow layout's one-line strip under the engine bar (what the side panels would
say, in one line: B/A ratios, the KV cache, the engine's inside (slots and queue, cache,
drafts: tui/core/inside_text.py's short line), whose hardware and how busy, the F2 hint)."""

from __future__ import annotations

from tui.app.widgets.hardware_panel import source_tag
from tui.telemetry.sampler import TelemetrySample


def strip_text(
    ratios: str, kv: str, s: TelemetrySample | None, width: int, engine: str = ""
) -> str:
    """The narrow layout's one line: B/A ratios (A/B mode), slot A's KV cache, the
    engine's inside in short, whose hardware and its CPU, RAM and first GPU, and the F2
    hint — the RAM, then the whole hardware part, then the F2 hint (the footer has it
    too), then the KV cache, then the engine's part dropped when the line would not fit
    ``width``: the line is never cut mid-word."""
    hw: list[str] = []
    if s is not None:
        tag = source_tag(s)
        cpu = ram = ""
        if s.system is not None:
            mem = "UM" if s.system.ram_label.startswith("unified") else "RAM"
            cpu = f"CPU {s.system.cpu_percent:.0f}% "
            ram = f"{mem} {s.system.ram_used / 2**30:.1f}G "
        g = s.gpu.gpus[0].util_percent if s.gpu.gpus else None
        gpu = "GPU " + ("–" if g is None else f"{g:.0f}%")
        hw = [tag + cpu + ram + gpu, tag + cpu + gpu, ""]
    tries: list[tuple[str, ...]] = [(ratios, kv, engine, part, "F2 panels") for part in hw or [""]]
    tries += [(ratios, kv, engine), (ratios, engine), (ratios,)]
    for parts in tries:
        text = " │ ".join(p for p in parts if p)
        if len(text) <= width:
            return text
    return text
