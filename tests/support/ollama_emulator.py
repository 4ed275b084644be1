"""An Ollama server emulator, written from Ollama's API documentation, serving a real model.

Ollama cannot be installed on the CI machines, so the Ollama engine is tested against
this. Generation is real: llama-cpp-python runs the GGUF in-process; the numbers Ollama
reports come from llama.cpp's own perf counters, as Ollama's do. Quirks kept:

- /api/chat and /api/generate stream NDJSON by default (``"stream": false`` for one
  object); durations are nanoseconds, only on the final ``done: true`` object;
- zero-valued fields are omitted (Go ``omitempty``): a prompt served from the prompt
  cache has no prompt_eval_count / prompt_eval_duration;
- ``keep_alive`` ("5m", seconds, 0 = unload after this request, negative = forever);
  a request with no messages / no prompt just loads (done_reason "load") or, with
  keep_alive 0, unloads (done_reason "unload");
- load_duration is the real model load time on a cold start;
- one request generates at a time (OLLAMA_NUM_PARALLEL=1), others wait;
- GET / says "Ollama is running"; /api/version, /api/tags, /api/ps (size, size_vram: 0
  here, no GPU; expires_at); unknown model → 404 ``{"error": "model ... not found"}``.
"""

from __future__ import annotations

import argparse
import codecs
import json
import re
import threading
import time
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

VERSION = "0.0.0-infertop-emulator"
DEFAULT_KEEP_ALIVE_S = 300.0


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")


def parse_keep_alive(v: Any) -> float:
    """Seconds; negative = forever. Accepts numbers and Go durations like "5m", "30s"."""
    if v is None:
        return DEFAULT_KEEP_ALIVE_S
    if isinstance(v, int | float) and not isinstance(v, bool):
        return float(v)
    m = re.fullmatch(r"\s*(-?\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*", str(v))
    if not m:
        raise ValueError(f"invalid keep_alive {v!r}")
    scale = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, None: 1}[m.group(2)]
    return float(m.group(1)) * scale


class LoadedModel:
    def __init__(self, llm: Any, load_ns: int) -> None:
        self.llm = llm
        self.load_ns = load_ns
        self.expires_at: float | None = None  # time.time(); None = never


