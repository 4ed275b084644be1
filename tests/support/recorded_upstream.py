"""An OpenAI-compatible upstream that answers every POST with bytes a real server sent
(tests/data/streams/*.sse) or a test's own stream: ``GET /v1/models`` lists one model,
any other GET is a 404 (so ``--url`` detects a plain OpenAI-compatible server)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.scripted_upstream import Script, ScriptedUpstream, chunked, sse_head

STREAMS = Path(__file__).resolve().parents[1] / "data" / "streams"


def recorded(name: str) -> bytes:
    """A captured stream's bytes (tests/data/streams/README.md says what each is)."""
    return (STREAMS / name).read_bytes()


def models_named(body: bytes) -> set[str]:
    """Every ``model`` a stream's events name, as its server wrote them."""
    named: set[str] = set()
    for line in body.splitlines():
        if not line.startswith(b"data:") or line.strip() == b"data: [DONE]":
            continue
        obj = json.loads(line[5:])
        for where in (obj, obj.get("response") or {}, obj.get("message") or {}):
            if isinstance(where, dict) and "model" in where:
                named.add(where["model"])
    return named


def _json(status: str, body: bytes) -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n"
    return head.encode() + b"Content-Length: %d\r\n\r\n" % len(body) + body


def serving(body: bytes, listed: str = "asked-for") -> ScriptedUpstream:
    """An upstream whose every POST is answered with ``body`` (an SSE body, chunked)."""

    def script(request: bytes) -> Script:
        line = request.split(b"\r\n", 1)[0]
        if line.startswith(b"GET /v1/models"):
            return [(0, _json("200 OK", json.dumps({"data": [{"id": listed}]}).encode()))]
        if line.startswith(b"GET"):
            return [(0, _json("404 Not Found", b'{"error": "no such route"}'))]
        return [(0, sse_head() + chunked(body))]

    return ScriptedUpstream(script)
