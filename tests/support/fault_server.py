"""A socket-level server that misbehaves on purpose, one way per URL prefix.

Point an engine at ``http://127.0.0.1:PORT/<mode>``; the engine appends its own path
(``/v1/chat/completions``, ``/api/chat``, ...). Requests whose path contains ``/api/``
get Ollama-style NDJSON, others OpenAI-style SSE. Modes:

ok            a short, correct stream (the control case)
malformed     one good chunk, then a line that is not JSON
truncated     one good chunk, then half a JSON object, then a clean end of body
close-mid     two good chunks, then the socket closes inside the chunked body
close-clean   two good chunks, then the body ends (Connection: close) with no end marker
stall         headers and one good chunk, then silence (the socket stays open)
stall-late    headers, then 0.3 s later (a read of its own) one good chunk, then silence
stall-headers the request is read, nothing is ever sent
html          200 with an HTML page (a web server, not an LLM server)
500 / 401 / 404   that status with a JSON error message naming the mode
garbage       bytes that are not HTTP at all

Standard library only; run it in a thread with :func:`start_in_thread`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

from tests.support.fake_server import FakeServer, read_path
from tests.support.fake_server import start_in_thread as serve_in_thread

ERROR_MESSAGES = {
    "500": ("500 Internal Server Error", "fault-server: the model crashed (mode 500)"),
    "401": ("401 Unauthorized", "fault-server: invalid API key (mode 401)"),
    "404": ("404 Not Found", "fault-server: model 'nope' not found (mode 404)"),
}


def _sse(obj: object) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def _good(ndjson: bool, text: str) -> bytes:
    if ndjson:
        msg = {"model": "m", "message": {"role": "assistant", "content": text}, "done": False}
        return json.dumps(msg).encode() + b"\n"
    return _sse({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]})


def _end(ndjson: bool) -> bytes:
    if ndjson:
        final = {
            "model": "m",
            "message": {"role": "assistant", "content": ""},
            "done": True,
            "done_reason": "stop",
            "eval_count": 2,
            "eval_duration": 1000000,
        }
        return json.dumps(final).encode() + b"\n"
    tail = _sse({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    return (
        tail
        + _sse({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}})
        + (b"data: [DONE]\n\n")
    )


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _head(status: str, ctype: str, chunked: bool = True, length: int | None = None) -> bytes:
    h = [f"HTTP/1.1 {status}", f"Content-Type: {ctype}", "Connection: close"]
    if length is not None:
        h.append(f"Content-Length: {length}")
    elif chunked:
        h.append("Transfer-Encoding: chunked")
    return ("\r\n".join(h) + "\r\n\r\n").encode()


class FaultServer(FakeServer):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []
        self._hold: list[asyncio.StreamWriter] = []

    async def stop(self) -> None:
        for w in self._hold:
            w.close()
        await super().stop()

    async def serve(self, reader: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        try:
            path = await read_path(reader)
            self.seen.append(path)
            await self._answer(path, w)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass

    async def _answer(self, path: str, w: asyncio.StreamWriter) -> None:
        mode = path.strip("/").split("/")[0]
        nd = "/api/" in path
        ctype = "application/x-ndjson" if nd else "text/event-stream"
        if mode in ERROR_MESSAGES:
            status, msg = ERROR_MESSAGES[mode]
            body = json.dumps({"error": msg} if nd else {"error": {"message": msg}}).encode()
            w.write(_head(status, "application/json", length=len(body)) + body)
        elif mode == "html":
            body = b"<!DOCTYPE html><html><body><h1>My home page</h1></body></html>"
            w.write(_head("200 OK", "text/html; charset=utf-8", length=len(body)) + body)
        elif mode == "garbage":
            w.write(b"SSH-2.0-OpenSSH_9.2\r\nProtocol mismatch.\r\n")
        elif mode == "stall-headers":
            self._hold.append(w)
            return
        else:
            w.write(_head("200 OK", ctype, chunked=mode != "close-clean"))
            if mode == "stall-late":  # the first chunk arrives after the client has the head
                await w.drain()
                await asyncio.sleep(0.3)
                mode = "stall"
            await self._body(mode, nd, w)
            if mode == "stall":
                return
        await w.drain()
        w.close()

    async def _body(self, mode: str, nd: bool, w: asyncio.StreamWriter) -> None:
        def send(data: bytes) -> None:
            w.write(data if mode == "close-clean" else _chunk(data))

        send(_good(nd, "Hello"))
        await w.drain()
        await asyncio.sleep(0.02)
        if mode == "malformed":
            send(b"{this is not json\n" if nd else b"data: {this is not json\n\n")
        elif mode == "truncated":
            send(
                b'{"model":"m","message":{"content":"wor'
                if nd
                else b'data: {"choices":[{"index":0,"delta":{"content":"wor'
            )
        elif mode == "stall":
            await w.drain()
            self._hold.append(w)
            return
        elif mode in ("close-mid", "close-clean"):
            send(_good(nd, " world"))
            await w.drain()
            if mode == "close-mid":
                w.write(b"5\r\nab")  # a chunk cut short, then the socket closes
            return
        else:  # ok
            send(_good(nd, " world") + _end(nd))
        w.write(b"0\r\n\r\n")


def start_in_thread(host: str = "127.0.0.1") -> tuple[int, FaultServer, Callable[[], None]]:
    """Serve on a daemon thread; returns (port, server, stop)."""
    return serve_in_thread(FaultServer(), "fault-server", host)
