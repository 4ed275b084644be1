"""Transport settings: TLS verification (on by default), API key and extra headers."""

from __future__ import annotations

import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import pace_server
from tests.support.stream_check import collect
from tui.engines.base import EngineSpec, GenerationRequest
from tui.engines.http.openai_compat import OpenAICompatEngine
from tui.transport.http_calls import HTTPX_STAMPS, KERNEL_STAMPS

REQ = GenerationRequest.from_prompt("a b", max_tokens=3)


@pytest.fixture(scope="module")
def https_pace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The pace server over HTTPS with a self-signed certificate (made by openssl)."""
    d: Path = tmp_path_factory.mktemp("tls")
    key, cert = d / "key.pem", d / "cert.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    port, _srv, stop = pace_server.start_in_thread(
        pace_server.PaceConfig(interval_ms=1, ttft_ms=1), ssl=ctx
    )
    try:
        yield f"https://127.0.0.1:{port}"
    finally:
        stop()


async def test_tls_is_verified_by_default(https_pace: str) -> None:
    spec = EngineSpec(name="t", kind="openai", url=https_pace, model="pace")
    assert spec.verify_tls is True
    r = await collect(OpenAICompatEngine(spec), REQ)
    assert r.failed is not None and r.failed.kind == "connect"
    assert r.failed.message.startswith("TLS certificate of 127.0.0.1:")
    assert "verify_tls = false" in r.failed.message


async def test_tls_verification_can_be_turned_off(https_pace: str) -> None:
    spec = EngineSpec(name="t", kind="openai", url=https_pace, model="pace", verify_tls=False)
    r = await collect(OpenAICompatEngine(spec), REQ)
    assert r.failed is None and r.metrics.output_tokens == 3
    assert r.timeline.stamp_source == HTTPX_STAMPS  # https: httpx, read-return times


def test_insecure_flag_accepts_a_self_signed_server_and_says_what_it_turns_off(
    https_pace: str, tmp_path: Path
) -> None:
    """`--url` of a self-signed server: refused with a pointer to --insecure; accepted with
    it (detection and the request both skip verification); --help says what it turns off."""
    import json
    import os
    import sys

    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, INFERTOP_CONFIG="", PYTHONPATH=str(root))
    cmd = [sys.executable, "-m", "tui", "run", "--url", https_pace, "--prompt", "a b"]
    refused = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
    assert refused.returncode != 0 and "--insecure" in refused.stderr
    ok = subprocess.run(
        [*cmd, "--insecure", "--max-tokens", "3", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["output_tokens"] == 3
    helptext = subprocess.run(
        [sys.executable, "-m", "tui", "run", "--help"], capture_output=True, text=True, env=env
    ).stdout
    assert "--insecure" in helptext and "checking OFF" in " ".join(helptext.split())


async def test_each_request_records_how_it_was_stamped(monkeypatch) -> None:
    """Plain http: kernel receive stamps (Linux), also with a proxy variable set when
    NO_PROXY covers the host; the session log and reports carry the same words."""
    import sys

    port, _srv, stop = pace_server.start_in_thread(pace_server.PaceConfig(interval_ms=1))
    url = f"http://127.0.0.1:{port}"
    expected = KERNEL_STAMPS if sys.platform.startswith("linux") else None
    try:
        spec = EngineSpec(name="t", kind="openai", url=url, model="pace")
        r = await collect(OpenAICompatEngine(spec), REQ)
        assert r.failed is None
        if expected:
            assert r.timeline.stamp_source == expected
        assert r.timeline.to_dict()["stamp_source"] == r.timeline.stamp_source
        monkeypatch.setenv("HTTP_PROXY", "http://proxy.invalid:3128")
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        r = await collect(OpenAICompatEngine(spec), REQ)
        assert r.failed is None  # not sent to the (unreachable) proxy
        if expected:
            assert r.timeline.stamp_source == expected
    finally:
        stop()


async def test_api_key_and_extra_headers_are_sent(monkeypatch) -> None:
    port, srv, stop = pace_server.start_in_thread(pace_server.PaceConfig(interval_ms=1))
    try:
        monkeypatch.setenv("INFERTOP_TEST_PACE_KEY", "sekrit")
        spec = EngineSpec(
            name="t",
            kind="openai",
            url=f"http://127.0.0.1:{port}",
            api_key_env="INFERTOP_TEST_PACE_KEY",
            headers={"X-Trace": "abc"},
        )
        r = await collect(OpenAICompatEngine(spec), REQ)
        assert r.failed is None
        h = srv.stats.last_headers
        assert h["authorization"] == "Bearer sekrit" and h["x-trace"] == "abc"
    finally:
        stop()
