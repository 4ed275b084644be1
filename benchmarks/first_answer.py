"""The first minute of a new user: from ``bash scripts/run.sh`` in a fresh clone to the
first screen and the first answer, with pip's cache empty.

A copy of this checkout (what a clone holds) in a temporary folder; an empty
``INFERTOP_CACHE`` (no wheelhouse: setup takes the prebuilt llama.cpp and starts the build
for this CPU in the background) and an empty ``PIP_CACHE_DIR`` (every package, xllamacpp
included, downloaded as on a new machine); ``bash scripts/run.sh`` in a tmux pane. The
clock starts when the command is typed. Measured from the pane, polled every 0.1 s:

- first screen: the TUI's engine bar is drawn (``A ● prebuilt ·``);
- engine ready: the bar says ``ready`` (the model loaded in the engine's worker);
- first answer: a prompt sent at "ready" has its summary line drawn (`` · e2e ``); that
  line (TTFT, tok/s) is printed too.

Arms, in turn each round: ``compiling`` — the background build compiles for real
meanwhile, at nice 19, as on a user's machine; ``held`` — it takes the wheel from a held
local wheelhouse instead, as the e2e test does (no compile beside the first answer). The
build is stopped when a run ends. The machine's load is printed first and last. Goals
(docs/performance.md): first screen ≤ 60 s, first answer ≤ 75 s.

``--smoke`` (seconds): the same marks, read from the pane the same way, of this checkout's
own TUI started on the prebuilt engine (no fresh clone, no setup, no build: those take
minutes, and tests/e2e/test_fresh_clone.py runs them); it checks each mark was seen, in
order, and the answer's summary line drawn. Exit 77 where tmux or the prebuilt llama.cpp
(xllamacpp, a CPU with AVX2) is missing.

    .venv/bin/python -m benchmarks.first_answer [--rounds 3] [--arms compiling,held] [--warm-pip]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import smoke
from tests.support.fresh_clone import (
    HeldWheelhouse,
    copy_checkout,
    fresh_env,
    stop_builder,
    tuned_wheel,
)
from tests.support.tmux_pane import Tmux

ROOT = Path(__file__).resolve().parents[1]


def measure(tmp: Path, held_build: bool, warm_pip: bool) -> dict[str, float]:
    repo = copy_checkout(ROOT, tmp / "infertop")
    held = None
    extra = {}
    if held_build:
        wheel = tuned_wheel()
        if wheel is None:
            raise SystemExit("--held-build needs this CPU's wheel: run scripts/setup.sh --dev")
        held = HeldWheelhouse(wheel)
        extra["INFERTOP_TUNED_WHEELS"] = held.url
    if not warm_pip:
        extra["PIP_CACHE_DIR"] = str(tmp / "pip-cache")  # empty: everything downloaded
    config = tmp / "xdg-config" / "infertop" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text("[generation]\nmax_tokens = 32\n")
    env = fresh_env(tmp, **extra)
    command = ["env", "-i", *[f"{k}={v}" for k, v in env.items()], "bash", "scripts/run.sh"]
    try:
        return watch(Tmux(f"infertop-first-{tmp.name}"), command, repo)
    finally:
        stop_builder(repo / ".venv")
        if held is not None:
            held.close()


def watch(tmux: Tmux, command: list[str], cwd: Path, limit_s: float = 900) -> dict[str, float]:
    """Start ``command`` in a pane and read the marks off it (see the module docstring);
    seconds from the start. The pane's tmux server is ended on return."""
    marks: dict[str, float] = {}
    summary = ""
    try:
        t0 = time.monotonic()
        tmux("new-session", "-d", "-s", "e2e", "-x", "250", "-y", "50", "-c", str(cwd), *command)
        sent = False
        while "answer" not in marks:
            screen = tmux.screen()
            now = time.monotonic() - t0
            if "screen" not in marks and "A ● prebuilt · " in screen:
                marks["screen"] = now
            if "ready" not in marks and "A ● prebuilt · " in screen and " · ready" in screen:
                marks["ready"] = now
            if "ready" in marks and not sent:
                tmux("send-keys", "-t", "e2e", "Name a colour.", "Enter")
                marks["sent"] = time.monotonic() - t0
                sent = True
            if sent and " · e2e " in screen:
                marks["answer"] = now
                line = next(ln for ln in screen.splitlines() if " · e2e " in ln)
                summary = line.split("│")[0].strip()
            if now > limit_s:
                raise SystemExit(f"no answer after {limit_s:.0f} s; screen:\n{screen}")
            time.sleep(0.1)
        building = "building llama.cpp for this CPU" in tmux.screen()
        marks["build_line_shown"] = float(building)
        print(f"  the answer's summary: {summary}", flush=True)
        marks["summary_drawn"] = float(bool(summary))
    finally:
        subprocess.run([*tmux.base, "kill-server"], capture_output=True)
    return marks


