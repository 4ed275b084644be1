"""Apple Silicon: the GPU shares RAM (unified memory). Label it so; never invent VRAM."""

from __future__ import annotations

import platform


def is_apple_silicon() -> bool:
    return platform.system() == "Darwin" and platform.machine() in ("arm64", "aarch64")


def memory_label() -> str:
    """The name the RAM line carries: 'unified memory' on Apple Silicon, else 'RAM'."""
    return "unified memory (RAM)" if is_apple_silicon() else "RAM"


def gpu_note() -> str | None:
    """What the GPU panel says on Apple Silicon instead of NVML figures."""
    if is_apple_silicon():
        return "Apple GPU: memory is the unified memory shown as RAM"
    return None
