"""Row 3 in the terminal UI, the fleet and the hardware panel: a server's control
sequences are shown, never written raw.

Textual writes the text of a widget to the terminal as it is (ESC and C1 included: only
a few C0 codes are dropped), so what the screen holds is what the terminal gets; the
check reads the app's own screenshot of it (``export_screenshot``), which holds every
character of every cell.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from tests.support import hostile_server as hs
from tui.app.app import create_app
from tui.app.themes import builtin_theme_dir
from tui.app.widgets.conversation import Conversation
from tui.app.widgets.hardware_panel import hardware_text
from tui.config import parse_config
from tui.telemetry.remote.exporters import ExporterSource
from tui.telemetry.remote.remote_link import LinkLost, RemoteLink

SIZE = (120, 36)


def _raw(text: str) -> list[str]:
    return [ch for ch in hs.ESCAPES if ch in text]


async def test_chat_answer_model_and_error_are_shown_safely(hostile, tmp_path: Path) -> None:
    text = (
        'default_engine = "h"\n[generation]\nmax_tokens = 8\n'
        f'[engines.h]\nkind = "openai"\nurl = "{hostile}/ansi"\n'
        f'[engines.bad]\nkind = "openai"\nurl = "{hostile}/ansi-error"\n'
    )
    cfg = parse_config(text, tmp_path / "c.toml")
    session = tmp_path / "session.jsonl"
    app = create_app(
        cfg,
        session_path=session,
        state_path=None,
        telemetry=False,
        theme_dirs=[builtin_theme_dir()],
    )
    async with app.run_test(size=SIZE) as pilot:
        await app.chat.submit_text("hi")
        deadline = time.monotonic() + 60
        while app.chat.busy or not app.chat.query_one("#conv-A", Conversation).turns:
            assert time.monotonic() < deadline, "the answer did not finish"
            await pilot.pause(0.05)
        await pilot.pause(0.3)
        screen = app.export_screenshot()
        assert _raw(screen) == [], "a control sequence reached the screen"
        turn = app.chat.query_one("#conv-A", Conversation).turns[0]
        assert turn.finished and "Hello␛]52;c;cm0gLXJmIH4K␇" in turn.source
        assert "owned-model" in screen  # the model's name is shown, made safe
        notes = [n.message for n in app._notifications]
        app.notify(hs.EVIL_ERROR, severity="error")  # an engine's error, as the chat shows it
        await pilot.pause(0.2)
        assert _raw(app.export_screenshot()) == []
        assert all(_raw(m) == [] for m in [*notes, *(n.message for n in app._notifications)])
    record = json.loads(session.read_text().splitlines()[0])
    assert record["text"] == hs.EVIL_TEXT  # the session log keeps the raw text


def test_exporter_labels_and_a_lost_link_are_safe(hostile) -> None:
    source = ExporterSource(f"{hostile}/ansi/metrics", interval_s=0.2, timeout_s=2.0)
    source.start()
    try:
        deadline = time.monotonic() + 20
        while not source.samples:
            assert time.monotonic() < deadline, "no exporter sample"
            time.sleep(0.05)
        sample = source.sample(None)
    finally:
        source.close()
    assert sample.gpu.gpus and "owned-model" in sample.gpu.gpus[0].name
    assert _raw(hardware_text(sample, None).plain) == []

    class SshLike(RemoteLink):
        def session(self) -> None:  # what remote_ssh raises with ssh's last stderr line
            raise LinkLost(f"ssh: {hs.EVIL_ERROR}")

    link = SshLike("ssh://box", 0.1, backoff_s=(30.0,))
    link.start()
    try:
        deadline = time.monotonic() + 10
        while not link.losses:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        lost = link.sample(None)
    finally:
        link.close()
    assert lost.link is not None and "boom␛]52" in lost.link and _raw(lost.link) == []
    assert _raw(hardware_text(lost, None).plain) == []


def test_fleet_once_cells_are_safe(hostile, launcher, clean_env) -> None:
    p = subprocess.run(
        [*launcher, "fleet", "--once", "--gap", "0.2", "--url", f"{hostile}/ansi"],
        env=clean_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    assert "vllm" in p.stdout and "model␛]0;" in p.stdout, p.stdout
    assert _raw(p.stdout + p.stderr) == []
