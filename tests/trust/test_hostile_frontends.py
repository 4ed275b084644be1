"""Item 7: the terminal UI (Pilot) and ``infertop bench`` against a server that lists its
models, then streams one endless line or drips an event a byte at a time.

Each request ends by its bound (the 16 MiB event cap; the 1 s stall timeout for the
unfinished event) as a clear failure; the app stays up and answers the next prompt; the
bench writes its report and exits 3 (every request failed) instead of hanging.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from tui.app.app import create_app
from tui.app.themes import builtin_theme_dir
from tui.app.widgets.conversation import Conversation
from tui.config import parse_config

ENGINES = """
[engines.endless]
kind = "openai"
url = "{hostile}/endless-stream"
model = "m"
[engines.drip]
kind = "openai"
url = "{hostile}/drip-stream"
model = "m"
stall_timeout_s = 1.0
[engines.ok]
kind = "openai"
url = "{hostile}/ansi"
model = "m"
"""


async def test_the_app_survives_an_endless_line_and_a_drip(hostile, tmp_path: Path) -> None:
    text = 'default_engine = "endless"\n' + ENGINES.format(hostile=hostile)
    app = create_app(
        parse_config(text, tmp_path / "c.toml"),
        session_path=tmp_path / "s.jsonl",
        state_path=None,
        telemetry=False,
        theme_dirs=[builtin_theme_dir()],
    )
    async with app.run_test(size=(120, 36)) as pilot:
        conv = app.chat.query_one("#conv-A", Conversation)

        async def ask(n: int, engine: str) -> None:
            if app.chat.slot_engine["A"] != engine:
                app.chat.use_engine("A", engine)
            deadline = time.monotonic() + 60
            while app.chat.host("A").state != "ready":
                assert time.monotonic() < deadline, "the engine did not load"
                await pilot.pause(0.05)
            await app.chat.submit_text("hi")
            deadline = time.monotonic() + 60
            while len(conv.turns) < n or not conv.turns[n - 1].finished:
                assert time.monotonic() < deadline, "the turn did not end"
                await pilot.pause(0.05)

        await ask(1, "endless")
        await ask(2, "drip")
        await ask(3, "ok")  # still up, still answering
    errors = [json.loads(x)["error"] for x in (tmp_path / "s.jsonl").read_text().splitlines()]
    assert "longer than 16777216 bytes" in errors[0] and "unfinished for over 1 s" in errors[1]
    assert errors[2] is None


@pytest.mark.parametrize(("engine", "needle"), [("endless", "longer than"), ("drip", "over 1 s")])
def test_bench_ends_and_reports(hostile, tmp_path, launcher, clean_env, engine, needle) -> None:
    config = tmp_path / "c.toml"
    config.write_text(f'default_engine = "{engine}"\n' + ENGINES.format(hostile=hostile))
    out = tmp_path / "out"
    argv = [*launcher, "bench", "--config", str(config), "--engine", engine, "--runs", "2"]
    argv += ["--warmup", "0", "--max-tokens", "4", "--out", str(out)]
    try:
        p = subprocess.run(argv, env=clean_env, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail("the bench was still running after 120 s")
    assert p.returncode == 3 and "Traceback" not in p.stderr, p.stderr
    assert needle in p.stdout, p.stdout
    report = json.loads((out / "report.json").read_text())
    statuses = {r["status"] for e in report["engines"] for r in e["records"]}
    assert statuses == {"failed"}
