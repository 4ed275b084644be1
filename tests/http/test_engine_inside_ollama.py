"""Ollama's inside — the models it holds, their memory, context and expiry — read from
the emulator's /api/ps (tests/support/ollama_emulator.py, written from Ollama's API
documentation, a real model behind it), and the panel's words for it."""

from __future__ import annotations

import httpx
import pytest

from tui.core.inside_text import full_lines, short_line
from tui.engines.inside.reader import InsideReader

pytestmark = pytest.mark.engine


def test_loaded_models_with_memory_context_and_expiry(ollama_emu) -> None:
    url, emu = ollama_emu
    body = {
        "model": "smollm2:135m",
        "prompt": "Hi",
        "stream": False,
        "keep_alive": "5m",
        "options": {"num_predict": 2},
    }
    httpx.post(url + "/api/generate", json=body, timeout=120).raise_for_status()
    reader = InsideReader("ollama", url)
    ins = reader.sample()
    assert ins is not None and reader.error is None
    (m,) = ins.models
    assert m.name == "smollm2:135m" and m.size > 0 and m.size_vram == 0  # no GPU here
    assert m.context_length == emu.n_ctx and m.expires_at
    assert m.gpu_fraction == 0.0
    assert short_line(ins).startswith("smollm2:135m ") and "0% GPU" in short_line(ins)
    line = full_lines(ins)[1]
    assert f"ctx {emu.n_ctx:,}" in line and "expires in 4m" in line, line
    httpx.post(url + "/api/generate", json={**body, "keep_alive": 0}, timeout=120)
    reader.min_interval_s = 0.0
    gone = reader.sample()
    assert gone is not None and gone.models == () and short_line(gone) == "no model loaded"