SMOKE_CONFIG = (
    'default_engine = "prebuilt"\n[generation]\nmax_tokens = 4\n'
    '[engines.prebuilt]\nkind = "llamacpp-prebuilt"\nmodel = "default"\n'
)


def smoke_run() -> int:
    """See the module docstring: this checkout's TUI on the prebuilt engine, in a pane."""
    from tui.engines.inprocess.llama_builds import prebuilt_cpu_problem

    if not shutil.which("tmux"):
        smoke.skip("tmux missing: scripts/setup-e2e.sh installs it")
    problem = prebuilt_cpu_problem()
    if problem is not None:
        smoke.skip(problem)
    try:
        import xllamacpp  # noqa: F401
    except ImportError as e:
        smoke.skip(f"the prebuilt llama.cpp is not installed ({e})")
    smoke.left_out(
        "the fresh clone, its setup and the background build",
        "minutes of installs (tests/e2e/test_fresh_clone.py runs them)",
    )
    with tempfile.TemporaryDirectory(prefix="infertop-first-smoke-") as name:
        tmp = Path(name)
        config = tmp / "xdg-config" / "infertop" / "config.toml"
        config.parent.mkdir(parents=True)
        config.write_text(SMOKE_CONFIG)
        env = {k: v for k, v in os.environ.items() if k != "INFERTOP_CONFIG"}
        env.update(
            XDG_CONFIG_HOME=str(config.parents[1]),
            XDG_DATA_HOME=str(tmp / "data"),
            XDG_STATE_HOME=str(tmp / "state"),
            INFERTOP_STATE=str(tmp / "state.toml"),
            TERM="xterm-256color",
        )
        command = ["env", "-i", *[f"{k}={v}" for k, v in env.items()]]
        command.append(str(Path(sys.executable).parent / "infertop"))  # what run.sh starts
        m = watch(Tmux(f"infertop-first-{tmp.name}"), command, tmp, limit_s=120)
    print(
        f"smoke: first screen {m['screen']:.1f} s, engine ready {m['ready']:.1f} s, "
        f"answer drawn {m['answer']:.1f} s (this checkout's venv: no setup)",
        flush=True,
    )
    smoke.check(m["screen"] <= m["ready"] <= m["sent"] <= m["answer"], f"marks in order: {m}")
    smoke.check(m["summary_drawn"], "the answer's summary line was drawn")
    smoke.passed("the first screen, the engine ready and the answer read off the pane")
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=1, help="rounds of every arm, in turn")
    p.add_argument(
        "--arms",
        default="compiling",
        help="comma-separated, run in turn each round: compiling (the real background "
        "build at nice 19), held (its wheel from a held wheelhouse: no compile)",
    )
    p.add_argument("--warm-pip", action="store_true", help="keep pip's own cache")
    smoke.add_flag(p)
    args = p.parse_args()
    if args.smoke:
        return smoke_run()
    if not shutil.which("tmux"):
        raise SystemExit("tmux missing: scripts/setup-e2e.sh installs it")
    from benchmarks.prebuilt_vs_tuned import machine

    print(machine(), flush=True)
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    if not set(arms) <= {"compiling", "held"}:
        raise SystemExit("--arms: compiling and/or held")
    got: dict[str, list[dict[str, float]]] = {a: [] for a in arms}
    for r in range(args.rounds):
        for arm in arms if r % 2 == 0 else arms[::-1]:
            with tempfile.TemporaryDirectory(prefix="infertop-first-") as tmp:
                m = measure(Path(tmp), arm == "held", args.warm_pip)
            got[arm].append(m)
            print(
                f"round {r + 1} {arm}: first screen {m['screen']:.1f} s, engine ready "
                f"{m['ready']:.1f} s, answer drawn {m['answer']:.1f} s (at most 32 tokens); "
                f"build line shown: {'yes' if m['build_line_shown'] else 'no'}",
                flush=True,
            )
    print()
    for arm, runs in got.items():
        med = {k: statistics.median(m[k] for m in runs) for k in ("screen", "ready", "answer")}
        print(
            f"{arm} (median of {len(runs)}): first screen {med['screen']:.1f} s (goal 60), "
            f"first answer {med['answer']:.1f} s (goal 75); engine ready {med['ready']:.1f} s"
        )
    print(f"pip cache {'warm' if args.warm_pip else 'empty'} at each start")
    print("load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
