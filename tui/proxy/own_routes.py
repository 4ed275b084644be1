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
loopback client whose socket that user owns (Linux, tui/proxy/peer.py: refused when the
owner cannot be established; elsewhere any loopback client), even when the proxy
listens beyond loopback. A laptop reaches them through an ssh tunnel, whose connections
arrive from the box's loopback as the user who logged in. And never a web page: the
user's browser runs as the user, so a page that rebinds its own name to 127.0.0.1 (DNS
rebinding) would pass the owner check. A browser sends the page's name as Host, and an
Origin on requests a page makes across origins, so these routes need a loopback Host
(``localhost``, ``127.x.x.x``, ``[::1]``, any port) and refuse any request with an
Origin (:func:`from_a_page`).
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
from typing import Any, Protocol

import orjson

from tui.core.events import ANSWER
from tui.proxy.book import RequestBook, json_line
from tui.proxy.exchange import ClientRequest
from tui.proxy.record import ProxiedRequest
from tui.proxy.wire import error_response, simple_response
from tui.transport.http_head import RequestHead

PREFIX = "/infertop/"
CHUNKS_SHOWN = 20_000  # chunk stamps in one request's detail, the last ones
PROMPT_CHARS = 256 * 1024
METRICS_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_HOST = re.compile(rb"(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<name>[^:\[\]]+))(?::[0-9]{1,5})?")


def loopback_host(value: bytes | None) -> bool:
    """Whether a Host field names this machine's loopback: ``localhost`` (or
    ``localhost.``), an IPv4 loopback address or ``[::1]``, with any port."""
    m = _HOST.fullmatch(value.strip()) if value else None
    if m is None:
        return False
    name = (m["v6"] or m["name"]).decode("ascii", "replace").lower()
    if m["name"] is not None and name.rstrip(".") == "localhost":
        return True
    try:
        ip = ipaddress.ip_address(name)
    except ValueError:
        return False
    if m["v6"] is None and ip.version == 6:
        return False  # an IPv6 address must be bracketed in Host
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def from_a_page(head: RequestHead) -> str | None:
    """Why a request to the owner's routes may come from a web page (None: it cannot):
    its Host is not loopback (a page whose name was rebound to 127.0.0.1), or it has an
    Origin (a page's request across origins)."""
    if head.get(b"origin") is not None:
        return "a request with an Origin (from a web page) is refused here"
    if not loopback_host(head.get(b"host")):
        return "these routes answer a loopback Host only (localhost, 127.0.0.1, [::1])"
    return None


class Asker(Protocol):
    """The client connection asking (tui/proxy/client_conn.py, ClientConnection)."""

    loopback: bool

    def write(self, data: bytes) -> None: ...

    def send(self, line: bytes) -> bool: ...

    async def may_watch(self) -> bool: ...


async def serve(book: RequestBook, client: Asker, req: ClientRequest) -> bool:
    """Answer one request to ``/infertop/...``; True: the connection stays open."""
    head = req.head
    keep = head.keep_alive
    path = head.path
    if head.method not in ("GET", "HEAD"):
        client.write(error_response(405, "Method Not Allowed", "GET only", not keep))
        return keep
    if path == PREFIX + "metrics":
        return _whole(client, head.method, book.metrics.render(), METRICS_TYPE, keep)
    if path == PREFIX + "health":
        return _whole(client, head.method, b'{"status":"ok"}', "application/json", keep)
    if path not in (PREFIX + "events",) and not path.startswith(PREFIX + "requests/"):
        client.write(error_response(404, "Not Found", f"no route {path[:80]}", not keep))
        return keep
    page = from_a_page(head) if client.loopback else None
    if page is not None:
        client.write(error_response(403, "Forbidden", page, not keep))
        return keep
    if not await client.may_watch():
        why = (
            "the requests of others are shown only to the proxy's own user on its "
            "machine (from elsewhere: an ssh tunnel)"
        )
        client.write(error_response(403, "Forbidden", why, not keep))
        return keep
    if path == PREFIX + "events":
        await _events(book, client)
        return False
    rid = path[len(PREFIX + "requests/") :]
    rec = book.find(rid)
    if rec is None:
        why = "no such request (the recent ones are kept)"
        client.write(error_response(404, "Not Found", why, not keep))
        return keep
    with_text = "text=1" in head.target.partition("?")[2].split("&")
    found = detail(rec, with_text)
    if book.why is not None:
        found.update(book.why.detail(rec.id))
    body = json_line(found)
    return _whole(client, head.method, body, "application/json", keep)


def _whole(client: Asker, method: str, body: bytes, ctype: str, keep: bool) -> bool:
    data = simple_response(200, "OK", body, ctype, close=not keep)
    if method == "HEAD":
        data = data[: len(data) - len(body)]
    client.write(data)
    return keep


async def _events(book: RequestBook, client: Asker) -> None:
    """The live stream: a hello, then every line the book publishes, until either side
    goes (the book drops a watcher too far behind)."""
    client.write(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\n"
        b"Transfer-Encoding: chunked\r\nCache-Control: no-store\r\n\r\n"
    )
    if client.send(book.hello()):
        book.attach(client)
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
