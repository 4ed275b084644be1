"""Discovery against real servers on free loopback ports, named to it through the same
port table a user sets (``[discovery] ports``): llama-server (one model, and router mode
with two), the Ollama emulator with several models, a plain HTTP server that is no LLM
server, a port that accepts and never answers, and a closed one. Checks what is found,
that only those loopback ports are contacted and never with a prompt, the models each
server lists, and that a model chosen is the one the next request names."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import ollama_emulator
from tests.support import real_servers as servers
from tui.config import parse_config
from tui.engines.base import EngineError, EngineSpec, GenerationRequest
from tui.engines.registry import create_engine
from tui.engines.servers.discovery import CLOSED, FOUND, NOT_LLM, SILENT, discover
from tui.engines.servers.server_models import list_server_models, ollama_models, openai_models

MORE_TAGS = ("smollm2:135m-instruct-q4_1", "tinychat:latest")


@pytest.fixture(scope="module")
def ollama_multi(smollm2_gguf: Path) -> Iterator[tuple[int, ollama_emulator.OllamaEmulator]]:
    """The Ollama emulator listing three models (tags of the same real GGUF)."""
    emu = ollama_emulator.OllamaEmulator(smollm2_gguf, n_threads=1, more_names=MORE_TAGS)
    port, stop = ollama_emulator.start_in_thread(emu)
    try:
        yield port, emu
    finally:
        stop()


@pytest.fixture(scope="module")
def router(smollm2_gguf: Path, server_logs: Path, tmp_path_factory) -> Iterator[int]:  # type: ignore[no-untyped-def]
    """llama-server in router mode over a folder of two models (links to one GGUF)."""
    models = tmp_path_factory.mktemp("router-models")
    for name in ("smol-a.gguf", "smol-b.gguf"):
        (models / name).symlink_to(smollm2_gguf)
    args = ["--models-dir", str(models)]
    with servers.running_llama_server(None, server_logs, args, "llama-server (router mode)") as sp:
        yield int(sp.url.rsplit(":", 1)[1])


@pytest.fixture(scope="module")
def plain_http(tmp_path_factory) -> Iterator[tuple[int, Path]]:  # type: ignore[no-untyped-def]
    """Python's own http.server on a folder with a page: an HTTP server, not an LLM one.
    Its log (one line per request) is the second item."""
    root = tmp_path_factory.mktemp("www")
    (root / "index.html").write_text("<html><body>my page</body></html>")
    port = servers.free_port()
    log = root.parent / f"http-{port}.log"
    with log.open("wb") as f:
        proc = subprocess.Popen(
            [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
            cwd=root,
            stdout=f,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.5).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "http.server did not start"
                time.sleep(0.1)
        yield port, log
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture(scope="module")
def silent_port() -> Iterator[int]:
    """A port that accepts connections (the kernel's backlog) and never answers."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    try:
        yield int(s.getsockname()[1])
    finally:
        s.close()


def _metric(url: str, name: str) -> float:
    status, body = servers._get(url + "/metrics")
    assert status == 200
    for line in body.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not in /metrics")


def test_discovery_finds_servers_and_leaves_the_rest_alone(
    llama_server, router, ollama_multi, plain_http, silent_port, monkeypatch
) -> None:
    ollama_port, emu = ollama_multi
    llama_port = int(llama_server.url.rsplit(":", 1)[1])
    plain_port, plain_log = plain_http
    closed_port = servers.free_port()
    table = f"""
[discovery]
ports = [{ollama_port}, {llama_port}, {router}, {plain_port}, {silent_port}, {closed_port}]
timeout_s = 1.0
"""
    cfg = parse_config(table, Path("infertop.toml"))
    prompt_tokens_before = _metric(llama_server.url, "llamacpp:prompt_tokens_total")
    posts_before = len(emu.requested)
    contacted: list[tuple[str, int]] = []
    real_connect = socket.create_connection

    def recording_connect(address, *args, **kwargs):  # type: ignore[no-untyped-def]
        contacted.append((address[0], int(address[1])))
        return real_connect(address, *args, **kwargs)

    monkeypatch.setattr(socket, "create_connection", recording_connect)
    t0 = time.monotonic()
    findings = discover(cfg.discovery.port_list(), cfg.discovery.timeout_s)
    took = time.monotonic() - t0
    monkeypatch.undo()

    by_port = {f.port: f for f in findings}
    assert [f.port for f in findings] == cfg.discovery.port_list()
    assert by_port[ollama_port].status == FOUND
    assert by_port[ollama_port].spec.name == f"ollama:{ollama_port}"  # type: ignore[union-attr]
    assert set(by_port[ollama_port].models) == {emu.model_name, *MORE_TAGS}
    assert by_port[llama_port].spec.name == f"llama-server:{llama_port}"  # type: ignore[union-attr]
    assert by_port[router].spec.name == f"llama-server:{router}"  # type: ignore[union-attr]
    assert by_port[router].models == ("smol-a", "smol-b")
    assert by_port[plain_port].status == NOT_LLM
    assert by_port[silent_port].status == SILENT
    assert by_port[closed_port].status == CLOSED
    # in parallel, each port bounded by its timeout: the silent one costs ~1 s, not more
    assert took < 8, f"discovery took {took:.1f} s"

    # only loopback, only the ports in the table
    assert contacted, "the recording saw no connection"
    assert {host for host, _ in contacted} == {"127.0.0.1"}
    assert {port for _, port in contacted} <= set(cfg.discovery.port_list())
    # never a prompt: no POST reached the emulator, no prompt token was processed
    assert len(emu.requested) == posts_before
    assert _metric(llama_server.url, "llamacpp:prompt_tokens_total") == prompt_tokens_before
    # the plain server was asked GETs only, and left alone after the probe said no
    requests = [ln for ln in plain_log.read_text().splitlines() if '"' in ln]
    assert requests and all('"GET /' in ln for ln in requests), requests


def test_discovery_off_the_table_contacts_nothing(monkeypatch) -> None:
    contacted: list[object] = []
    monkeypatch.setattr(socket, "create_connection", lambda *a, **k: contacted.append(a))
    cfg = parse_config("[discovery]\nports = []\n", Path("x.toml"))
    assert discover(cfg.discovery.port_list(), 0.5) == []
    assert contacted == []


def test_skip_urls_of_configured_engines(ollama_multi) -> None:
    port, _ = ollama_multi
    assert discover([port], 1.0, skip_urls=[f"http://127.0.0.1:{port}/"]) == []


def test_models_each_server_lists(llama_server, router, ollama_multi) -> None:
    port, emu = ollama_multi
    ollama = EngineSpec("o", "ollama", url=f"http://127.0.0.1:{port}")
    models = {m.name: m for m in list_server_models(ollama)}
    assert set(models) == {emu.model_name, *MORE_TAGS}
    m = models["tinychat:latest"]
    assert m.quantization == "Q4_1" and m.parameters == "135M"
    assert m.size_bytes == emu.model_path.stat().st_size

    single = list_server_models(EngineSpec("l", "llama-server", url=llama_server.url))
    assert len(single) == 1
    assert single[0].context == 2048 and single[0].quantization == "Q4_1"
    assert single[0].parameters == "135M"

    routed = list_server_models(EngineSpec("r", "llama-server", url=f"http://127.0.0.1:{router}"))
    assert [(m.name, m.loaded) for m in routed] == [("smol-a", "unloaded"), ("smol-b", "unloaded")]


def test_ollama_ps_says_which_model_is_loaded_and_where(ollama_multi) -> None:
    port, _emu = ollama_multi
    spec = EngineSpec("o", "ollama", url=f"http://127.0.0.1:{port}", model="tinychat:latest")
    engine = create_engine(spec)
    asyncio.run(_answer(engine, "Hi"))
    models = {m.name: m for m in list_server_models(spec)}
    assert models["tinychat:latest"].loaded == "CPU"  # size_vram 0: all of it in RAM
    assert models["tinychat:latest"].context == 2048
    assert models[MORE_TAGS[0]].loaded is None


async def _answer(engine, prompt: str) -> str:  # type: ignore[no-untyped-def]
    from tui.core.events import Failed, TextChunk

    await engine.load()
    text = []
    try:
        async for ev in engine.stream(GenerationRequest.from_prompt(prompt, max_tokens=4)):
            if isinstance(ev, Failed):
                raise AssertionError(ev.message)
            if isinstance(ev, TextChunk):
                text.append(ev.text)
    finally:
        await engine.close()
    return "".join(text)


def test_router_runs_the_model_the_request_names(router) -> None:
    """llama-server's router starts the model a request names: after one request that
    names smol-b, /v1/models says smol-b is loaded and smol-a is not."""
    url = f"http://127.0.0.1:{router}"
    spec = EngineSpec("r", "llama-server", url=url, model="smol-b", read_timeout_s=120)
    asyncio.run(_answer(create_engine(spec), "Hi"))
    state = {m.name: m.loaded for m in list_server_models(EngineSpec("r", "llama-server", url=url))}
    assert state == {"smol-a": "unloaded", "smol-b": "loaded"}


def test_model_lists_are_bounded_and_typed() -> None:
    """Hostile /api/tags and /v1/models: wrong types, huge lists, long names, control
    characters (kept as data here; every place that shows them filters them)."""
    huge = {"models": [{"name": f"m{i}", "size": i} for i in range(100_000)]}
    assert len(ollama_models(huge, None)) == 500
    odd = {
        "models": [
            "not a dict",
            {"name": None},
            {"name": "x" * 10_000, "size": -5, "details": "nope"},
            {"name": "\x1b]52;c;AAAA\x07evil", "size": True, "details": {"quantization_level": 4}},
        ]
    }
    got = ollama_models(odd, {"models": [{"name": 7}, "x"]})
    assert [len(m.name) for m in got] == [200, 16]
    assert all(m.size_bytes is None and m.quantization is None for m in got)
    assert openai_models({"data": [{"id": 1}, {"id": "a", "max_model_len": "9"}, 5]})[0].name == "a"
    assert openai_models([1, 2, 3]) == [] and openai_models({"data": "x"}) == []
    t0 = time.perf_counter()
    openai_models({"data": [{"id": "m", "meta": {"n_params": 10**30}}] * 1_000_000})
    assert time.perf_counter() - t0 < 2


def test_a_silent_server_costs_one_timeout(silent_port) -> None:
    t0 = time.monotonic()
    with pytest.raises(EngineError):
        list_server_models(EngineSpec("s", "vllm", url=f"http://127.0.0.1:{silent_port}"), 0.5)
    assert time.monotonic() - t0 < 3


def test_doctor_lists_the_servers_found(ollama_multi, plain_http, tmp_path) -> None:
    import os

    port, _ = ollama_multi
    plain_port, _log = plain_http
    closed = servers.free_port()
    cfg = tmp_path / "c.toml"
    cfg.write_text(f"[discovery]\nports = [{port}, {plain_port}, {closed}]\n")
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(root), XDG_CONFIG_HOME=str(tmp_path))
    out = subprocess.run(
        [sys.executable, "-m", "tui", "--config", str(cfg), "doctor", "--no-load"],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
        cwd=tmp_path,
    )
    lines = out.stdout.splitlines()
    found = [ln for ln in lines if "local server " in ln]
    assert len(found) == 1 and found[0].startswith("[ok]"), out.stdout
    assert f"ollama:{port}: ollama at http://127.0.0.1:{port}" in found[0]
    summary = next(ln for ln in lines if "local servers" in ln)
    assert f"1 found on 127.0.0.1 ports {port}, {plain_port}, {closed}" in summary
    assert f"not an LLM server: {plain_port}" in summary and f"closed: {closed}" in summary


