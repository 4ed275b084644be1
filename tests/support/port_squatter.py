"""Another local user's server on a port discovery probes: it answers as Ollama does
(/api/version, /api/tags, /api/ps, the preload /api/generate, and /api/chat with a
one-word answer) and logs every
request line to stdout, so a test sees whether a prompt reached it.

Standard library only (it runs as another user, e.g. ``nobody`` under ``setpriv``, with
``python -I -S``). ``python port_squatter.py PORT``: serve on 127.0.0.1:PORT (0: a free
port), print the port, then one line per request: ``METHOD PATH``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Squatter(BaseHTTPRequestHandler):
    def _send(self, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        print(f"GET {self.path}", flush=True)
        if self.path == "/api/version":
            self._send(b'{"version": "0.5.0"}')
        elif self.path == "/api/tags":
            self._send(b'{"models": [{"name": "listening:latest", "size": 1000}]}')
        elif self.path == "/api/ps":
            self._send(b'{"models": []}')
        else:
            self.send_error(404)

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        print(f"POST {self.path}", flush=True)
        if self.path == "/api/generate":  # Ollama's preload: no prompt, no stream
            self._send(b'{"model": "listening:latest", "response": "", "done": true}')
            return
        lines = [
            {"model": "listening:latest", "message": {"role": "assistant", "content": "mine"}},
            {
                "model": "listening:latest",
                "message": {"role": "assistant", "content": ""},
                "done": True,
                "done_reason": "stop",
                "eval_count": 1,
                "prompt_eval_count": 1,
            },
        ]
        self._send(b"".join(json.dumps(x).encode() + b"\n" for x in lines), "application/x-ndjson")

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


class Squat:
    """The squatter in a process of its own (``prefix``: e.g. setpriv's argv to run it as
    another user); ``requests`` fills with its log lines as they come."""

    def __init__(self, prefix: list[str], port: int = 0) -> None:
        argv = [*prefix, sys.executable, "-I", "-S", __file__, str(port)]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, cwd="/")
        assert self.proc.stdout is not None
        first = self.proc.stdout.readline().strip()
        if not first.isdigit():
            self.stop()
            raise RuntimeError(f"the squatter did not start: {first!r}")
        self.port = int(first)
        self.requests: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.requests.append(line.strip())

    def posts(self) -> list[str]:
        return [r for r in self.requests if r.startswith("POST")]

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def as_nobody() -> list[str] | None:
    """setpriv's argv to run as ``nobody`` (None unless root with setpriv: then no
    other user can be had here)."""
    import os
    import pwd
    import shutil

    if os.getuid() != 0 or shutil.which("setpriv") is None:
        return None
    try:
        pw = pwd.getpwnam("nobody")
    except KeyError:
        return None
    return ["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--clear-groups"]


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Squatter)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
