"""The fields the proxy reads of a body without parsing it whole (tui/proxy/body_scan.py,
issue 48): the same values a JSON parser finds, whatever the body holds around them; a
walk bounded in tokens and memory on hostile bodies; and, through a real proxy, a 30 MiB
body of ``[[],[],…]`` costing bounded memory and no stall for another client's stream."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.proxy.proxy_support import read_response
from tests.support.fake_server import support_command, support_env
from tui.proxy import body_scan
from tui.proxy.body_scan import (
    REQUEST_KEYS,
    REQUEST_NESTED,
    SCAN_TOKENS,
    VALUE_BYTES,
    RequestFields,
    fields,
    request_fields,
    scan,
)

MIB = 1024 * 1024

# text that looks like JSON's own punctuation, escapes and non-ASCII
_TRICKY = st.text(
    alphabet=st.sampled_from(list('ab "\\[]{}:,\n\t\u00e9\U0001f600/') + ["\x00", "\x1f"]),
    max_size=12,
)
_KEY = st.sampled_from(["model", "stream", "user", "metadata", "user_id", "messages", "x"])
_SCALAR = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**53), 2**53),
    st.floats(allow_nan=False, allow_infinity=False),
    _TRICKY,
)
_VALUE = st.recursive(
    _SCALAR,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_KEY | _TRICKY, inner, max_size=4),
    max_leaves=20,
)


def _scanned(body: bytes) -> dict[str, Any] | None:
    """The scan's values, decoded (what fields() gives for a body past the whole-parse
    size), whatever the body's size."""
    got = scan(body, REQUEST_KEYS, REQUEST_NESTED)
    if got is None:
        return None
    values, whole = got
    assert whole
    out = {}
    for k, raw in values.items():
        v = body_scan._decoded(raw)
        if v is not body_scan._MISSING:
            out[k] = v
    return out


