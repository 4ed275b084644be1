"""A small, fast OpenAI-compatible SSE server that emits one token every X ms.

For benchmarks and tests of the measuring side: its timing is known, so a client's
measured TTFT / ITL / tok/s can be checked against it. It is not an LLM: a "token" is the
word ``tok<i> `` and prompt tokens are the prompt's whitespace-separated words.

Behaviour, per request to /v1/chat/completions or /v1/completions (``"stream": true``):
- wait for a free slot (``concurrency`` slots; others queue, like a real server);
- send a role-only chunk at once (chat endpoint), like vLLM (it is not a token);
- token i (0-based) is sent at slot_start + ttft_ms + i * interval_ms (absolute schedule,
  so delays do not accumulate); N = the request's max_tokens, else ``tokens``;
- then a chunk with finish_reason "length", a ``usage`` chunk (``choices: []``) when
  ``stream_options.include_usage`` is true, and ``data: [DONE]``.
Non-streaming requests get one JSON answer after the same total time.
With ``burst`` (``--burst``; interval and TTFT are then ignored) a streamed answer is
written at once, in one write, from bytes built once per (endpoint, N, usage, prompt
length, keep-alive) and reused: the server's cost per request is then a few tens of µs whatever N,
for measuring a client that has to keep up with a fast server (every answer's frames
share the id ``pace-burst``; /stamps records nothing). Also: GET
/v1/models, GET /health, GET /stats (requests served, streams active now, max concurrent
seen), GET /stamps: for the last ``stamps_kept`` streamed requests (by response id
``pace-N``), the ``time.perf_counter_ns()`` right after each token's bytes were handed to
the socket — the server's actual send times, on the clock (CLOCK_MONOTONIC on Linux) that
infertop's own stamps use, so a client's measured gaps can be checked against the real send
gaps — the same clock's reading just *before* each token's write (``write_ns``: when a
process woken by the write preempts this one, as a proxy asking for a short scheduler
slice does, the stamp after the write is taken only once that process has run, so a
path's time measured from it would leave out what that process did), and when the request
had been read whole (``received_ns``: a client's request way in is then its own write
stamp to this one, the server's wait out) — and each request's ``seed`` (when its body
had one: the bench gives every request a distinct seed, so a client record finds its
stamps even when many requests overlap).

Run: ``python -m tests.support.pace_server --port N --interval-ms 10`` or import it and
use :func:`start_in_thread`. Standard library only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.support.fake_server import FakeServer
from tests.support.fake_server import start_in_thread as serve_in_thread

MODEL_ID = "pace"
STAMPS_KEPT = 256  # streamed requests whose token send times /stamps keeps


@dataclass
class PaceConfig:
    interval_ms: float = 10.0
    ttft_ms: float | None = None  # None: one interval
    tokens: int = 64
    concurrency: int = 64
    model: str = MODEL_ID
    stamps_kept: int = STAMPS_KEPT
    burst: bool = False  # write each streamed answer at once (see the module docstring)


@dataclass
class PaceStats:
    requests: int = 0
    active: int = 0
    max_active: int = 0
    tokens_sent: int = 0
    last_headers: dict[str, str] = field(default_factory=dict)  # of the last request


class HttpRequest:
    def __init__(self, method: str, path: str, headers: dict[str, str], body: bytes) -> None:
        self.method, self.path, self.headers, self.body = method, path, headers, body
        self.received_ns = time.perf_counter_ns()  # read whole (made right after the read)

    @property
    def keep_alive(self) -> bool:
        return self.headers.get("connection", "").lower() != "close"


async def read_request(reader: asyncio.StreamReader) -> HttpRequest | None:
    """One HTTP/1.1 request (Content-Length bodies only); None at a clean EOF."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) < 2:
        return None
    headers: dict[str, str] = {}
    for ln in lines[1:]:
        if ":" in ln:
            k, v = ln.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    n = int(headers.get("content-length", "0") or 0)
    body = await reader.readexactly(n) if n else b""
    return HttpRequest(parts[0], parts[1].split("?")[0], headers, body)


