"""Rows 7 and 9: every scrape has a byte cap and an overall deadline, and odd answers
from Prometheus or a probed server are one line, never a traceback.

A dripping endpoint (a byte every 50 ms: no per-read timeout fires) and a 1 GiB one, read
by the Prometheus text scraper (exporters, /metrics, /slots, /props, /api/ps), by
``fleet --once`` directly (detection, then scrapes) and through the Prometheus API; a
Prometheus whose answers have odd shapes or are nested 100,000 deep; a server probed by
``run --url`` that answers so. On main the drips never ended and the shapes escaped as
tracebacks.
"""

from __future__ import annotations

import re
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

import pytest

from tui.transport.prometheus import ScrapeError, get_text

SLACK_S = 25.0


def _scrape(url: str, timeout_s: float) -> tuple[str, float]:
    """(the ScrapeError's text, seconds taken); fails if it runs past the slack."""
    t0 = time.monotonic()
    pool = ThreadPoolExecutor(1)  # (not "with": its exit would wait for a stuck scrape)
    fut = pool.submit(get_text, url, timeout_s)
    try:
        fut.result(timeout=timeout_s + SLACK_S)
    except ScrapeError as e:
        return str(e), time.monotonic() - t0
    except FutureTimeout:
        pytest.fail(f"the scrape of {url} ran past {timeout_s + SLACK_S:.0f} s")
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    pytest.fail("the hostile scrape succeeded")


@pytest.mark.parametrize("mode", ["drip", "drip-head", "huge", "endless"])
def test_prometheus_scrape_ends_by_its_deadline(hostile, mode) -> None:
    why, took = _scrape(f"{hostile}/{mode}/metrics", 1.5)
    assert ("ReadTimeout" in why) if mode.startswith("drip") else ("larger than" in why), why


def _fleet(launcher, env, *args):  # type: ignore[no-untyped-def]
    t0 = time.monotonic()
    try:
        p = subprocess.run(
            [*launcher, "fleet", "--once", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("fleet --once still running after 60 s")
    assert "Traceback" not in p.stderr, p.stderr
    return p, time.monotonic() - t0


def test_fleet_once_shows_dripping_and_huge_endpoints_down(hostile, launcher, clean_env) -> None:
    p, _ = _fleet(
        launcher,
        clean_env,
        "--gap",
        "0.2",
        "--timeout",
        "1",
        "--url",
        f"{hostile}/drip",
        "--url",
        f"{hostile}/huge",
        "--url",
        f"{hostile}/endless",
    )
    assert p.returncode == 0, p.stderr
    rows = [ln for ln in p.stdout.splitlines() if re.match(r"127\.0\.0\.1:\d+ +(up|down) ", ln)]
    assert len(rows) == 3 and all(" down " in ln for ln in rows), p.stdout
    assert "timed out" in p.stdout or "no response" in p.stdout, p.stdout
    assert "larger than 8388608 bytes: refused" in p.stdout, p.stdout


def test_fleet_once_through_a_dripping_prometheus(hostile, launcher, clean_env) -> None:
    p, _ = _fleet(launcher, clean_env, "--timeout", "1", "--prometheus", f"{hostile}/drip")
    assert p.returncode == 0 and "prometheus: Prometheus:" in p.stdout, p.stdout + p.stderr


@pytest.mark.parametrize("mode", ["prom-shapes", "prom-deep"])
def test_fleet_once_with_odd_prometheus_answers(hostile, launcher, clean_env, mode) -> None:
    p, _ = _fleet(launcher, clean_env, "--prometheus", f"{hostile}/{mode}")
    assert p.returncode == 0, p.stderr
    if mode == "prom-deep":
        assert "not the Prometheus API" in p.stdout, p.stdout
    else:  # the one well-formed target and its sample are kept; the rest is skipped
        assert "10.0.0.7:8000" in p.stdout and "vllm" in p.stdout, p.stdout


def test_a_probed_server_nested_deep_is_one_line(hostile, launcher, clean_env) -> None:
    p = subprocess.run(
        [*launcher, "run", "--url", f"{hostile}/prom-deep", "--prompt", "hi"],
        env=clean_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode != 0 and "Traceback" not in p.stderr, p.stderr
    assert "not an LLM server infertop recognises" in p.stderr


def test_json_nested_deep_is_an_error_everywhere_it_is_read(hostile) -> None:
    """llama-server's /props, Ollama's /api/ps and an agent line, each ``[`` x 100,000:
    each reader says the answer is not what it expected (on main: RecursionError)."""
    from tui.telemetry.remote.agent_lines import AgentLineError, sample_from_line
    from tui.telemetry.servers.llamacpp_metrics import total_slots
    from tui.telemetry.servers.ollama_ps import loaded_models

    deep = f"{hostile}/prom-deep"
    with pytest.raises(ValueError, match="nested too deeply"):
        total_slots(deep)
    with pytest.raises(ScrapeError, match="did not return JSON"):
        loaded_models(deep)
    with pytest.raises(AgentLineError, match="not an agent line"):
        sample_from_line("[" * 100_000, "ssh://box", 0.0)
