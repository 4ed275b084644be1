"""Discovery's readers against the hostile server: listing a server's models ends at its
deadline and size cap whatever the server does (a 1 GiB body, an endless body, a body or
head dripped a byte at a time), and a model id made of terminal control sequences is
shown only through the terminal-safe filter (the palette's lines)."""

from __future__ import annotations

import time

import hostile_server
import pytest

from tui.core.safe_text import terminal_label
from tui.engines.base import EngineError, EngineSpec
from tui.engines.server_models import list_server_models
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
