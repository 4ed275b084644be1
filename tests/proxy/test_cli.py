"""``infertop proxy`` as a command: its refusals, and the headless process itself with
``curl -N`` through it, ``--log`` and ``--events`` (no credential in either)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys

import pytest

from tests.support.sched import kernel_keeps_slices
from tui.core.sched_slice import PROXY_SLICE_NS, get_attr
from tui.core.session import read_session

SECRET = "sk-cli-SECRET-9"


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tui", "proxy", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


@pytest.mark.parametrize(
    "args, words",
    [
        (["--listen", "0.0.0.0:0"], "add --public"),
        (["--listen", "[::]:8800"], "add --public"),
        (["--listen", "nonsense"], "HOST:PORT"),
        (["--listen", "127.0.0.1:99999"], "HOST:PORT"),
    ],
)
def test_listening_beyond_loopback_needs_public(pace, cli_env, args, words) -> None:
    url, _ = pace
    r = _run(["--upstream", url, "--kind", "openai", *args], cli_env)
    assert r.returncode == 2 and words in r.stderr, r.stderr


@pytest.mark.parametrize("value", ["500", "-1", "nan"])
def test_a_slice_out_of_range_is_refused(pace, cli_env, value: str) -> None:
    url, _ = pace
    r = _run(["--upstream", url, "--kind", "openai", f"--slice-ms={value}"], cli_env)
    assert r.returncode == 2 and "--slice-ms" in r.stderr, r.stderr


@pytest.mark.parametrize(
    "upstream, words",
    [
        ("https://api.example.com", "http:// URL"),
        ("http://user:pw@127.0.0.1:1", "no credentials"),
        ("ftp://x", "http:// URL"),
    ],
)
def test_upstreams_it_refuses(cli_env, upstream: str, words: str) -> None:
    r = _run(["--upstream", upstream], cli_env)
    assert r.returncode == 2 and words in r.stderr and "pw" not in r.stderr


def test_an_upstream_that_cannot_be_detected_says_so(cli_env, closed_port) -> None:
    r = _run(["--upstream", closed_port], cli_env)
    assert r.returncode == 1 and "connection refused" in r.stderr and "--kind" in r.stderr


@pytest.fixture
def closed_port() -> str:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def _curl(url: str) -> bytes:
    body = json.dumps({"model": "pace", "stream": True, "max_tokens": 6, "messages": []})
    out = subprocess.run(
        ["curl", "-sN", "-H", f"Authorization: Bearer {SECRET}", "-H",
         "Content-Type: application/json", "-d", body, url + "/v1/chat/completions?k=" + SECRET],
        capture_output=True, timeout=30, check=True,
    ).stdout  # fmt: skip
    return re.sub(rb"pace-\d+", b"pace-N", out)


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl not installed")
def test_the_headless_proxy_with_curl_log_and_events(pace, cli_env, tmp_path) -> None:
    url, _ = pace
    events = tmp_path / "events.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tui", "proxy", "--upstream", url + "/v1", "--listen",
         "127.0.0.1:0", "--log", "--events", str(events)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("infertop proxy listening on http://127.0.0.1:"), line
        proxy = line.split()[-1]
        direct, through = _curl(url), _curl(proxy)
        assert through == direct and through.endswith(b"data: [DONE]\n\n")
        slices = {get_attr(int(t))[5] for t in os.listdir(f"/proc/{proc.pid}/task")}
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert "→ openai at " + url in err  # detected (the /v1 taken off the URL)
    logged = [x for x in err.splitlines() if "/v1/chat/completions" in x]
    assert len(logged) == 1 and " 200 done " in logged[0] and "out=~6" in logged[0]
    assert SECRET not in err
    # every thread of the proxy forwards with the short slice it asked for, and it says so
    if kernel_keeps_slices():
        assert slices == {PROXY_SLICE_NS}
        assert "scheduler slice: 0.1 ms, asked for with sched_setattr (SCHED_OTHER)" in err
    else:
        assert "scheduler slice: the kernel's default: " in err
    (rec,) = read_session(events).records
    assert rec["metrics"]["output_tokens"] == 6 and SECRET not in events.read_text()


def test_watch_needs_a_plain_http_url_and_belongs_to_the_ui(cli_env) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "tui", "--watch", "https://box:8800"],
        capture_output=True, text=True, env=cli_env, timeout=60,
    )  # fmt: skip
    assert r.returncode == 2 and "plain http://" in r.stderr
    r = subprocess.run(
        [sys.executable, "-m", "tui", "--watch", "http://127.0.0.1:1", "proxy", "--upstream", "x"],
        capture_output=True, text=True, env=cli_env, timeout=60,
    )  # fmt: skip
    assert r.returncode == 2 and "--watch before 'proxy' is the terminal UI's" in r.stderr
