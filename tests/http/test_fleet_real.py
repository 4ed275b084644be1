"""The fleet against the real servers: llama-server and vLLM read directly, and read back
through a real Prometheus (Debian's 2.42, started here) that scrapes them; Ollama (the
emulator) and a generic OpenAI-compatible server (the pace server) read directly.

vLLM comes from the session fixture (started once, 65-80 s) that test_vllm.py uses too.
The DCGM exporter beside them is a fixture (tests/support/fleet_fixture.py): the real one
needs an NVIDIA GPU.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import httpx
import pytest

from tests.support import fleet_fixture as ff
from tests.support import prometheus_server as ps
from tui.fleet.poller import Fleet, fleet_endpoints
from tui.transport.prometheus import parse

pytestmark = [pytest.mark.engine, pytest.mark.vllm, pytest.mark.timeout(900)]


def _ask(url: str, model: str | None = None) -> None:
    """One short answer (8 tokens), waited for."""
    body = {"messages": [{"role": "user", "content": "Name a colour."}], "max_tokens": 8}
    if model:
        body["model"] = model
    r = httpx.post(url + "/v1/chat/completions", json=body, timeout=120)
    assert r.status_code == 200, r.text


def _vllm_finished(url: str) -> float:
    """Requests vLLM counts as finished (its e2e latency histogram's count)."""
    text = httpx.get(url + "/metrics", timeout=10).text
    scrape = parse(text)
    return scrape.total("vllm:e2e_request_latency_seconds_count") or 0.0


def _wait(ok: Callable[[], bool], what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not ok():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout_s} s for {what}")
        time.sleep(0.05)


def _rows(snap):  # type: ignore[no-untyped-def]
    return {r.kind: r for r in snap.rows}


def _check_llama(r, smollm2_gguf) -> None:  # type: ignore[no-untyped-def]
    assert r.up and r.error is None
    assert r.running == 0 and r.waiting == 0  # idle again
    assert r.gen_tps > 0 and r.itl_mean_ms > 0  # 8 tokens in the window
    assert r.prefix_cache_hit_pct is not None  # its prompt was looked up
    assert r.kv_cache_pct is None and r.ttft_p50_ms is None  # llama-server has no such series


def _check_vllm(r) -> None:  # type: ignore[no-untyped-def]
    assert r.up and r.error is None and r.model == "smollm2"
    assert r.running == 0 and r.waiting == 0
    assert r.gen_tps > 0
    assert r.ttft_p50_ms > 0 and r.ttft_p90_ms >= r.ttft_p50_ms and r.itl_p50_ms > 0
    assert r.kv_cache_pct is not None and 0 <= r.kv_cache_pct <= 100
    assert r.prefix_cache_hit_pct is not None and 0 <= r.prefix_cache_hit_pct <= 100


def test_direct_scrapes_of_llama_server_and_vllm(llama_server, vllm_server, smollm2_gguf) -> None:
    fleet = Fleet(fleet_endpoints([llama_server.url, vllm_server.url], {}), timeout_s=5.0)
    try:
        first = _rows(fleet.refresh())
        assert set(first) == {"llama-server", "vllm"} and first["vllm"].gen_tps is None
        _ask(llama_server.url)
        before = _vllm_finished(vllm_server.url)
        _ask(vllm_server.url, "smollm2")
        # vLLM records a finished request just after its last chunk: wait until it has
        _wait(lambda: _vllm_finished(vllm_server.url) > before, "vLLM to count the answer")
        rows = _rows(fleet.refresh())
    finally:
        fleet.close()
    _check_llama(rows["llama-server"], smollm2_gguf)
    assert str(rows["llama-server"].model).endswith(".gguf")  # from its /v1/models
    _check_vllm(rows["vllm"])
    assert all(r.source == "scrape" and r.gpus is None for r in rows.values())


def test_ollama_and_generic_openai_rows(ollama_emu, pace) -> None:
    url, emu = ollama_emu
    emu.ensure_loaded()
    fleet = Fleet(fleet_endpoints([url, pace], {}))
    try:
        rows = _rows(fleet.once(gap_s=0.2))
    finally:
        fleet.close()
    ollama, openai = rows["ollama"], rows["openai"]
    assert ollama.up and ollama.model == emu.model_name  # /api/ps: what is loaded
    assert openai.up and openai.model == "pace"  # /v1/models
    for r in (ollama, openai):  # nothing else is reported, so nothing else is shown
        assert all(r.to_json()[k] is None for k in ("running", "gen_tps", "ttft_p50_ms"))


@pytest.fixture(scope="module")
def prom_on_real(llama_server, vllm_server, tmp_path_factory) -> Iterator[ps.Process]:
    ps.require_binaries(node_exporter=False)
    dcgm = ff.FixtureFleet([ff.Profile("dcgm", 0, host="fixture-gpu-host", gpus=1)]).start()
    addr = [s.url.removeprefix("http://") for s in (llama_server, vllm_server)]
    jobs = [ps.Job("llm", addr), ps.Job("dcgm", [dcgm.urls[0].removeprefix("http://")])]
    p = ps.start_prometheus(jobs, tmp_path_factory.mktemp("prom-real"))
    try:
        ps.wait_targets_up(p.url, 3)
        yield p
    finally:
        p.stop()
        dcgm.stop()


def test_prometheus_reads_the_real_servers_back(
    prom_on_real, llama_server, vllm_server, smollm2_gguf
) -> None:
    _ask(llama_server.url)
    _ask(vllm_server.url, "smollm2")
    # Prometheus scrapes every second: wait until a scrape has both answers (their tokens
    # in the window) and both servers idle again, not for as long as that ought to take
    ps.wait_until(
        prom_on_real.url,
        "sum(increase(llamacpp:tokens_predicted_total[30s])) > 0"
        " and sum(increase(vllm:generation_tokens_total[30s])) > 0"
        " and sum(vllm:num_requests_running) == 0"
        " and sum(llamacpp:requests_processing) == 0",
    )
    fleet = Fleet([], prom_on_real.url, window_s=30)
    try:
        snap = fleet.refresh()
    finally:
        fleet.close()
    assert snap.prometheus_error is None and snap.queries == 28  # targets + 27 columns
    rows = _rows(snap)
    assert set(rows) == {"llama-server", "vllm"}  # the DCGM exporter is hardware, not a row
    assert rows["llama-server"].url == llama_server.url and rows["vllm"].url == vllm_server.url
    _check_llama(rows["llama-server"], smollm2_gguf)
    _check_vllm(rows["vllm"])
    for r in rows.values():  # both on 127.0.0.1, the DCGM fixture's instance host
        assert r.source == "prometheus" and r.gpus is not None and len(r.gpus) == 1
        assert r.gpus[0].host == "fixture-gpu-host" and r.gpus[0].power_w == 300.5