def response_head(status: str, ctype: str, length: int | None, keep_alive: bool) -> bytes:
    h = [f"HTTP/1.1 {status}", f"Content-Type: {ctype}"]
    h.append(f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked")
    h.append("Connection: keep-alive" if keep_alive else "Connection: close")
    return ("\r\n".join(h) + "\r\n\r\n").encode()


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def sse(obj: object) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


ROLE_CHOICE = {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}


def choice(chat: bool, text: str | None, finish: str | None) -> dict[str, Any]:
    """One choice of a streamed chunk: a chat delta, or a completion's text."""
    if chat:
        delta = {} if text is None else {"content": text}
        return {"index": 0, "delta": delta, "finish_reason": finish}
    return {"index": 0, "text": text or "", "finish_reason": finish}


def sse_frame(
    rid: str, chat: bool, model: str, choices: list[dict[str, Any]], extra: dict[str, Any] | None
) -> bytes:
    """One streamed chunk as an SSE event."""
    kind = "chat.completion.chunk" if chat else "text_completion"
    obj = {"id": rid, "object": kind, "model": model, "choices": choices}
    if extra:
        obj.update(extra)
    return sse(obj)


class PaceServer(FakeServer):
    def __init__(self, config: PaceConfig) -> None:
        super().__init__()
        self.config = config
        self.stats = PaceStats()
        self._slots: asyncio.Semaphore | None = None
        self.sent_ns: dict[str, list[int]] = {}  # response id -> token send times (ns)
        self.seeds: dict[str, int] = {}  # response id -> the request's seed (kept alike)
        self.received_ns: dict[str, int] = {}  # response id -> request read whole (alike)
        self.write_ns: dict[str, list[int]] = {}  # response id -> before each token's write
        self._bursts: dict[tuple[bool, int, bool, int, bool], bytes] = {}  # prebuilt answers
        self.traceparents: list[str | None] = []  # each generation request's, as it came

    async def start(
        self, host: str = "127.0.0.1", port: int = 0, ssl: Any = None, **listen: Any
    ) -> int:
        """Listen (``ssl``: an ssl.SSLContext for HTTPS); returns the port."""
        self._slots = asyncio.Semaphore(self.config.concurrency)
        return await super().start(host, port, backlog=1024, ssl=ssl, **listen)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                req = await read_request(reader)
                if req is None:
                    break
                await self._handle(req, writer)
                if not req.keep_alive:
                    break
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def _json(self, writer: asyncio.StreamWriter, status: str, obj: object, ka: bool) -> None:
        data = json.dumps(obj).encode()
        writer.write(response_head(status, "application/json", len(data), ka) + data)
        await writer.drain()

    async def _handle(self, req: HttpRequest, writer: asyncio.StreamWriter) -> None:
        self.stats.last_headers = dict(req.headers)
        ka = req.keep_alive
        if req.method == "GET" and req.path == "/health":
            return await self._json(writer, "200 OK", {"status": "ok"}, ka)
        if req.method == "GET" and req.path == "/v1/models":
            model = {"id": self.config.model, "object": "model", "owned_by": "pace"}
            return await self._json(writer, "200 OK", {"object": "list", "data": [model]}, ka)
        if req.method == "GET" and req.path == "/stats":
            s = self.stats
            body = {
                "requests": s.requests,
                "active": s.active,
                "max_active": s.max_active,
                "tokens": s.tokens_sent,
            }
            return await self._json(writer, "200 OK", body, ka)
        if req.method == "GET" and req.path == "/stamps":
            stamps: dict[str, object] = {
                "clock": "time.perf_counter_ns",
                "sent_ns": self.sent_ns,
                "received_ns": self.received_ns,
                "write_ns": self.write_ns,
                "seed": self.seeds,
            }
            return await self._json(writer, "200 OK", stamps, ka)
        if req.method == "POST" and req.path in ("/v1/chat/completions", "/v1/completions"):
            try:
                body = json.loads(req.body or b"{}")
                assert isinstance(body, dict)
            except (ValueError, AssertionError):
                err = {"error": {"message": "request body is not a JSON object", "code": 400}}
                return await self._json(writer, "400 Bad Request", err, ka)
            chat = req.path.endswith("chat/completions")
            self.traceparents.append(req.headers.get("traceparent"))
            return await self._generate(chat, body, writer, ka, req.received_ns)
        err = {"error": {"message": f"no route {req.method} {req.path}", "code": 404}}
        await self._json(writer, "404 Not Found", err, ka)

    async def _generate(
        self,
        chat: bool,
        body: dict[str, Any],
        writer: asyncio.StreamWriter,
        ka: bool,
        received_ns: int = 0,
    ) -> None:
        cfg = self.config
        n = int(body.get("max_tokens") or cfg.tokens)
        if chat:
            prompt = " ".join(str(m.get("content", "")) for m in body.get("messages", []))
        else:
            prompt = str(body.get("prompt", ""))
        usage = {
            "prompt_tokens": len(prompt.split()),
            "completion_tokens": n,
            "total_tokens": len(prompt.split()) + n,
        }
        stream = bool(body.get("stream"))
        seed = body.get("seed")
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        assert self._slots is not None
        async with self._slots:
            s = self.stats
            s.requests += 1
            s.active += 1
            s.max_active = max(s.max_active, s.active)
            try:
                await self._emit(
                    chat, n, usage, stream, include_usage, writer, ka, seed, received_ns
                )
            finally:
                s.active -= 1

    async def _emit(
        self,
        chat: bool,
        n: int,
        usage: dict[str, Any],
        stream: bool,
        include_usage: bool,
        writer: asyncio.StreamWriter,
        ka: bool,
        seed: object = None,
        received_ns: int = 0,
    ) -> None:
        cfg = self.config
        if stream and cfg.burst:
            key = (chat, n, include_usage, usage["prompt_tokens"], ka)
            answer = self._bursts.get(key)
            if answer is None:
                answer = self._bursts[key] = self._answer(chat, n, usage, include_usage, ka)
            writer.write(answer)
            self.stats.tokens_sent += n
            return await writer.drain()
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        ttft = (cfg.ttft_ms if cfg.ttft_ms is not None else cfg.interval_ms) / 1000.0
        step = cfg.interval_ms / 1000.0
        rid = f"pace-{self.stats.requests}"

        def frame(choices: list[dict[str, Any]], extra: dict[str, Any] | None = None) -> bytes:
            return sse_frame(rid, chat, cfg.model, choices, extra)

        if not stream:
            await asyncio.sleep(max(0.0, t0 + ttft + (n - 1) * step - loop.time()))
            text = "".join(f"tok{i} " for i in range(n))
            msg = {"index": 0, "finish_reason": "length"}
            msg.update(
                {"message": {"role": "assistant", "content": text}} if chat else {"text": text}
            )
            self.stats.tokens_sent += n
            return await self._json(
                writer, "200 OK", {"id": rid, "choices": [msg], "usage": usage}, ka
            )
        writer.write(response_head("200 OK", "text/event-stream", None, ka))
        if chat:
            writer.write(chunk(frame([ROLE_CHOICE])))
        await writer.drain()
        sent = self.sent_ns[rid] = []
        before = self.write_ns[rid] = []
        if isinstance(seed, int):
            self.seeds[rid] = seed
        self.received_ns[rid] = received_ns
        while len(self.sent_ns) > cfg.stamps_kept:
            old = next(iter(self.sent_ns))
            del self.sent_ns[old]
            self.seeds.pop(old, None)
            self.received_ns.pop(old, None)
            self.write_ns.pop(old, None)
        for i in range(n):
            delay = t0 + ttft + i * step - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            data = chunk(frame([choice(chat, f"tok{i} ", None)]))
            before.append(time.perf_counter_ns())
            writer.write(data)
            sent.append(time.perf_counter_ns())
            self.stats.tokens_sent += 1
            await writer.drain()
        tail = frame([choice(chat, None if chat else "", "length")])
        if include_usage:
            tail += frame([], {"usage": usage})
        tail += b"data: [DONE]\n\n"
        writer.write(chunk(tail) + chunk(b""))
        await writer.drain()

    def _answer(
        self, chat: bool, n: int, usage: dict[str, Any], include_usage: bool, ka: bool
    ) -> bytes:
        """A whole streamed answer (head, role frame, n token frames, tail), as bytes."""
        model = self.config.model

        def frame(choices: list[dict[str, Any]], extra: dict[str, Any] | None = None) -> bytes:
            return chunk(sse_frame("pace-burst", chat, model, choices, extra))

        parts = [response_head("200 OK", "text/event-stream", None, ka)]
        if chat:
            parts.append(frame([ROLE_CHOICE]))
        parts += [frame([choice(chat, f"tok{i} ", None)]) for i in range(n)]
        parts.append(frame([choice(chat, None if chat else "", "length")]))
        if include_usage:
            parts.append(frame([], {"usage": usage}))
        parts += [chunk(b"data: [DONE]\n\n"), chunk(b"")]
        return b"".join(parts)


def start_in_thread(
    config: PaceConfig, host: str = "127.0.0.1", port: int = 0, ssl: Any = None
) -> tuple[int, PaceServer, Callable[[], None]]:
    """Serve on a daemon thread; returns (port, server, stop). ``ssl``: serve HTTPS."""
    return serve_in_thread(PaceServer(config), "pace-server", host, port, ssl=ssl)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0 = any free port (printed)")
    ap.add_argument("--interval-ms", type=float, default=10.0, help="gap between tokens")
    ap.add_argument("--ttft-ms", type=float, default=None, help="first token delay")
    ap.add_argument("--tokens", type=int, default=64, help="tokens when max_tokens is absent")
    ap.add_argument("--concurrency", type=int, default=64, help="requests served at once")
    ap.add_argument(
        "--stamps-kept", type=int, default=STAMPS_KEPT, help="requests whose send times are kept"
    )
    ap.add_argument("--burst", action="store_true", help="write each answer at once")
    a = ap.parse_args(argv)
    cfg = PaceConfig(
        a.interval_ms, a.ttft_ms, a.tokens, a.concurrency, stamps_kept=a.stamps_kept, burst=a.burst
    )

    async def serve() -> None:
        server = PaceServer(cfg)
        port = await server.start(a.host, a.port)
        print(f"pace server on http://{a.host}:{port} (interval {cfg.interval_ms} ms)", flush=True)
        await asyncio.Event().wait()

    try:
        asyncio.run(serve())
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
