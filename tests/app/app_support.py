"""Constants for UI tests (importable: tests/app is put on sys.path by conftest)."""

from __future__ import annotations

SIZE = (120, 36)

LOCAL = """
[engines.local]
kind = "llamacpp"
model = "default"
n_threads = 1
"""

SYNTH = """
[engines.synth]
kind = "synthetic"
options = { tokens_per_s = 200, ttft_ms = 15 }
"""


def gen(max_tokens: int = 12) -> str:
    return f"[generation]\nmax_tokens = {max_tokens}\ntemperature = 0.0\nseed = 7\n"
