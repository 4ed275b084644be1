"""(b) 2,000 tok/s into the output pane: no growing backlog, app CPU < 50 % of a core.

The real app runs in a real terminal (a tmux pane, 120×36) with the synthetic engine at
2,000 tok/s (one token per chunk, paragraphs of ~60 words), streaming ``--tokens`` tokens
into the Markdown output pane. Inside the app a probe (added by this script, not part of
the product) samples every 0.25 s: tokens produced by the engine so far vs tokens already
handed to the Markdown widget; backlog = produced − shown. Outside, the app process's CPU
(all threads, including the engine thread) is read from /proc over the stream.
Goals: backlog does not grow (slope ≈ 0, ends at 0), CPU < 0.5 core. Also printed: pane
updates per second (calls of Turn.append; the user should see >= ~10/s) and full screen
layouts per second (Screen._refresh_layout), counted by wrapping those two methods.

The app CPU includes every thread of the app process, the synthetic engine's token clock
too (a thread that sleeps until each token is due: ~8 % of a core at 2,000 tok/s here,
the part a real engine would spend computing); the script prints it apart as well.

    .venv/bin/python -m benchmarks.ui_stream_2000 [--tokens 20000] [--rate 2000]

Measured on the shared 2-core machine (2026-11-30, 20,000 tokens, load average 1.1-1.3):
    before: 61-66 % of a core (76 % at 40,000 tokens: the cost grew with the answer),
        2.0 layouts/s of ~60-170 ms, main thread 41 %, engine loop 10 %, token clock 10 %
    after Markdown segments with cached heights, commits every 4 s while the tail fills
    the followed pane, Handoff (one wake-up per batch), TailText:
        35.0 / 38.2 / 38.6 / 40.0 / 41.8 % of a core; 0.8 layouts/s; main thread 27 %,
        engine loop 4-5 %, token clock 8 %; backlog median ~100 tokens, 0 at the end
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks import smoke
from benchmarks.ui_common import ROOT, TmuxApp, cpu_seconds, thread_cpu


def inside(cfg_path: str, probe_path: str) -> None:
    """Runs in the tmux pane: the real app plus a backlog probe."""
    from tui.cli.ui import prepare_terminal_ui

    prepare_terminal_ui()  # as the infertop command does, before Textual is imported
    from tui.app.app import create_app
    from tui.app.terminal import engine_stderr_to
    from tui.config import load_config

    config = load_config(cfg_path)
    counts = count_calls()
    app = create_app(config, state_path=None, record_session=False, autoplay=["go"])
    out = open(probe_path, "w", buffering=1)  # noqa: SIM115
    t0 = time.perf_counter()

    def probe() -> None:
        live = app.core.live["A"]
        if live is None:
            return
        row = {
            "t": time.perf_counter() - t0,
            "threads": {t.native_id: t.name for t in threading.enumerate()},
            "produced": live.snapshot().tokens,
            "done": live.done,
            **counts,
        }
        out.write(json.dumps(row) + "\n")

    app.call_later(lambda: app.set_interval(0.25, probe))
    with engine_stderr_to(Path(probe_path).with_suffix(".stderr")):
        app.run()


def count_calls() -> dict[str, int]:
    """Count pane updates and full layouts (wrapping two methods; a probe, not the product)."""
    from textual.screen import Screen

    from tui.app.widgets.conversation import Turn

    counts = {"updates": 0, "layouts": 0, "shown": 0}

    def wrap(cls: type, name: str, key: str) -> None:
        orig = getattr(cls, name)

        def counted(*a, **k):  # type: ignore[no-untyped-def]
            counts[key] += 1
            return orig(*a, **k)

        setattr(cls, name, counted)

    wrap(Screen, "_refresh_layout", "layouts")
    append = Turn.append

    async def shown(self, fragment: str, *args, **kw) -> None:  # type: ignore[no-untyped-def]
        # tokens handed to the pane: the synthetic engine's tokens are space-separated
        # words, so counting the words of each fragment as it passes costs O(fragment);
        # the rest (the part: answer or reasoning) is passed on as the app gave it
        counts["updates"] += 1
        counts["shown"] += len(fragment.split())
        await append(self, fragment, *args, **kw)

    Turn.append = shown  # type: ignore[method-assign]
    return counts


def slope(xs: list[float], ys: list[float]) -> float:
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    den = sum((x - mx) ** 2 for x in xs) or 1.0
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den


def app_died(app: TmuxApp, probe: Path) -> str | None:
    """Why the app in the pane is gone (its stderr's last lines), or None while it runs."""
    if Path(f"/proc/{app.pid}").exists():
        return None
    err = probe.with_suffix(".stderr")
    tail = err.read_text(errors="replace").splitlines()[-5:] if err.exists() else []
    return "the app ended: " + " | ".join(tail)


def start_app(tmp: Path, tokens: int, rate: float) -> tuple[TmuxApp, Path]:
    """The real app in a tmux pane, 120×36, running this script's :func:`inside` (the app
    and its probe) instead of ``python -m tui``."""
    import shlex
    import subprocess

    cfg = tmp / "c.toml"
    cfg.write_text(
        f'default_engine = "synth"\n[generation]\nmax_tokens = {tokens}\n'
        f'[engines.synth]\nkind = "synthetic"\noptions = {{ tokens_per_s = {rate} }}\n'
    )
    probe = tmp / "probe.jsonl"
    app = TmuxApp.__new__(TmuxApp)
    TmuxApp.count += 1
    app.sock = f"infertop-bench-{TmuxApp.count}-{int(time.time())}"
    cmd = (
        f"cd {shlex.quote(str(ROOT))} && exec env PYTHONPATH={shlex.quote(str(ROOT))} "
        f"{shlex.quote(sys.executable)} -m benchmarks.ui_stream_2000 --inside {cfg} {probe}"
    )
    subprocess.run(
        ["tmux", "-L", app.sock, "new-session", "-d", "-s", "b", "-x", "120", "-y", "36", cmd],
        check=True,
    )
    app.pid = int(app.tmux("display", "-p", "-t", "b", "#{pane_pid}").strip())
    return app, probe


def rows_of(probe: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in probe.read_text().splitlines() if x.strip()]


def measure(app: TmuxApp, probe: Path, tokens: int, rate: float) -> tuple[float, dict[str, float]]:
    """Wait for the first token, then read the app's CPU until every token is shown: (share
    of a core over the stream, share per thread while the engine ran)."""
    deadline = time.monotonic() + 60
    while not probe.exists() or not any(r["produced"] > 0 for r in rows_of(probe)[-1:]):
        why = app_died(app, probe)
        if why is not None or time.monotonic() > deadline:
            raise TimeoutError(f"the stream did not start: {why or 'no token in 60 s'}")
        time.sleep(0.02)
    c0, t0 = cpu_seconds(app.pid), time.monotonic()
    th0 = thread_cpu(app.pid)
    deadline = time.monotonic() + tokens / rate * 4 + 30
    th1, t1 = th0, t0
    while True:
        rows = rows_of(probe)
        if rows and rows[-1]["done"] and rows[-1]["shown"] >= rows[-1]["produced"]:
            break
        why = app_died(app, probe)
        if why is not None or time.monotonic() > deadline:
            raise TimeoutError(f"the stream did not end with every token shown: {why}")
        if not (rows and rows[-1]["done"]):  # per thread: sampled while the engine runs
            th1, t1 = {**th1, **thread_cpu(app.pid)}, time.monotonic()  # keeps exited
        time.sleep(0.1)
    cpu = (cpu_seconds(app.pid) - c0) / (time.monotonic() - t0)
    threads = {k: (v - th0.get(k, 0.0)) / max(t1 - t0, 1e-9) for k, v in th1.items()}
    return cpu, threads


def report(rows: list[dict[str, Any]], cpu: float, threads: dict[str, float], a: Any) -> None:
    streaming = [r for r in rows if r["produced"] > 0 and not r["done"]]
    backlog = [r["produced"] - r["shown"] for r in streaming] or [0]
    last = rows[-1]
    b_slope = slope([r["t"] for r in streaming], backlog) if len(streaming) > 2 else 0.0
    print(
        f"(b) synthetic {a.rate:.0f} tok/s × {a.tokens} tokens into the output pane "
        f"(real terminal, 120×36); load average {os.getloadavg()[0]:.2f}"
    )
    print(
        f"    backlog (produced − shown) while streaming: median {statistics.median(backlog):.0f}"
        f" tokens, max {max(backlog)}, slope {b_slope:+.1f} tokens/s; at the end "
        f"{last['produced'] - last['shown']} (all {last['produced']} shown: {last['done']})"
    )
    print(
        f"    app CPU while streaming: {cpu * 100:.1f} % of one core; goal < 50 %; "
        f"ratio to goal {cpu / 0.5:.2f}"
    )
    span_s = streaming[-1]["t"] - streaming[0]["t"] if len(streaming) > 1 else 0.0
    if span_s > 0:
        ups = (streaming[-1]["updates"] - streaming[0]["updates"]) / span_s
        lays = (streaming[-1]["layouts"] - streaming[0]["layouts"]) / span_s
        print(f"    pane updates {ups:.1f}/s, screen layouts {lays:.1f}/s while streaming")
    names = {f"tid {k}": v for r in rows for k, v in r.get("threads", {}).items()}
    names["main"] = "main (UI)"
    busy = sorted(threads.items(), key=lambda kv: -kv[1])[:4]
    print("    by thread: " + ", ".join(f"{names.get(k, k)} {v * 100:.1f}%" for k, v in busy))
    model = sum(v for k, v in threads.items() if names.get(k, "").startswith("synthetic-"))
    print(
        f"    of which the synthetic engine's token clock (the stand-in for a model: a sleep "
        f"per token) {model * 100:.1f}%; the app without it {(cpu - model) * 100:.1f}%"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=20000)
    ap.add_argument("--rate", type=float, default=2000.0)
    ap.add_argument("--inside", nargs=2, metavar=("CFG", "PROBE"), help=argparse.SUPPRESS)
    smoke.add_flag(ap)
    args = ap.parse_args()
    if args.inside:
        inside(*args.inside)
        return
    if args.smoke:
        args.tokens = 2000  # one second at 2,000 tok/s
    app, probe = start_app(Path(tempfile.mkdtemp(prefix="infertop-bench-")), args.tokens, args.rate)
    try:
        cpu, threads = measure(app, probe, args.tokens, args.rate)
    finally:
        app.close()
    rows = rows_of(probe)
    report(rows, cpu, threads, args)
    if args.smoke:
        last = rows[-1]
        smoke.check(last["produced"] == args.tokens, f"{last['produced']} of {args.tokens} made")
        smoke.check(last["shown"] >= last["produced"], "not every token reached the pane")
        smoke.check(cpu > 0, "no app CPU read")
        smoke.passed(f"{last['produced']} tokens at {args.rate:.0f} tok/s, every one shown")


if __name__ == "__main__":
    main()
