"""The same request straight to an engine and through ``infertop proxy``: the answers'
bytes compared once the fields an engine makes fresh per answer are masked (ids, creation
times, llama-server's ``timings`` numbers, Ollama's durations and ``created_at``, vLLM's
per-block thinking signatures). Used by tests/http/test_proxy_real.py and
test_proxy_agents.py."""

from __future__ import annotations

import re
from typing import Any

import httpx

MASKS = [
    (rb'"(id|item_id|call_id)":\s*"[^"]*"', rb'"\1":"~"'),
    (rb'"(created|created_at)":\s*\d+', rb'"\1":0'),
    (rb'"created_at":\s*"[^"]*"', b'"created_at":"~"'),
    (rb'"system_fingerprint":\s*"[^"]*"', b'"system_fingerprint":"~"'),
    (rb'"timings":\s*\{[^}]*\}', b'"timings":{}'),
    (rb'"(total|load|prompt_eval|eval)_duration":\s*\d+', rb'"\1_duration":0'),
    (rb'"signature":\s*"[^"]*"', b'"signature":"~"'),  # vLLM signs each thinking block anew
]
HOP = {b"connection", b"keep-alive", b"date", b"transfer-encoding"}


def masked(body: bytes) -> bytes:
    for pattern, repl in MASKS:
        body = re.sub(pattern, repl, body)
    return body


def exchange(url: str, path: str, body: dict[str, Any]) -> tuple[int, list[Any], bytes]:
    """(status, end-to-end headers in order, the body bytes as sent: de-chunked, not
    decoded). A Content-Length is checked against the body, then masked (a length follows
    the body's digits: timings, ids)."""
    with httpx.Client(timeout=120) as c:
        with c.stream("POST", url + path, json=body) as r:
            raw = b"".join(r.iter_raw())
            headers = [(k.lower(), v) for k, v in r.headers.raw if k.lower() not in HOP]
    for i, (k, v) in enumerate(headers):
        if k == b"content-length":
            assert int(v) == len(raw)
            headers[i] = (k, b"~")
    return r.status_code, headers, raw
