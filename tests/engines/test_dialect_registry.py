"""The dialect registry (tui/engines/dialects/kinds.py): every module that treats
dialects alike asks it, so adding one is one descriptor entry and one decoder class —
shown with a made-up dialect (tests/support/lines_dialect.py; the proxy measuring it:
tests/proxy/test_new_dialect.py)."""

from __future__ import annotations

import pytest

from tests.support.lines_dialect import LINES, lines_dialect
from tui.core.events import ANSWER, REASONING, Finished, StreamEvent, TextChunk, Usage
from tui.engines.dialects import decoder_for, route_dialect, routes, whole_answer
from tui.engines.dialects.kinds import dialect_named, dialects, streamed_as
from tui.proxy import routes as proxy_routes


def test_the_built_in_dialects_and_their_routes() -> None:
    assert [d.name for d in dialects()] == [
        "openai-chat",
        "openai-completions",
        "openai-responses",
        "anthropic",
        "ollama",
        "llama",
        "embeddings",
        "rerank",
    ]
    assert routes()["/v1/messages"] == "anthropic" and routes()["/api/embed"] == "embeddings"
    assert route_dialect("/gateway/v1/chat/completions") == "openai-chat"
    assert [d.name for d in dialects() if d.streamed_by_default] == ["ollama"]
    assert {d.name for d in dialects() if d.decoder is None} == {"embeddings", "rerank"}
    assert dialect_named("ollama").content_type == "json"  # the engines' check
    assert dialect_named("openai-chat").content_type == "event-stream"
    with pytest.raises(ValueError, match="no streaming decoder"):
        decoder_for("embeddings")
    with pytest.raises(ValueError, match="no dialect"):
        decoder_for("smoke-signals")


def test_an_answer_streamed_in_another_framing_is_read_by_that_framings_default() -> None:
    assert streamed_as("anthropic", "sse").name == "anthropic"
    assert streamed_as("embeddings", "sse").name == "openai-chat"
    assert streamed_as("openai-chat", "ndjson").name == "ollama"


def test_a_new_dialect_is_one_entry_and_one_decoder_class() -> None:
    body = b'{"think": "hm"}\n{"say": "Hel"}\n{"say": "lo"}\n{"end": 3}\n'
    with lines_dialect():
        # the decoders: streamed, in any pieces, and read whole
        dec = decoder_for("test-lines")
        out: list[StreamEvent] = []
        for i in range(0, len(body), 7):
            dec.feed(body[i : i + 7], i, out.append)
        dec.close(999, out.append)
        out.append(dec.end(1000))
        chunks = [(e.part, e.text, e.tokens) for e in out if isinstance(e, TextChunk)]
        assert chunks == [(REASONING, "hm", 1), (ANSWER, "Hel", 1), (ANSWER, "lo", 1)]
        assert [e.output_tokens for e in out if isinstance(e, Usage)] == [3]
        assert isinstance(out[-1], Finished)
        whole: list[StreamEvent] = []
        whole_answer("test-lines", {"say": "Hello", "end": 1}, 5, whole.append)
        assert [(e.part, e.text) for e in whole if isinstance(e, TextChunk)] == [(ANSWER, "Hello")]
        # its routes: the proxy measures them, labels them, and streams by default
        assert route_dialect("/v1/lines") == "test-lines"
        assert proxy_routes.dialect("POST", "/v1/lines") == "test-lines"
        assert proxy_routes.route_label("/lines") == "/lines"
        assert proxy_routes.streams_by_default("/v1/lines")
        assert streamed_as("test-lines", "ndjson") is LINES
    assert route_dialect("/v1/lines") is None and proxy_routes.route_label("/lines") == "other"
