"""End to end over SSH: a real sshd on a loopback port, infertop inside an SSH session in
an 80×24 tmux pane, the real default model (llama.cpp in-process).

Reads the captured screen: tokens streamed with the sparkline block above them (the
first prompt's ITL gaps moving while it streams), the block then shows non-zero TTFT,
ITL and tok/s, the engine bar changes on Ctrl+N, and engine stderr written during a model load
(fd 2, the way llama.cpp logs) stays off the screen and lands in the engine log.
Needs openssh-server and tmux (scripts/setup-e2e.sh installs them).
"""

from __future__ import annotations

import getpass
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.tmux_pane import Tmux

pytestmark = [pytest.mark.e2e, pytest.mark.engine]

ROOT = Path(__file__).resolve().parents[2]
SSHD = "/usr/sbin/sshd"
NOISE = "LLAMA-STYLE-LOAD-NOISE-ON-FD2"
SPARK_ROW = re.compile(r"^ ITL\s+[▁▂▃▄▅▆▇█]+\s+[\d.]+ ?m?s", re.M)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(*cmd: str) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def sshd(tmp_path: Path):  # type: ignore[no-untyped-def]
    if not os.path.exists(SSHD) or not shutil.which("tmux") or not shutil.which("ssh"):
        pytest.fail("sshd/ssh/tmux missing: run scripts/setup-e2e.sh")
    d = tmp_path / "ssh"
    d.mkdir()
    _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "host_key"))
    _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "user_key"))
    port = _free_port()
    (d / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {d / 'host_key'}\n"
        f"AuthorizedKeysFile {d / 'user_key.pub'}\nPasswordAuthentication no\n"
        f"PermitRootLogin yes\nStrictModes no\nUsePAM no\nPidFile {d / 'sshd.pid'}\n"
    )
    Path("/run/sshd").mkdir(parents=True, exist_ok=True)
    subprocess.run([SSHD, "-f", str(d / "sshd_config"), "-E", str(d / "sshd.log")], check=True)
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            assert time.monotonic() < deadline, (d / "sshd.log").read_text()
            time.sleep(0.1)
    yield port, d / "user_key"
    pid_file = d / "sshd.pid"
    if pid_file.exists():
        try:
            os.kill(int(pid_file.read_text().strip()), 15)
        except ProcessLookupError:
            pass


def test_infertop_over_ssh_in_tmux(sshd, tmp_path: Path):
    port, key = sshd
    cfg = tmp_path / "infertop.toml"
    session_dir = tmp_path / "sessions"
    cfg.write_text(
        f'session_dir = "{session_dir}"\n'
        "[generation]\nmax_tokens = 120\ntemperature = 0.0\nseed = 3\n"
        '[engines.local]\nkind = "llamacpp"\nmodel = "default"\nn_threads = 1\n'
        f'[engines.synth]\nkind = "synthetic"\noptions = {{ load_stderr = "{NOISE}" }}\n'
    )
    state = tmp_path / "xdg-state"
    remote = (
        f"cd {shlex.quote(str(ROOT))} && env PYTHONPATH={shlex.quote(str(ROOT))} "
        f"XDG_STATE_HOME={shlex.quote(str(state))} INFERTOP_STATE={tmp_path / 'state.toml'} "
        f"{shlex.quote(sys.executable)} -m tui --config {shlex.quote(str(cfg))}"
    )
    ssh = (
        f"ssh -t -i {key} -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null "
        f"-o LogLevel=ERROR -p {port} {getpass.getuser()}@127.0.0.1 {shlex.quote(remote)}"
    )
    tmux = Tmux(f"infertop-e2e-{os.getpid()}")
    tmux("new-session", "-d", "-s", "e2e", "-x", "80", "-y", "24", ssh + "; sleep 30")
    try:
        screen = tmux.wait(lambda s: "A ● local" in s and "ready" in s, 90, "engine ready")
        assert "SmolLM2" in screen
        tmux("send-keys", "-t", "e2e", "-l", "Name three colours.")
        tmux("send-keys", "-t", "e2e", "Enter")
        seen_streaming = False
        sparks_with_answer = ""  # a screen with the answer streaming and the sparklines
        deadline = time.monotonic() + 120
        while True:
            screen = tmux.screen()
            if "streaming…" in screen:
                seen_streaming = True
                if not sparks_with_answer and SPARK_ROW.search(screen):
                    sparks_with_answer = screen
            if "e2e " in screen and "tok" in screen and "waiting" not in screen:
                break
            assert time.monotonic() < deadline, f"no finished answer:\n{screen}"
            time.sleep(0.1)
        rec = json.loads(next(session_dir.glob("*.jsonl")).read_text().splitlines()[0])
        words = [w for w in re.findall(r"[A-Za-z]{4,}", rec["text"])]
        assert words, rec["text"]
        assert words[0] in screen, "the streamed answer is not on the screen"
        assert seen_streaming, "never saw the answer while it streamed"
        # the first answer streamed with the sparkline block above it (ITL gaps moving)
        assert sparks_with_answer, "never saw the sparklines while the answer streamed"
        # afterwards the block holds the request's TTFT, ITL and tok/s
        for label in ("TTFT", "ITL", "tok/s"):
            row = re.search(
                rf"^ {re.escape(label)}\s+[▁▂▃▄▅▆▇█]+\s+([\d.]+) ?(ms|s)?", screen, re.M
            )
            assert row and float(row.group(1)) > 0, f"{label} row missing:\n{screen}"
        # every line fits: nothing essential cut off at 80 columns
        assert "F2 panels" in screen and "Cancel" in screen
        # switch engine with the keyboard; its load writes to fd 2
        tmux("send-keys", "-t", "e2e", "C-n")
        screen = tmux.wait(lambda s: "A ● synth" in s and "ready" in s, 60, "engine switch")
        assert "synthetic" in screen
        assert NOISE not in screen
        log = state / "infertop" / "engine-stderr.log"
        assert log.exists() and NOISE in log.read_text()
        tmux("send-keys", "-t", "e2e", "C-q")
        tmux.wait(lambda s: "A ● synth" not in s, 20, "app exit")
    finally:
        subprocess.run([*tmux.base, "kill-server"], capture_output=True)
