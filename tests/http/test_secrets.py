"""Secrets stay secret: credentials in a URL, API keys, headers; session logs are private.

``http://user:pass@host`` is turned into an Authorization header where the spec is made
(EngineSpec), so the password and its Basic token appear in no engine name, report, session
log, ``run --json`` output or error message — while the server still gets them.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import pace_server
from tui.core.session import SessionRecorder
from tui.engines.base import EngineSpec
from tui.transport.access import redact_url, split_credentials

ROOT = Path(__file__).resolve().parents[2]
SECRET = "s3cr3t-pw"
BASIC = base64.b64encode(f"alice:{SECRET}".encode()).decode()


def leaks(text: str) -> bool:
    return SECRET in text or BASIC in text


def env() -> dict[str, str]:
    return dict(os.environ, INFERTOP_CONFIG="", PYTHONPATH=str(ROOT))


def test_credentials_leave_the_url_for_a_header() -> None:
    spec = EngineSpec("e", "openai", url=f"http://alice:{SECRET}@127.0.0.1:9/v1")
    assert spec.url == "http://127.0.0.1:9/v1"
    assert spec.headers == {"Authorization": f"Basic {BASIC}"}
    # an explicit Authorization header or api_key_env wins over URL credentials
    keyed = EngineSpec("e", "openai", url=f"http://alice:{SECRET}@h:1", api_key_env="K")
    assert keyed.url == "http://h:1" and "Authorization" not in keyed.headers
    assert split_credentials("http://h:1/x") == ("http://h:1/x", None)
    assert redact_url(f"http://alice:{SECRET}@h:1/v1?q=1") == "http://alice:***@h:1/v1?q=1"
    assert redact_url("https://tok123@h/") == "https://***@h/"


@pytest.fixture
def pace():  # type: ignore[no-untyped-def]
    port, server, stop = pace_server.start_in_thread(pace_server.PaceConfig(interval_ms=1))
    try:
        yield port, server
    finally:
        stop()


def test_run_json_keeps_url_credentials_out_but_sends_them(pace) -> None:  # type: ignore[no-untyped-def]
    port, server = pace
    url = f"http://alice:{SECRET}@127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "tui", "run", "--url", url, "--prompt", "a b", "--json"]
    out = subprocess.run([*cmd, "--max-tokens", "3"], capture_output=True, text=True, env=env())
    assert out.returncode == 0, out.stderr
    assert not leaks(out.stdout + out.stderr)
    assert json.loads(out.stdout)["engine"] == f"openai@127.0.0.1:{port}"
    assert server.stats.last_headers["authorization"] == f"Basic {BASIC}"


def test_errors_do_not_echo_url_credentials() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://alice:{SECRET}@127.0.0.1:{port}"
    for args in (
        ["run", "--url", url, "--prompt", "hi"],
        ["bench", "--url", url, "--runs", "1", "--out", "/tmp/infertop-never-written"],
        ["doctor", "--no-load", "--url", url],
    ):
        out = subprocess.run(
            [sys.executable, "-m", "tui", *args], capture_output=True, text=True, env=env()
        )
        assert not leaks(out.stdout + out.stderr), (args, out.stdout, out.stderr)
        assert f"127.0.0.1:{port}" in out.stdout + out.stderr  # it still says where


def test_bench_reports_keep_url_credentials_out(pace, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    port, server = pace
    url = f"http://alice:{SECRET}@127.0.0.1:{port}"
    out = tmp_path / "report"
    args = ["bench", "--url", url, "--runs", "1", "--warmup", "0", "--max-tokens", "3"]
    p = subprocess.run(
        [sys.executable, "-m", "tui", *args, "--prompt-tokens", "8", "--out", str(out)],
        capture_output=True,
        text=True,
        env=env(),
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert not leaks(p.stdout + p.stderr)
    for f in out.iterdir():
        if f.is_file():
            assert not leaks(f.read_text(errors="replace")), f.name
    report = json.loads((out / "report.json").read_text())
    assert report["engines"][0]["spec"]["headers"] == ["Authorization"]  # names only
    assert server.stats.last_headers["authorization"] == f"Basic {BASIC}"


def test_session_logs_are_private(tmp_path: Path) -> None:
    path = tmp_path / "new-dir" / "session.jsonl"
    SessionRecorder(path).append({"prompt": "private"})
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


async def test_tui_session_log_keeps_url_credentials_out(pace, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The TUI with a configured engine whose URL carries credentials: one answer, then
    the session log holds no trace of them."""
    from tui.app.app import create_app
    from tui.app.widgets.conversation import Conversation
    from tui.app.widgets.prompt import PromptInput
    from tui.config import parse_config

    port, server = pace
    cfg_path = tmp_path / "c.toml"
    text = (
        'default_engine = "box"\n[generation]\nmax_tokens = 3\n'
        f'[engines.box]\nkind = "openai"\nurl = "http://alice:{SECRET}@127.0.0.1:{port}"\n'
    )
    cfg_path.write_text(text)
    cfg = parse_config(text, cfg_path)
    session = tmp_path / "session.jsonl"
    app = create_app(cfg, session_path=session, state_path=None, telemetry=False)
    async with app.run_test(size=(100, 30)) as pilot:
        prompt = app.chat.query_one(PromptInput)
        prompt.load_text("hello")
        prompt.focus()
        await pilot.press("enter")
        conv = app.chat.query_one("#conv-A", Conversation)
        for _ in range(400):
            if conv.turns and conv.turns[0].finished:
                break
            await pilot.pause(0.05)
        assert conv.turns and conv.turns[0].finished
    body = session.read_text()
    assert json.loads(body.splitlines()[0])["engine"] == "box"
    assert not leaks(body)
    assert server.stats.last_headers["authorization"] == f"Basic {BASIC}"