def _expected(obj: dict[str, Any]) -> dict[str, Any] | None:
    """What a parser reads: the keys asked for, metadata.user_id inside an object."""
    out = {k: v for k, v in obj.items() if k in REQUEST_KEYS}
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "user_id" in meta:
        out["metadata.user_id"] = meta["user_id"]
    if any(len(orjson.dumps(v)) > VALUE_BYTES // 2 for v in out.values()):
        return None  # (a value longer than one kept: not read whole; not this test's)
    return out


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(obj=st.dictionaries(_KEY | _TRICKY, _VALUE, max_size=8), style=st.integers(0, 2))
def test_the_scan_reads_what_a_parser_reads(obj: dict[str, Any], style: int) -> None:
    """Compact, indented, and ASCII-escaped JSON (every non-ASCII character a \\u
    escape): the scan finds exactly the values a parser finds, brackets, quotes and
    backslashes inside strings and keys notwithstanding."""
    if style == 0:
        body = orjson.dumps(obj)
    elif style == 1:
        body = orjson.dumps(obj, option=orjson.OPT_INDENT_2)
    else:
        body = json.dumps(obj, ensure_ascii=True).encode()
    want = _expected(orjson.loads(body))
    assume(want is not None)
    got = _scanned(body)
    assert got == want
    assert request_fields(body, "/v1/chat/completions") == _request_fields_by_parse(body)


def _request_fields_by_parse(body: bytes) -> RequestFields:
    obj = orjson.loads(body)
    stream = obj.get("stream")
    user = obj.get("user")
    meta = obj.get("metadata")
    if not isinstance(user, str) or not user:
        user = meta.get("user_id") if isinstance(meta, dict) else None
    model = obj.get("model")
    return RequestFields(
        model[:200] if isinstance(model, str) else None,
        stream if isinstance(stream, bool) else False,
        user[:200] if isinstance(user, str) else None,
    )


def test_the_fields_of_requests_as_sdks_send_them() -> None:
    """The OpenAI SDK puts model after messages and user after tools; Anthropic's puts
    metadata and stream between messages and tools. Past the whole-parse size, by the
    scan; each text at most 200 characters."""
    filler = [{"role": "user", "content": 'word [{"}] ' * 20_000}]
    openai = {"messages": filler, "model": "gpt-x", "stream": True, "tools": [], "user": "u" * 300}
    anthropic = {
        "max_tokens": 9,
        "messages": filler,
        "model": "claude",
        "metadata": {"user_id": "c-1"},
    }
    anthropic |= {"stream": False, "system": [{"type": "text", "text": "s"}], "tools": []}
    for obj, want in (
        (openai, RequestFields("gpt-x", True, "u" * 200)),
        (anthropic, RequestFields("claude", False, "c-1")),
        ({"model": "llama3"}, RequestFields("llama3", True, None)),  # Ollama streams
    ):
        body = orjson.dumps(obj)
        path = "/api/chat" if obj.get("model") == "llama3" else "/v1/chat/completions"
        assert request_fields(body, path) == want
    assert len(orjson.dumps(openai)) > body_scan.WHOLE_PARSE_BYTES  # (by the scan)
    assert request_fields(b"[[],[]]", "/v1/chat/completions") == RequestFields(None, None, None)
    assert request_fields(b"not json", "/v1/chat/completions") == RequestFields(None, None, None)
    assert request_fields(b"", "/api/chat") == RequestFields(None, None, None)


def _hostile_bodies() -> Iterator[tuple[str, bytes]]:
    yield "[[],[],…]", b"[" + b"[]," * (10 * MIB) + b"[]]"
    yield "an object of [[],[],…]", b'{"input":[' + b"[]," * (10 * MIB) + b'[]],"model":"m"}'
    yield "an object of strings", b'{"input":[' + b'"",' * (10 * MIB) + b'""],"model":"m"}'
    yield "escaped quotes", b'{"input":"' + b'\\"' * (15 * MIB) + b'","model":"m"}'
    yield "backslashes", b'{"input":"' + b"\\\\" * (15 * MIB) + b'","model":"m"}'
    yield "deep", b'{"input":' + b"[" * (15 * MIB) + b"]" * (15 * MIB) + b',"model":"m"}'
    yield "a long model", b'{"model":"' + b"x" * (30 * MIB) + b'"}'


@pytest.mark.parametrize("name, body", list(_hostile_bodies()), ids=lambda x: str(x)[:24])
def test_a_hostile_body_costs_a_bounded_walk(name: str, body: bytes) -> None:
    """30 MiB bodies of the shapes that cost a parser most (a parse of the first took
    ~1 GiB): the walk stops after SCAN_TOKENS tokens, allocates a few KiB, and a field
    past its bound is unknown, never guessed (the stream's default too)."""
    if name in ("an object of [[],[],…]", "escaped quotes", "a long model"):
        tracemalloc.start()  # (slow: every position the walk takes is an allocation)
        try:
            fields(body, REQUEST_KEYS, REQUEST_NESTED)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 256 * 1024, peak  # (the body: 30 MiB)
    found = fields(body, REQUEST_KEYS, REQUEST_NESTED)
    said = request_fields(body, "/v1/chat/completions")
    if name == "[[],[],…]":
        assert found is None and said == RequestFields(None, None, None)
    elif name == "a long model":
        assert found is not None and found.whole and said.model == "x" * 200
    elif name == "backslashes":  # (escaped backslashes: one string, walked at C speed)
        assert found is not None and found.whole and said.model == "m"
    else:
        assert found is not None and not found.whole
        assert said == RequestFields(None, None, None)


def test_the_walk_stops_at_its_bound() -> None:
    """A field after SCAN_TOKENS tokens is not read; one just before is."""
    for n, seen in ((SCAN_TOKENS // 2 - 10, True), (SCAN_TOKENS // 2 + 10, False)):
        pad = b'"' + b"x" * body_scan.WHOLE_PARSE_BYTES + b'"'  # (one token: past a parse)
        body = b'{"pad":' + pad + b',"input":[' + b"[]," * n + b'[]],"model":"m"}'  # [] = 2
        assert (request_fields(body, "/v1/completions").model == "m") is seen


def _embeddings_answer(items: int, dims: int) -> bytes:
    vector = [0.0123456789 * (i % 97 - 48) for i in range(dims)]
    data = [{"object": "embedding", "index": i, "embedding": vector} for i in range(items)]
    usage = {"prompt_tokens": 4321, "total_tokens": 4321}
    return orjson.dumps({"object": "list", "data": data, "model": "e", "usage": usage})


@pytest.mark.parametrize(
    "shape, body, tokens",
    [
        ("500 vectors of 2048", _embeddings_answer(500, 2048), 4321),
        (
            "[[],[],…] then usage",
            b'{"data":[' + b"[]," * (5 * MIB) + b'[]],"usage":{"prompt_tokens":7}}',
            None,
        ),
    ],
    ids=["honest", "hostile"],
)
def test_an_embeddings_answer_is_read_for_its_counts_only(shape: str, body: bytes, tokens) -> None:
    """An embeddings answer (up to 16 MiB) was parsed whole for one usage field (the
    hostile shape: ~0.5 GiB); now its counts are read by the scan, the only copy made the
    body joined from its reads. Past the scan's bound the count is unknown, not guessed."""
    from tui.proxy.observe import WholeBody
    from tui.proxy.record import ProxiedRequest

    assert 12 * MIB < len(body) <= 16 * MIB, len(body)
    rec = ProxiedRequest("r", "c", "POST", "/v1/embeddings", "embeddings", "e", False, 0)
    obs = WholeBody(rec, "embeddings")
    for i in range(0, len(body), 256 * 1024):
        obs.feed(1_000 + i, body[i : i + 256 * 1024])
    tracemalloc.start()
    try:
        obs.end(2_000_000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < len(body) + MIB, (shape, peak)  # the join, and nothing per value
    assert rec.state == "done" and rec.timeline.prompt_tokens == tokens


# -- through a proxy ---------------------------------------------------------------------


@pytest.fixture
def pace_process() -> Iterator[str]:
    """A pace server in its own process (a 30 MiB body read there holds no GIL here)."""
    proc = subprocess.Popen(
        support_command("pace_server", "--port", "0", "--interval-ms", "10"),
        stdout=subprocess.PIPE,
        text=True,
        env=support_env(),
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        yield line.split(" on ")[1].split(" ")[0]
    finally:
        proc.kill()
        proc.wait(10)


def _peak_rss_reset() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
        return True
    except OSError:
        return False


def _vm_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def test_a_30_mib_body_of_nested_lists_costs_bounded_memory_and_no_stall(
    pace_process: str, start_proxy
) -> None:
    """Issue 48 at its scale: one 30 MiB body of ``[[],[],…]`` cost the proxy +993 MiB
    and stalled every client 2.6 s (its whole body parsed on the loop). Now another
    client's stream, a token every 10 ms through the same proxy, sees no gap over
    0.5 s while it passes, and this process (the proxy's) grows by the body's copies
    only."""
    proxy = start_proxy(pace_process)
    host, port = proxy.url[7:].split(":")
    body = b"[" + b"[]," * (10 * MIB) + b"[]]"
    request = b"POST /v1/embeddings HTTP/1.1\r\nHost: p\r\nContent-Length: %d\r\n\r\n" % len(body)
    arrivals: list[float] = []
    streamed = threading.Event()

    def stream() -> None:
        req = {"model": "pace", "stream": True, "max_tokens": 150, "messages": []}
        data = json.dumps(req).encode()
        head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: p\r\nContent-Length: %d\r\n\r\n"
        with socket.create_connection((host, int(port)), timeout=30) as s:
            s.sendall(head % len(data) + data)
            while chunk := s.recv(65536):
                arrivals.append(time.monotonic())
                if b"[DONE]" in chunk:
                    break
        streamed.set()

    reader = threading.Thread(target=stream, daemon=True)
    reader.start()
    while len(arrivals) < 20:  # the stream runs
        time.sleep(0.01)
    measured = _peak_rss_reset()
    rss_before = _vm_kib("VmRSS")
    t0 = time.monotonic()
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(request + body)
        head, _ = read_response(s, timeout=30)
    hostile_s = time.monotonic() - t0
    grew_mib = (_vm_kib("VmHWM") - rss_before) / 1024
    assert head.startswith(b"HTTP/1.1 404 ")  # (the pace server has no embeddings)
    assert streamed.wait(30)
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:])]
    print(f"30 MiB passed in {hostile_s:.2f} s; stream's longest gap {max(gaps) * 1e3:.0f} ms; "
          f"peak RSS +{grew_mib:.0f} MiB")  # fmt: skip
    assert max(gaps) < 0.5
    assert len(arrivals) > 50  # (the stream ran while the body passed)
    if measured:
        assert grew_mib < 400  # (the body, its one copy, the bytes sent: ~4 x 30 MiB)
