"""The proxy's own routes, under ``/infertop/`` (never forwarded; no engine uses them).

- ``GET /infertop/metrics`` — Prometheus text (:mod:`tui.proxy.exposition`); answered to
  anyone who can reach the proxy (no text of any request is in it).
- ``GET /infertop/health`` — ``{"status": "ok"}``.
- ``GET /infertop/events`` — the live NDJSON stream the requests view reads
  (:mod:`tui.proxy.book`).
- ``GET /infertop/requests/ID`` — one request's row, metrics, engine report and chunk
  stamps (``[t_ns, tokens]``, the chunk's part third where it is reasoning or a tool
  call); with ``?text=1`` also its prompt and answer (other people's data: the view asks
  only when its user presses a key).

The last two answer **the proxy's own user on its machine only** (403 otherwise): a
loopback client whose socket that user owns (Linux, tui/proxy/peer.py; elsewhere any
loopback client), even when the proxy listens beyond loopback. A laptop reaches them
through an ssh tunnel, whose connections arrive from the box's loopback as the user who
logged in.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import orjson

from tui.core.events import ANSWER
from tui.proxy.book import json_line
from tui.proxy.forward import ClientRequest, error_response
from tui.proxy.record import ProxiedRequest
from tui.proxy.wire import simple_response

if TYPE_CHECKING:
    from tui.proxy.client_conn import ClientConnection
    from tui.proxy.server import Proxy

PREFIX = "/infertop/"
CHUNKS_SHOWN = 20_000  # chunk stamps in one request's detail, the last ones
PROMPT_CHARS = 256 * 1024
METRICS_TYPE = "text/plain; version=0.0.4; charset=utf-8"


async def serve(proxy: Proxy, client: ClientConnection, req: ClientRequest) -> bool:
    """Answer one request to ``/infertop/...``; True: the connection stays open."""
    head = req.head
    keep = head.keep_alive
    path = head.path
    if head.method not in ("GET", "HEAD"):
        client.write(error_response(405, "Method Not Allowed", "GET only", not keep))
        return keep
    if path == PREFIX + "metrics":
        return _whole(client, head.method, proxy.metrics.render(), METRICS_TYPE, keep)
    if path == PREFIX + "health":
        return _whole(client, head.method, b'{"status":"ok"}', "application/json", keep)
    if path not in (PREFIX + "events",) and not path.startswith(PREFIX + "requests/"):
        client.write(error_response(404, "Not Found", f"no route {path[:80]}", not keep))
        return keep
    if not client.may_watch():
        why = (
            "the requests of others are shown only to the proxy's own user on its "
            "machine (from elsewhere: an ssh tunnel)"
        )
        client.write(error_response(403, "Forbidden", why, not keep))
        return keep
    if path == PREFIX + "events":
        await _events(proxy, client)
        return False
    rid = path[len(PREFIX + "requests/") :]
    rec = proxy.book.find(rid)
    if rec is None:
        why = "no such request (the recent ones are kept)"
        client.write(error_response(404, "Not Found", why, not keep))
        return keep
    with_text = "text=1" in head.target.partition("?")[2].split("&")
    body = json_line(detail(rec, with_text))
    return _whole(client, head.method, body, "application/json", keep)


def _whole(client: ClientConnection, method: str, body: bytes, ctype: str, keep: bool) -> bool:
    data = simple_response(200, "OK", body, ctype, close=not keep)
    if method == "HEAD":
        data = data[: len(data) - len(body)]
    client.write(data)
    return keep


async def _events(proxy: Proxy, client: ClientConnection) -> None:
    """The live stream: a hello, then every line the book publishes, until either side
    goes (the book drops a watcher too far behind)."""
    client.write(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\n"
        b"Transfer-Encoding: chunked\r\nCache-Control: no-store\r\n\r\n"
    )
    if client.send(proxy.book.hello()):
        proxy.book.attach(client)
    await asyncio.get_running_loop().create_future()  # cancelled when the client goes


def detail(rec: ProxiedRequest, with_text: bool) -> dict[str, Any]:
    """One request for the timeline view (``with_text``: its prompt and answer too)."""
    tl = rec.timeline
    t0 = tl.t_sent_ns or 0
    # a chunk's part as a third item only where it is not answer text (as session files)
    chunks = [
        [t - t0, k] if p == ANSWER else [t - t0, k, p]
        for t, x, k, p in zip(tl.chunk_ns, tl.chunk_text, tl.chunk_tokens, tl.parts)
        if x
    ][-CHUNKS_SHOWN:]
    m = rec.metrics
    out: dict[str, Any] = {
        "row": rec.row().to_json(),
        "metrics": None if m is None else m.to_dict(with_lists=False),
        "engine_truth": None if tl.truth is None else _truth(tl.truth.to_dict()),
        "stamp_source": tl.stamp_source,
        "finish_reason": tl.finish_reason,
        "forward_delay_ms": rec.forward_delay_ms,
        "note": rec.note,
        "truth_note": rec.truth_note,
        "timeline_kept": not rec.timeline_dropped,
        "chunks": chunks,
    }
    if with_text:
        kept = rec.text_chars >= 0
        out["text"] = {
            "kept": kept,
            "request": request_text(rec) if kept else None,
            "response": tl.text if kept else None,
            "request_cut": rec.body_cut,
        }
    return out


def _truth(d: dict[str, Any]) -> dict[str, Any]:
    d = dict(d)
    d.pop("raw", None)  # the engine's fields verbatim: in the events file, not the view
    return d


def request_text(rec: ProxiedRequest) -> str:
    """The request's prompt as text: each message as ``role: content``, or the prompt
    (images and other parts named, not shown); the raw body if it is not JSON."""
    body = rec.body or b""
    try:
        obj = orjson.loads(body)
    except (ValueError, RecursionError):
        return body[:PROMPT_CHARS].decode("utf-8", "replace")
    lines: list[str] = []
    if isinstance(obj, dict):
        if isinstance(obj.get("system"), str):
            lines.append(f"system: {obj['system']}")
        messages = obj.get("messages")
        for m in messages if isinstance(messages, list) else []:
            if isinstance(m, dict):
                lines.append(f"{m.get('role', '?')}: {_content(m.get('content'))}")
        prompt = obj.get("prompt")
        if isinstance(prompt, str):
            lines.append(prompt)
        elif isinstance(prompt, list):
            lines.extend(p if isinstance(p, str) else str(p)[:200] for p in prompt)
    return "\n".join(lines)[:PROMPT_CHARS]


def _content(c: Any) -> str:
    if isinstance(c, str):
        return c
    if isinstance(c, list):
        parts = []
        for p in c:
            if isinstance(p, dict) and isinstance(p.get("text"), str):
                parts.append(p["text"])
            elif isinstance(p, dict):
                parts.append(f"[{p.get('type', 'part')}]")
        return " ".join(parts)
    return "" if c is None else f"[{type(c).__name__}]"