class OllamaEmulator:
    def __init__(
        self,
        model_path: Path,
        model_name: str = "smollm2:135m",
        n_threads: int = 2,
        n_ctx: int = 2048,
        more_names: tuple[str, ...] = (),
    ) -> None:
        self.model_path = Path(model_path)
        self.model_name = model_name
        # more tags for the same GGUF (as `ollama cp` makes): /api/tags lists them all,
        # each answers; what a request named is kept in ``requested``
        self.more_names = tuple(more_names)
        self.requested: list[tuple[str, str]] = []  # (path, model) of each POST
        self.loaded_name: str | None = None  # the name the loaded model was last asked by
        self.n_threads = n_threads
        self.n_ctx = n_ctx
        self.loaded: LoadedModel | None = None
        self.gen_lock = threading.Lock()  # OLLAMA_NUM_PARALLEL=1
        self.loads = 0  # how many cold loads happened (tests read it)

    # --- model lifecycle ------------------------------------------------------------

    def names(self) -> tuple[str, ...]:
        return (self.model_name, *self.more_names)

    def full_name(self, name: str) -> str:
        """The listed name a request's name stands for ("smollm2" → "smollm2:135m")."""
        return next((n for n in self.names() if name in (n, n.split(":")[0])), name)

    def known(self, name: str | None) -> bool:
        if not name:
            return False
        return any(name == n or name == n.split(":")[0] for n in self.names())

    def _expire(self) -> None:
        m = self.loaded
        if m is not None and m.expires_at is not None and time.time() >= m.expires_at:
            self.unload()

    def ensure_loaded(self) -> int:
        """Load if needed; returns the load time in ns (cold) or the lookup time (warm)."""
        t0 = time.perf_counter_ns()
        self._expire()
        if self.loaded is None:
            import llama_cpp

            llm = llama_cpp.Llama(
                model_path=str(self.model_path),
                n_ctx=self.n_ctx,
                n_threads=self.n_threads,
                verbose=False,
            )
            self.loads += 1
            self.loaded = LoadedModel(llm, time.perf_counter_ns() - t0)
            return self.loaded.load_ns
        return time.perf_counter_ns() - t0

    def unload(self) -> None:
        m, self.loaded = self.loaded, None
        if m is not None:
            m.llm.close()

    def set_keep_alive(self, keep_alive_s: float) -> None:
        if self.loaded is None:
            return
        if keep_alive_s == 0:
            self.unload()
        elif keep_alive_s < 0:
            self.loaded.expires_at = None
        else:
            self.loaded.expires_at = time.time() + keep_alive_s

    # --- generation -----------------------------------------------------------------

    def prompt_tokens(self, llm: Any, messages: list[dict[str, Any]]) -> list[int]:
        from llama_cpp import llama_chat_format

        template = str((llm.metadata or {}).get("tokenizer.chat_template") or "")
        eos_id, bos_id = llm.token_eos(), llm.token_bos()
        fmt = llama_chat_format.Jinja2ChatFormatter(
            template=template,
            eos_token=llm._model.token_get_text(eos_id) if eos_id != -1 else "",
            bos_token=llm._model.token_get_text(bos_id) if bos_id != -1 else "",
        )
        result = fmt(messages=messages)  # type: ignore[arg-type]  # (OpenAI-style dicts)
        return list(
            llm.tokenize(result.prompt.encode(), add_bos=not result.added_special, special=True)
        )

    def generate(
        self, messages: list[dict[str, Any]], options: dict[str, Any], emit: Any
    ) -> dict[str, Any]:
        """Generate (caller holds gen_lock); ``emit(text)`` per token; returns the stats."""
        import llama_cpp

        t_start = time.perf_counter_ns()
        load_ns = self.ensure_loaded()
        assert self.loaded is not None
        llm = self.loaded.llm
        tokens = self.prompt_tokens(llm, messages)
        cached = 0
        for a, b in zip(llm._input_ids.tolist(), tokens):
            if a != b:
                break
            cached += 1
        ctx = llm._ctx.ctx
        llama_cpp.llama_perf_context_reset(ctx)
        num_predict = int(options.get("num_predict", 128))
        if num_predict < 0:
            num_predict = self.n_ctx - len(tokens)
        vocab = llm._model.vocab
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        n_out, reason = 0, "stop"
        gen = llm.generate(
            tokens,
            temp=float(options.get("temperature", 0.8)),
            top_p=float(options.get("top_p", 0.9)),
            reset=True,
        )
        for tok in gen:
            if llama_cpp.llama_vocab_is_eog(vocab, tok):
                break
            n_out += 1
            text = decoder.decode(llm.detokenize([tok]))
            if text:
                emit(text)
            if n_out >= num_predict:
                reason = "length"
                break
        gen.close()
        tail = decoder.decode(b"", final=True)
        if tail:
            emit(tail)
        perf = llama_cpp.llama_perf_context(ctx)
        stats: dict[str, Any] = {
            "done_reason": reason,
            "total_duration": time.perf_counter_ns() - t_start,
            "load_duration": load_ns,
            "prompt_eval_count": int(perf.n_p_eval),
            "prompt_eval_duration": int(perf.t_p_eval_ms * 1e6),
            "eval_count": n_out,
            "eval_duration": int(perf.t_eval_ms * 1e6),
        }
        if cached >= len(tokens) - 1:  # the whole prompt came from the cache
            stats["prompt_eval_count"] = 0
            stats["prompt_eval_duration"] = 0
        return {k: v for k, v in stats.items() if v not in (0, None, "")}  # Go omitempty


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, *args: Any) -> None:
        pass

    @property
    def emu(self) -> OllamaEmulator:
        return self.server.emulator

    def _send_json(self, status: int, obj: Any) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, msg: str) -> None:
        self._send_json(status, {"error": msg})

    def do_HEAD(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        if self.path == "/":
            data = b"Ollama is running"
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        elif self.path == "/api/version":
            self._send_json(200, {"version": VERSION})
        elif self.path == "/api/tags":
            self._send_json(200, {"models": [self._model_entry(n) for n in self.emu.names()]})
        elif self.path == "/api/ps":
            self._send_json(200, {"models": self._ps()})
        else:
            self._error(404, "404 page not found")

    def _model_entry(self, name: str | None = None) -> dict[str, Any]:
        st = self.emu.model_path.stat()
        name = name or self.emu.loaded_name or self.emu.model_name
        return {
            "name": name,
            "model": name,
            "modified_at": datetime.fromtimestamp(st.st_mtime, timezone.utc).isoformat(),
            "size": st.st_size,
            "digest": f"emulator-{st.st_size:x}",
            "details": {
                "format": "gguf",
                "family": "llama",
                "parameter_size": "135M",
                "quantization_level": "Q4_1",
            },
        }

    def _ps(self) -> list[dict[str, Any]]:
        emu = self.emu
        with emu.gen_lock:
            emu._expire()
            m = emu.loaded
            if m is None:
                return []
            entry = self._model_entry()
            entry.pop("modified_at")
            if m.expires_at is None:
                expires = "2318-11-29T00:00:00Z"  # "forever", as Ollama shows it
            else:
                expires = (
                    datetime.now(timezone.utc) + timedelta(seconds=m.expires_at - time.time())
                ).isoformat()
            entry.update({"expires_at": expires, "size_vram": 0, "context_length": emu.n_ctx})
            return [entry]

    def do_POST(self) -> None:
        n = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(n) or b"{}")
            assert isinstance(body, dict)
        except (ValueError, AssertionError):
            return self._error(400, "invalid request body")
        if self.path not in ("/api/chat", "/api/generate"):
            return self._error(404, "404 page not found")
        model = body.get("model")
        self.emu.requested.append((self.path, str(model)))
        if not model:
            return self._error(400, "model is required")
        if not self.emu.known(model):
            return self._error(404, f'model "{model}" not found, try pulling it first')
        self.emu.loaded_name = self.emu.full_name(str(model))
        try:
            keep_alive = parse_keep_alive(body.get("keep_alive"))
        except ValueError as e:
            return self._error(400, str(e))
        chat = self.path == "/api/chat"
        if chat:
            messages = body.get("messages") or []
        else:
            prompt = body.get("prompt") or ""
            messages = [{"role": "user", "content": prompt}] if prompt else []
        if not messages:
            return self._load_or_unload(model, keep_alive, chat)
        self._generate(model, messages, body, keep_alive, chat)

    def _load_or_unload(self, model: str, keep_alive: float, chat: bool) -> None:
        emu = self.emu
        with emu.gen_lock:
            if keep_alive == 0:
                emu.unload()
                reason = "unload"
            else:
                emu.ensure_loaded()
                emu.set_keep_alive(keep_alive)
                reason = "load"
        out: dict[str, Any] = {
            "model": model,
            "created_at": _now_iso(),
            "done": True,
            "done_reason": reason,
        }
        out.update({"message": {"role": "assistant", "content": ""}} if chat else {"response": ""})
        self._send_json(200, out)

    def _generate(
        self,
        model: str,
        messages: list[dict[str, Any]],
        body: dict[str, Any],
        keep_alive: float,
        chat: bool,
    ) -> None:
        stream = body.get("stream", True) is not False
        options = body.get("options") or {}

        def piece(text: str) -> dict[str, Any]:
            d: dict[str, Any] = {"model": model, "created_at": _now_iso()}
            d.update(
                {"message": {"role": "assistant", "content": text}} if chat else {"response": text}
            )
            d["done"] = False
            return d

        parts: list[str] = []
        if stream:
            self.send_response(200)
            self.send_header("Content-Type", "application/x-ndjson")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()

        def emit(text: str) -> None:
            if stream:
                self._chunk(json.dumps(piece(text)).encode() + b"\n")
            else:
                parts.append(text)

        with self.emu.gen_lock:
            try:
                stats = self.emu.generate(messages, options, emit)
            except (BrokenPipeError, ConnectionResetError):
                return
            finally:
                self.emu.set_keep_alive(keep_alive)
        final = piece("".join(parts))
        final["done"] = True
        final.update(stats)
        if stream:
            self._chunk(json.dumps(final).encode() + b"\n")
            self._chunk(b"")
        else:
            self._send_json(200, final)

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    emulator: OllamaEmulator


def start_in_thread(
    emulator: OllamaEmulator, host: str = "127.0.0.1", port: int = 0
) -> tuple[int, Any]:
    """Serve on a daemon thread; returns (port, stop)."""
    srv = _Server((host, port), Handler)
    srv.emulator = emulator
    th = threading.Thread(target=srv.serve_forever, name="ollama-emulator", daemon=True)
    th.start()

    def stop() -> None:
        srv.shutdown()
        srv.server_close()
        with emulator.gen_lock:
            emulator.unload()

    return int(srv.server_address[1]), stop


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Ollama API emulator backed by a GGUF model")
    ap.add_argument("--model", required=True, help="GGUF path")
    ap.add_argument("--name", default="smollm2:135m")
    ap.add_argument("--port", type=int, default=11434)
    a = ap.parse_args(argv)
    port, _stop = start_in_thread(OllamaEmulator(Path(a.model), a.name), port=a.port)
    print(f"ollama emulator on http://127.0.0.1:{port}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
