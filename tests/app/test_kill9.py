"""kill -9 of the TUI mid-answer: the session log keeps every finished request.

The real app runs in its own process on a pseudo-terminal (120×36), autoplaying prompts
on the synthetic engine and recording its session log, as ``infertop`` does. It is
SIGKILLed while an answer streams, at a random moment, a few times. Then: every complete
line of the log parses, the reader returns exactly those records (a torn last line, had
the kill landed inside a write, is reported, not fatal), and ``infertop replay`` of the
file (the app it builds, driven by Pilot) plays every record back.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import random
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

from tests.app.app_support import SIZE
from tui.app.widgets.conversation import Conversation
from tui.cli.replay import build_replay_app
from tui.core.session import read_session

TOKENS_PER_S = 100.0
MAX_TOKENS = 80  # ~0.8 s per answer
PROMPTS = 40

APP = """
import sys
from pathlib import Path
from tui.cli.ui import prepare_terminal_ui
prepare_terminal_ui()
from tui.app.app import create_app
from tui.app.terminal import engine_stderr_to
from tui.config import load_config
cfg, session, n = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
prompts = [f"question {i}" for i in range(n)]
app = create_app(load_config(cfg), state_path=None, session_path=session, autoplay=prompts)
with engine_stderr_to(session.with_suffix(".stderr")):
    app.run()
"""


def run_in_pty(args: list[str], env: dict[str, str]) -> subprocess.Popen:
    """A process on a new pseudo-terminal of SIZE; its output is read and dropped."""
    master, slave = pty.openpty()
    cols, rows = SIZE
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    proc = subprocess.Popen(
        args, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True
    )
    os.close(slave)

    def drain() -> None:
        try:
            while os.read(master, 65536):
                pass
        except OSError:
            pass
        finally:
            os.close(master)

    threading.Thread(target=drain, daemon=True).start()
    return proc


def lines_in(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


async def test_sigkill_mid_answer_keeps_every_finished_request(cli_env, tmp_path, wait_for) -> None:
    cfg = tmp_path / "infertop.toml"
    cfg.write_text(
        f'default_engine = "s"\n[generation]\nmax_tokens = {MAX_TOKENS}\ntemperature = 0.0\n'
        f'[engines.s]\nkind = "synthetic"\noptions = {{ tokens_per_s = {TOKENS_PER_S} }}\n'
    )
    env = dict(cli_env, TERM="xterm-256color", COLUMNS=str(SIZE[0]), LINES=str(SIZE[1]))
    env.pop("TEXTUAL_DRIVER", None)
    rng = random.Random(11)
    answer_s = MAX_TOKENS / TOKENS_PER_S
    for k, finished in enumerate((2, 3, 1)):
        session = tmp_path / f"session-{k}.jsonl"
        proc = run_in_pty([sys.executable, "-c", APP, str(cfg), str(session), str(PROMPTS)], env)
        try:
            deadline = time.monotonic() + 60
            while lines_in(session) < finished and time.monotonic() < deadline:
                assert proc.poll() is None, f"the app exited ({proc.returncode})"
                time.sleep(0.01)
            assert lines_in(session) >= finished, "the app recorded nothing in 60 s"
            # the next answer is streaming now: kill it somewhere in its middle
            time.sleep(rng.uniform(0.2, 0.8) * answer_s)
        finally:
            proc.kill()
            proc.wait(10)
        assert proc.returncode == -9

        raw = session.read_bytes()
        complete = raw[: raw.rfind(b"\n") + 1].decode("utf-8").splitlines()
        records = [json.loads(line) for line in complete]  # every complete line parses
        got = read_session(session)
        assert got.records == records
        assert got.bad_lines == ([] if raw.endswith(b"\n") else [len(complete) + 1])
        assert [r["prompt"] for r in records] == [f"question {i}" for i in range(len(records))]
        assert all(r["error"] is None and r["metrics"]["output_tokens"] for r in records)
        assert len(records) >= finished

    # `infertop replay` of the last log, with a torn record appended as if the kill had
    # landed inside a write: the torn line is skipped, every whole record plays back
    with session.open("a", encoding="utf-8") as f:
        f.write(complete[-1][: len(complete[-1]) // 2])
    app, bad = build_replay_app(session, speed=20.0)
    assert bad == [len(records) + 1]
    async with app.run_test(size=SIZE) as pilot:
        conv = app.chat.query_one("#conv-A", Conversation)
        await wait_for(
            pilot, lambda: len(conv.turns) == len(records) and conv.turns[-1].finished, 30
        )
        assert [t.text for t in conv.turns] == [r["text"] for r in records]
