"""Ollama's /api/ps: which models are loaded, and how much of each sits in GPU memory.

``size`` is the model's total memory, ``size_vram`` the part in GPU memory; the rest
has spilled to system RAM and runs on the CPU: spill = 1 − size_vram / size.
"""

from __future__ import annotations

from dataclasses import dataclass

from tui.transport.access import HttpAccess
from tui.transport.prometheus import ScrapeError, get_text
from tui.transport.whole import json_body


@dataclass
class LoadedModel:
    name: str
    size: int
    size_vram: int
    context_length: int | None
    expires_at: str | None

    @property
    def cpu_fraction(self) -> float:
        """Share of the model in system RAM (0 = all on GPU, 1 = all on CPU)."""
        if self.size <= 0:
            return 0.0
        return max(0.0, 1.0 - self.size_vram / self.size)

    @property
    def placement(self) -> str:
        """Ollama's own wording: '100% GPU', '100% CPU' or '48%/52% CPU/GPU'."""
        cpu = round(self.cpu_fraction * 100)
        if cpu == 0:
            return "100% GPU"
        if cpu == 100:
            return "100% CPU"
        return f"{cpu}%/{100 - cpu}% CPU/GPU"


def parse_ps(data: object) -> list[LoadedModel]:
    if not isinstance(data, dict) or not isinstance(data.get("models"), list):
        raise ScrapeError("/api/ps did not return {'models': [...]}")
    out = []
    for m in data["models"]:
        if not isinstance(m, dict):
            continue
        ctx = m.get("context_length")
        out.append(
            LoadedModel(
                name=str(m.get("name") or m.get("model") or "?"),
                size=int(m.get("size") or 0),
                size_vram=int(m.get("size_vram") or 0),  # omitted when zero
                context_length=int(ctx) if isinstance(ctx, int) else None,
                expires_at=m.get("expires_at"),
            )
        )
    return out


def loaded_models(
    base_url: str, timeout_s: float = 2.0, access: HttpAccess | None = None
) -> list[LoadedModel]:
    """GET /api/ps now (blocking); ScrapeError with a one-line reason."""
    text = get_text(base_url.rstrip("/") + "/api/ps", timeout_s, access)
    try:
        return parse_ps(json_body(text.encode()))
    except ValueError:
        raise ScrapeError("/api/ps did not return JSON") from None