def test_vllm_is_found_and_says_its_context(vllm_server) -> None:
    """vLLM's CPU server (the session's one: ~70 s to start): found as vllm:PORT, and
    /v1/models's max_model_len is the context the palette shows."""
    port = int(vllm_server.url.rsplit(":", 1)[1])
    (finding,) = discover([port], 2.0)
    assert finding.status == FOUND and finding.spec is not None
    assert finding.spec.name == f"vllm:{port}" and finding.models == ("smollm2",)
    (model,) = list_server_models(finding.spec)
    assert (model.name, model.context) == ("smollm2", 1024)
    assert model.details() == "ctx 1024"


def test_the_default_table_finds_servers_on_their_default_ports(
    smollm2_gguf: Path, server_logs: Path
) -> None:
    """No [discovery] in config: the Ollama emulator on 11434 and llama-server on 8080
    where those ports are free (each else on a free port named in the table instead), all
    found as kind:port."""
    cfg = parse_config("", Path("infertop.toml"))
    table = cfg.discovery.port_list()
    assert table[:3] == [11434, 8080, 8000]
    emu = ollama_emulator.OllamaEmulator(smollm2_gguf, n_threads=1)
    ollama_port = 11434 if servers.port_is_free(11434) else 0
    ollama_port, stop = ollama_emulator.start_in_thread(emu, port=ollama_port)
    llama_port = 8080 if servers.port_is_free(8080) else servers.free_port()
    try:
        ls = servers.start_llama_server(smollm2_gguf, server_logs, port=llama_port)
    except servers.ServerStartError as e:
        stop()
        servers.unavailable("llama-server on its default port", str(e))
    try:
        extra = [p for p in (ollama_port, llama_port) if p not in table]
        sys.stderr.write(f"\n[default table; servers on {ollama_port}, {llama_port}]\n")
        findings = discover(table + extra, 1.0)
    finally:
        ls.stop()
        stop()
    names = {f.spec.name for f in findings if f.spec is not None}
    assert {f"ollama:{ollama_port}", f"llama-server:{llama_port}"} <= names
    assert {f.port for f in findings} == set(table + extra)
