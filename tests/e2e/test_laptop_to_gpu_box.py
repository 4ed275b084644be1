"""The remote-GPU set-up end to end: from "a laptop", `infertop --url` through an SSH
tunnel to the "GPU box's" engine, with `--telemetry ssh://gpu-box` for its hardware.

All real: sshd on a loopback port stands in for the box (its sessions find this venv's
infertop, so the agent runs as `infertop agent`); llama.cpp's llama-server on the default
model is the engine there; the tunnel is `ssh -N -L` through that sshd; the TUI runs in a
tmux pane (80×24, then 120×36). Checked on the captured screen: the engine was detected through the
tunnel and answers, and the hardware panel is titled with the box and shows its numbers.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

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


def test_tunnelled_url_with_the_box_hardware(model_path: Path, tmp_path: Path) -> None:
    box = Sshd(tmp_path / "sshd", f"{VENV_BIN}:{BARE_PATH}")
    box.start()
    try:
        engine = servers.start_llama_server(model_path, tmp_path)
    except servers.ServerStartError as e:
        box.stop()
        pytest.fail(str(e))
    client = box.client()
    ssh = str(client / "ssh")
    local = free_port()
    engine_port = int(engine.url.rsplit(":", 1)[1])
    tunnel = subprocess.Popen(
        [ssh, "-N", "-o", "ExitOnForwardFailure=yes", "-L",
         f"{local}:127.0.0.1:{engine_port}", HOST_ALIAS],
        stdin=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    tmux = Tmux(f"infertop-box-{os.getpid()}")
    try:
        deadline = time.monotonic() + 20
        while not _connectable(local):
            assert tunnel.poll() is None, tunnel.stderr.read() if tunnel.stderr else ""
            assert time.monotonic() < deadline, "the tunnel did not open"
            time.sleep(0.1)
        cfg = tmp_path / "laptop.toml"
        cfg.write_text(
            f'session_dir = "{tmp_path / "sessions"}"\n[telemetry]\ninterval_s = 0.5\n'
            "[generation]\nmax_tokens = 24\ntemperature = 0.0\n"
            '[engines.local]\nkind = "synthetic"\n'
        )
        cmd = (
            # COLUMNS/LINES as a shell may export them: the UI must still follow resizes
            f"cd {ROOT} && env COLUMNS=80 LINES=24 PATH={client}:{os.environ['PATH']} "
            f"PYTHONPATH={ROOT} "
            f"XDG_STATE_HOME={tmp_path / 'state'} INFERTOP_STATE={tmp_path / 'state.toml'} "
            f"{sys.executable} -m tui --config {cfg} --url http://127.0.0.1:{local} "
            f"--telemetry ssh://{HOST_ALIAS}"
        )
        tmux("new-session", "-d", "-s", "e2e", "-x", "80", "-y", "24", cmd + "; sleep 30")
        engine_name = f"llama-server@127.0.0.1:{local}"
        tmux.wait(lambda s: engine_name in s and "ready" in s, 60, "the tunnelled engine ready")
        # 80x24: the strip says whose CPU and RAM it shows
        tmux.wait(lambda s: f" {HOST_ALIAS}: CPU " in s, 30, "the box named in the strip")
        tmux("resize-window", "-t", "e2e", "-x", "120", "-y", "36")
        screen = tmux.wait(
            lambda s: f"hardware · {HOST_ALIAS} via ssh" in s and re.search(r"CPU\s+\d", s),
            30,
            "the box's hardware in the panel",
        )
        assert "remote telemetry lost" not in screen
        tmux("send-keys", "-t", "e2e", "-l", "Name three colours.")
        tmux("send-keys", "-t", "e2e", "Enter")
        screen = tmux.wait(
            lambda s: (
                re.search(r"TTFT [\d.]+ m?s · [1-9]\d* tok ·", s) is not None
                and "streaming…" not in s
            ),
            120,
            "an answer through the tunnel",
        )
        assert box.sessions(), "no SSH session on the box (agent and tunnel)"
        tmux("send-keys", "-t", "e2e", "C-q")
    finally:
        subprocess.run([*tmux.base, "kill-server"], capture_output=True)
        tunnel.terminate()
        tunnel.wait(10)
        engine.stop()
        box.stop()
