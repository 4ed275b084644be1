"""The proxy end to end, in a terminal: on "the GPU box" in front of its engine, watched
from "the laptop" through an ssh tunnel with the box's hardware over ssh (the set-up in
docs/proxy.md); and ``infertop proxy --ui`` as one command.

All real: sshd on a loopback port stands in for the box, llama.cpp's llama-server is its
engine, the openai SDK on the box is "somebody else's" client, the tunnel is ``ssh -N
-L``, the TUI runs in tmux at 80×24.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import pace_server
from tests.support import real_servers as servers
from tests.support.sshd_server import BARE_PATH, HOST_ALIAS, VENV_BIN, Sshd, free_port
from tests.support.tmux_pane import Tmux

pytestmark = [pytest.mark.e2e, pytest.mark.engine]

ROOT = Path(__file__).resolve().parents[2]


def _connectable(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


def _config(tmp_path: Path) -> Path:
    cfg = tmp_path / "laptop.toml"
    cfg.write_text(
        f'session_dir = "{tmp_path / "sessions"}"\n[telemetry]\ninterval_s = 0.5\n'
        '[engines.local]\nkind = "synthetic"\n'
    )
    return cfg


def _tui(tmp_path: Path, args: str, path: str = "") -> str:
    return (
        f"cd {ROOT} && env PATH={path or os.environ['PATH']} PYTHONPATH={ROOT} "
        f"XDG_STATE_HOME={tmp_path / 'state'} INFERTOP_STATE={tmp_path / 'state.toml'} "
        f"{sys.executable} -m tui --config {_config(tmp_path)} {args}"
    )


def _proxy(upstream: str, env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tui", "proxy", "--upstream", upstream, "--listen",
         "127.0.0.1:0", "--kind", "llama-server"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
    )  # fmt: skip
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("infertop proxy listening on "), line
    return proc, line.split()[-1]


def test_the_box_proxy_watched_from_the_laptop(model_path: Path, tmp_path: Path, cli_env) -> None:
    import openai

    box = Sshd(tmp_path / "sshd", f"{VENV_BIN}:{BARE_PATH}")
    box.start()
    engine = servers.start_llama_server(model_path, tmp_path)
    proxy, proxy_url = _proxy(engine.url, cli_env)  # on the box, headless
    client = box.client()
    local = free_port()
    tunnel = subprocess.Popen(
        [str(client / "ssh"), "-N", "-o", "ExitOnForwardFailure=yes", "-L",
         f"{local}:127.0.0.1:{proxy_url.rsplit(':', 1)[1]}", HOST_ALIAS],
        stdin=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    tmux = Tmux(f"infertop-proxy-box-{os.getpid()}")
    try:
        deadline = time.monotonic() + 20
        while not _connectable(local):
            assert tunnel.poll() is None and time.monotonic() < deadline, "no tunnel"
            time.sleep(0.1)
        path = f"{client}:{os.environ['PATH']}"
        cmd = _tui(
            tmp_path, f"--watch http://127.0.0.1:{local} --telemetry ssh://{HOST_ALIAS}", path
        )
        tmux("new-session", "-d", "-s", "e2e", "-x", "80", "-y", "24", cmd + "; sleep 30")
        tmux.wait(lambda s: "0 in flight · 0 done" in s, 60, "the view attached through the tunnel")
        tmux.wait(lambda s: f"hardware {HOST_ALIAS}: CPU" in s, 30, "the box's hardware")
        # somebody else's client, on the box, talks to the proxy there
        sdk = openai.OpenAI(base_url=proxy_url + "/v1", api_key="sk-someone-elses")
        for _ in range(2):
            stream = sdk.chat.completions.create(
                model="smollm2", messages=[{"role": "user", "content": "Name three colours."}],
                max_tokens=24, temperature=0, stream=True,
            )  # fmt: skip
            assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        screen = tmux.wait(lambda s: "0 in flight · 2 done" in s, 30, "both requests, done")
        assert screen.count(" done ") >= 2 and "sk-someone-elses" not in screen
        tmux("send-keys", "-t", "e2e", "Enter")
        screen = tmux.wait(
            lambda s: "engine prefill" in s, 30, "the timeline, with llama-server's account"
        )
        assert "Text hidden" in screen
        tmux("send-keys", "-t", "e2e", "t")
        tmux.wait(lambda s: "user: Name three colours." in s, 30, "the text, on request")
        tmux("send-keys", "-t", "e2e", "Escape")
        tmux("send-keys", "-t", "e2e", "C-q")
    finally:
        subprocess.run([*tmux.base, "kill-server"], capture_output=True)
        tunnel.terminate()
        tunnel.wait(10)
        proxy.terminate()
        proxy.wait(10)
        engine.stop()
        box.stop()


def test_proxy_ui_is_one_command(tmp_path: Path) -> None:
    import httpx

    port, _server, stop = pace_server.start_in_thread(
        pace_server.PaceConfig(interval_ms=10, ttft_ms=20, tokens=16)
    )
    listen = free_port()
    tmux = Tmux(f"infertop-proxy-ui-{os.getpid()}")
    try:
        cmd = _tui(
            tmp_path,
            f"proxy --upstream http://127.0.0.1:{port} --listen 127.0.0.1:{listen} "
            "--kind openai --ui",
        )
        tmux("new-session", "-d", "-s", "e2e", "-x", "80", "-y", "24", cmd + "; sleep 30")
        tmux.wait(lambda s: "0 in flight · 0 done" in s, 60, "the view on its own proxy")
        body = {"model": "pace", "stream": True, "messages": []}
        for _ in range(3):
            httpx.post(f"http://127.0.0.1:{listen}/v1/chat/completions", json=body, timeout=10)
        tmux.wait(lambda s: "0 in flight · 3 done" in s, 30, "three requests, done")
        tmux("send-keys", "-t", "e2e", "C-q")
        deadline = time.monotonic() + 15
        while _connectable(listen):  # quitting the view ends its proxy
            assert time.monotonic() < deadline, "the proxy outlived its view"
            time.sleep(0.1)
    finally:
        subprocess.run([*tmux.base, "kill-server"], capture_output=True)
        stop()
