"""Discovery's readers against the hostile server: listing a server's models ends at its
deadline and size cap whatever the server does (a 1 GiB body, an endless body, a body or
head dripped a byte at a time), and a model id made of terminal control sequences is
shown only through the terminal-safe filter (the palette's lines)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.support import hostile_server
from tui.core.safe_text import terminal_label
from tui.engines.base import EngineError, EngineSpec
from tui.engines.servers.server_models import list_server_models
from tui.transport.whole import SCRAPE_LIMIT

SLACK_S = 25.0  # a busy 2-core machine: far above each bound, far below "never"
SENT_SLACK = 32 * 1024 * 1024  # socket buffers a client that stops at its cap lets through


@pytest.mark.parametrize("kind", ["vllm", "ollama"])
@pytest.mark.parametrize("mode", ["huge", "endless", "drip", "drip-head"])
def test_model_lists_end_at_their_deadline_and_cap(hostile_bench, mode, kind) -> None:
    hostile, server = hostile_bench
    sent = server.sent[mode]
    spec = EngineSpec("h", kind, url=f"{hostile}/{mode}")
    t0 = time.monotonic()
    with pytest.raises(EngineError):
        list_server_models(spec, timeout_s=1.0)
    took = time.monotonic() - t0
    assert took < 1.0 * 2 + SLACK_S, f"{took:.1f} s"  # /api/tags and /api/ps at most
    time.sleep(0.3)
    assert server.sent[mode] - sent < SCRAPE_LIMIT + SENT_SLACK


def test_control_sequences_in_a_model_id_never_reach_the_terminal(hostile) -> None:
    (model,) = list_server_models(EngineSpec("h", "vllm", url=f"{hostile}/ansi"))
    assert model.name == hostile_server.EVIL_MODEL  # kept as data: the server's own word
    shown = terminal_label(f"Model A: h › {model.name}")  # as the palette builds its line
    assert not any(c in shown for c in hostile_server.ESCAPES)


@pytest.mark.parametrize("kind", ["vllm", "ollama"])
def test_a_model_with_a_400_digit_size_leaves_the_list_whole(hostile, kind) -> None:
    """The hostile server's long-numbers mode: one model's size has 400 digits (on main
    details() raised OverflowError and the palette's model list was empty), another's
    5000 (on main the whole list was refused as not JSON). Every model stays listed;
    the numbers no model has are left unsaid; the palette builds a line for each."""
    from tui.chat.catalog import Catalog
    from tui.config import parse_config

    spec = EngineSpec("h", kind, url=f"{hostile}/long-numbers")
    models = list_server_models(spec)
    by_name = {m.name: m for m in models}
    assert list(by_name) == ["big", "bigger", "fine"]
    assert by_name["big"].size_bytes is None and by_name["bigger"].size_bytes is None
    assert by_name["fine"].size_bytes == 1_000_000
    text = 'default_engine = "h"\n[engines.h]\nkind = "openai"\nurl = "http://127.0.0.1:1"\n'
    config = parse_config(text, Path("t.toml"))
    catalog = Catalog(models={"h": models})
    lines = [terminal_label(f"Model A: {c.label()}") for c in catalog.model_choices(config)]
    assert len(lines) == 3 and any("1.0 MB" in line for line in lines), lines


def test_400_digit_numbers_alone_leave_every_palette_line() -> None:
    """The finding itself, without the 5000-digit neighbour: a 400-digit size (int()
    reads it; float() cannot) in Ollama's and llama-server's lists, and a GGUF whose
    tensor shapes multiply past a float: on main the details raised OverflowError."""
    from tui.engines.files.gguf_scan import GgufFile
    from tui.engines.servers.server_models import ollama_models, openai_models

    big = 10**400
    listed = openai_models({"data": [{"id": "a", "meta": {"size": big, "n_params": big}}]})
    listed += ollama_models({"models": [{"name": "b", "size": big}]}, {"models": []})
    assert [(m.name, m.details()) for m in listed] == [("a", ""), ("b", "")]
    found = GgufFile(Path("x.gguf"), "x.gguf", 1000, "/m", "llama", 2**512, "Q4_1")
    assert found.details() == "llama · ? · Q4_1 · 1.0 kB"
