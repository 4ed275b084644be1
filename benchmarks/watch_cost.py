"""What watching costs the engine: the TUI, A/B and the bench, each beside its control.

One run, four parts (``--parts``, default all), on this machine:

tui   The embedded SmolLM2 (in-process llama.cpp, its worker process) answers the same
      prompt, greedy, ``--tokens`` tokens, (a) headless — ``infertop run --json`` —
      started from here and, as a second control, started in a tmux session as the TUI
      is (a terminal alone costs the engine ~1 % or nothing, docs/performance.md#watching), and
      (b) in the real TUI in a real terminal (tmux) at 80×24 and 120×40, the conversation
      cleared between answers (each answer starts from the same context), and (c) in the
      same TUI with the app and its terminal stopped (SIGSTOP; tmux would resume the app
      alone) from its worker's start on the prompt until the worker goes idle, the stop
      checked in /proc: the same worker and context, nothing of the UI running while it
      decodes — the tightest control, back to back with (b) (order alternating). A
      headless run is a new process with a fresh model load each time, and its rate
      wanders more (here 87 to 135 tok/s between rounds). Each TUI arm starts its
      own app, lets it answer once unmeasured, measures (b) and (c), and closes it: one
      app on the machine at a time, as a user has. (Earlier both apps stayed open,
      SIGSTOPped between arms; with a second app and its idle engine worker alive, the
      long-lived workers decoded ~7 % slower than a fresh headless run even with no UI
      running, a cost of the benchmark's set-up, not of watching.) Arms rotate.
      The figure is the engine's own decode rate (llama.cpp's perf clock: t_eval over
      n_eval, in the session log's engine truth and in run's JSON), so it is the engine
      that slowed, not our stamps: watched ÷ frozen and watched ÷ headless, per round,
      then the median. Beside it, while the TUI streams (first to last token, on the
      answer's own stamps; CPU read every 50 ms): the app process's CPU (its main thread
      = the UI; the whole process) and the terminal's (the tmux server's: a terminal
      costs CPU too, on this machine when local); and the UI's and the app's from half
      a second after the first token on (an answer's start costs the UI ~3× its later
      rate: the new turn's layouts; --parts ui measures mid-way through a long answer).
ui    The UI alone at a fixed pace: the synthetic engine at 100 tok/s (its clock is a
      sleeping thread), 15 s of streaming at each size: the app's main thread and
      process CPU.
ab    A/B on one machine: A = the embedded llama.cpp (worker process), B = llama-server
      (loopback, 2 threads), the same prompt. Each engine alone, then A/B turns as the
      default schedule runs them (sequential: shared machine, order alternating), then
      with ``ab_schedule = "concurrent"``. Per engine: decode tok/s (engine's clock) and
      TTFT, each ÷ alone; the B/A ratios of each schedule beside B/A of the engines alone.
panel The engine panel (issue 52): a llama-server (loopback, 1 thread) answers the same
      prompt headless (``infertop run``) and in the TUI with its server panel reading the
      server's /metrics and /slots once a second — at 120×40 the panel shown in full,
      at 80×24 its one line in the strip — arms rotating; the engine's own decode rate
      (llama-server's timings), watched ÷ headless per round, and the panel seen on
      screen (the workload happened as meant).
bench The bench's own requests: ``infertop bench`` against a llama-server at c = 1 and 4:
      the requests it made that were not measured, per level, as its report lists them.

    .venv/bin/python -m benchmarks.watch_cost [--rounds 8] [--tokens 256] [--parts tui,ui,panel]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import BinaryIO

from benchmarks import smoke
from benchmarks.ui_common import (
    ROOT,
    StatClock,
    TmuxApp,
    cpu_seconds,
    stat_fields,
    thread_cpu,
)

PROMPT = "Write a long story about a lighthouse keeper and a storm."
SIZES = ((80, 24), (120, 40))
REST_S = 2.0  # idle before every measured answer: each starts on a machine at rest
# The UI's CPU is also given from this long after an answer's first token on: its start
# costs more (a new turn laid out twice, then repainted), docs/performance.md#watching.
START_S = 0.5
Reading = tuple[int, float, float, float]  # monotonic ns; CPU s of UI thread, app, terminal


def load() -> str:
    return "load avg " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def med(xs: list[float]) -> float:
    xs = [x for x in xs if not math.isnan(x)]
    return statistics.median(xs) if xs else math.nan


def med_ci(xs: list[float], resamples: int = 2000) -> str:
    """The median and its 95 % bootstrap interval (percentile; a fixed seed, so a run's
    output is reproducible from its per-round figures)."""
    xs = [x for x in xs if not math.isnan(x)]
    if not xs:
        return "nan"
    rnd = random.Random(1)
    meds = sorted(statistics.median(rnd.choices(xs, k=len(xs))) for _ in range(resamples))
    lo, hi = meds[int(0.025 * resamples)], meds[int(0.975 * resamples) - 1]
    return f"{statistics.median(xs):.3f} (95 % CI {lo:.3f}–{hi:.3f})"


def env_for(tmp: Path) -> dict[str, str]:
    return {
        "XDG_STATE_HOME": str(tmp / "state"),
        "XDG_DATA_HOME": str(tmp / "data"),
        "XDG_CONFIG_HOME": str(tmp / "config"),
        "INFERTOP_CONFIG": "",
    }


def config(tmp: Path, tokens: int, engines: str, default: str, ui: str = "") -> Path:
    path = tmp / f"cfg-{time.time_ns()}.toml"
    path.write_text(
        f'default_engine = "{default}"\nsession_dir = "{tmp / "sessions"}"\n'
        f"[generation]\nmax_tokens = {tokens}\ntemperature = 0.0\nseed = 1\n"
        f"[ui]\n{ui}\n{engines}"
    )
    return path


LOCAL = '[engines.local]\nkind = "llamacpp"\nmodel = "default"\n'


class Watched:
    """The real app in tmux; turns typed as a user would; records read from its log."""

    def __init__(self, cfg: Path, size: tuple[int, int], tmp: Path) -> None:
        self.tmp = tmp
        self.log_dir = tmp / "sessions"
        self.before = set(self.log_dir.glob("*.jsonl")) if self.log_dir.exists() else set()
        self._log: BinaryIO | None = None  # the app's session log, once it exists
        self._partial = b""  # a record not yet whole
        self._records: list[dict] = []
        self.app = TmuxApp(["--config", str(cfg)], size=size, env=env_for(tmp))
        self.app.wait(lambda s: s.count("ready") >= 1 and "loading" not in s, 60)
        self.server_pid = int(self.app.tmux("display", "-p", "#{pid}").strip())
        self._clocks = (  # the UI thread, the app process, the terminal (tmux's server)
            StatClock(self.app.pid, self.app.pid),
            StatClock(self.app.pid),
            StatClock(self.server_pid),
        )

    def records(self) -> list[dict]:
        """The app's session-log records so far (the app writes one log, found once).
        Read incrementally from an open handle: this is polled every 50 ms while the app
        streams, and re-parsing the whole log each time (then listing the folder and
        opening the file each time) cost this process up to a few per cent of a core,
        taken from the engine it measures."""
        if self._log is None:
            new = [p for p in sorted(self.log_dir.glob("*.jsonl")) if p not in self.before]
            if not new:
                return self._records
            self._log = new[0].open("rb")
        data = self._log.read()
        if data:
            lines = (self._partial + data).split(b"\n")
            self._records += [json.loads(x) for x in lines[:-1] if x.strip()]
            self._partial = lines[-1]
        return self._records

    def turn(self, prompt: str, expect: int) -> dict[str, float]:
        """Type ``prompt``, wait for ``expect`` more records; CPU shares over the decode
        window (first to last content chunk of the first record, on its own stamps:
        CLOCK_MONOTONIC, as time.monotonic_ns here), from readings every 50 ms."""
        n0 = len(self.records())
        readings = [self._reading()]
        self.app.keys(prompt, literal=True)
        self.app.keys("Enter")
        deadline = time.monotonic() + 300
        while len(self.records()) < n0 + expect:
            if time.monotonic() > deadline:
                raise TimeoutError(self.app.screen())
            time.sleep(0.05)
            readings.append(self._reading())
        readings.append(self._reading())  # the record may have come after the last one
        rec = self.records()[n0]
        chunks = [c for c in rec["timeline"]["chunks"] if c[1]]
        t0 = rec["t_sent_ns"] + chunks[0][0]
        t1 = rec["t_sent_ns"] + chunks[-1][0]
        time.sleep(0.3)
        self.app.keys("C-l")  # a fresh context for the next answer
        time.sleep(0.3)
        shares = cpu_shares(readings, t0, t1)
        late = cpu_shares(readings, t0 + int(START_S * 1e9), t1)
        return shares | {f"{k}_late": v for k, v in late.items()}

    def _reading(self) -> Reading:
        ui, app, term = self._clocks
        return (time.monotonic_ns(), ui.seconds(), app.seconds(), term.seconds())

    def frozen_turn(self, prompt: str) -> None:
        """The control: the same app and engine worker, the app stopped (:meth:`pause`) from the
        moment its worker starts on the prompt until the worker goes idle (decode over),
        so nothing of the UI runs while the engine decodes; then it wakes, draws and
        records the answer. The start is seen in the worker's CPU time (/proc, every
        2 ms), not on the screen: polling the screen at that rate forks a tmux client
        each time, CPU the watched arm does not pay."""
        n0 = len(self.records())
        worker = self.worker()
        idle = cpu_seconds(worker)
        self.app.keys(prompt, literal=True)
        self.app.keys("Enter")
        deadline = time.monotonic() + 60
        while cpu_seconds(worker) - idle < 0.02:  # 20 ms of work: the prompt is in
            if time.monotonic() > deadline:
                raise TimeoutError(self.app.screen())
            time.sleep(0.002)
        self.pause()
        try:
            last, still = cpu_seconds(worker), 0
            while still < 3:  # 0.3 s without CPU: the answer is done
                time.sleep(0.1)
                now = cpu_seconds(worker)
                still, last = (still + 1 if now - last < 0.005 else 0), now
        finally:
            self.resume()
        while len(self.records()) <= n0:
            time.sleep(0.05)
        time.sleep(0.3)
        self.app.keys("C-l")
        time.sleep(0.3)

    def worker(self) -> int:
        """The PID of the app's engine worker process (its child)."""
        import psutil

        kids = psutil.Process(self.app.pid).children()
        return next(k.pid for k in kids if "worker_main" in " ".join(k.cmdline()))

    def pause(self) -> None:
        """Stop the app (not its engine worker): nothing of the UI runs, not even its
        idle timers. The terminal is stopped first: tmux sends SIGCONT at once to a
        pane's process that something else stopped, so SIGSTOP to the app alone did not
        hold (runs before 2026-12-03 measured the app running in their "frozen" arm).
        Every thread of the app is seen stopped before this returns."""
        os.kill(self.server_pid, signal.SIGSTOP)
        os.kill(self.app.pid, signal.SIGSTOP)
        deadline = time.monotonic() + 2.0
        while not stopped(self.app.pid):
            if time.monotonic() > deadline:
                self.resume()
                raise RuntimeError(f"the app (pid {self.app.pid}) did not stop")
            time.sleep(0.001)

    def resume(self) -> None:
        os.kill(self.app.pid, signal.SIGCONT)
        os.kill(self.server_pid, signal.SIGCONT)
        time.sleep(0.3)  # let it catch up on its timers before the next prompt

    def keys(self, *keys: str) -> None:
        self.app.keys(*keys)
        time.sleep(0.5)

    def close(self) -> None:
        for clock in self._clocks:
            clock.close()
        if self._log is not None:
            self._log.close()
        self.app.close()


def cpu_shares(readings: list[Reading], t0: int, t1: int) -> dict[str, float]:
    """% of a core the UI thread, the app and the terminal used from ``t0`` to ``t1``
    (monotonic ns), between the last reading at or before ``t0`` and the first at or
    after ``t1``."""
    a = max((r for r in readings if r[0] <= t0), key=lambda r: r[0], default=readings[0])
    b = min((r for r in readings if r[0] >= t1), key=lambda r: r[0], default=readings[-1])
    dt = (b[0] - a[0]) / 1e9
    if dt <= 0:  # no reading on one side of the window: no share (a crash lost a run)
        return {k: math.nan for k in ("ui", "app", "term")}
    return {k: 100 * (b[i] - a[i]) / dt for i, k in ((1, "ui"), (2, "app"), (3, "term"))}


def stopped(pid: int) -> bool:
    """Whether every thread of ``pid`` is stopped (state T or t in /proc)."""
    states = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            states.append(stat_fields((task / "stat").read_text())[0])
        except (OSError, IndexError):
            continue  # a thread that just ended
    return bool(states) and all(st in "Tt" for st in states)


def truth_decode(rec: dict) -> float | None:
    truth = rec.get("engine_truth") or {}
    return truth.get("decode_tps")


def run_argv(cfg: Path, tokens: int) -> list[str]:
    """The headless run: the prompt, greedy, ``tokens`` tokens, its result as JSON."""
    return [sys.executable, "-m", "tui", "--config", str(cfg), "run", "--prompt", PROMPT] + [
        "--max-tokens",
        str(tokens),
        "--temperature",
        "0",
        "--seed",
        "1",
        "--json",
    ]


def headless(cfg: Path, tmp: Path, tokens: int) -> float | None:
    env = dict(os.environ, **env_for(tmp), PYTHONPATH=str(ROOT))
    out = subprocess.run(
        run_argv(cfg, tokens),
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp,
        timeout=600,
    )
    if out.returncode != 0:
        print(f"  headless run failed: {out.stderr.strip()[-300:]}")
        return None
    truth = json.loads(out.stdout).get("engine_truth") or {}
    return truth.get("decode_tps")


def headless_in_terminal(cfg: Path, tmp: Path, tokens: int) -> float | None:
    """The same headless run, started in a tmux session as the TUI is (its JSON to a file):
    it decodes ~2 % slower than started from here (docs/performance.md#watching), a cost
    of the terminal, not of watching."""
    out = tmp / f"run-{time.time_ns()}.json"
    env = " ".join(
        f"{k}={shlex.quote(v)}" for k, v in {**env_for(tmp), "PYTHONPATH": str(ROOT)}.items()
    )
    argv = shlex.join(run_argv(cfg, tokens))
    cmd = f"cd {shlex.quote(str(tmp))} && env {env} {argv} > {shlex.quote(str(out))}"
    sock = f"infertop-headless-{os.getpid()}"
    subprocess.run(
        ["tmux", "-L", sock, "new-session", "-d", "-x", "120", "-y", "40", cmd], check=True
    )
    deadline = time.monotonic() + 600
    while subprocess.run(["tmux", "-L", sock, "has-session"], capture_output=True).returncode == 0:
        if time.monotonic() > deadline:
            subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True)
            return None
        time.sleep(0.2)
    try:
        truth = json.loads(out.read_text()).get("engine_truth") or {}
    except (OSError, ValueError):
        print("  headless run in tmux failed")
        return None
    return truth.get("decode_tps")


def part_tui(
    tmp: Path, rounds: int, tokens: int, turns: int, threads: int | None, ui: str = ""
) -> list[float]:
    """Prints the part; returns every figure it measured (decode rates, CPU shares)."""
    print(f"\n== tui: engine decode watched ÷ not watched (embedded SmolLM2, {tokens} tokens) ==")
    engine = LOCAL + (f"n_threads = {threads}\n" if threads else "")
    headless_cfg = config(tmp, tokens, LOCAL, "local")  # run's own choice: every core
    sizes = [f"{w}x{h}" for w, h in SIZES]
    cfgs: dict[str, tuple[Path, tuple[int, int], Path]] = {}
    for (w, h), name in zip(SIZES, sizes, strict=True):
        own = tmp / f"tui-{name}"
        own.mkdir()
        cfg = config(own, tokens, engine, "local", ui)  # --threads, --ui: the TUI's only
        cfgs[name] = (cfg, (w, h), own)
    arms = ["headless", "in tmux"] + sizes
    got: dict[str, list[float]] = {k: [] for k in arms}
    frozen: dict[str, list[float]] = {k: [] for k in sizes}
    cpu: dict[str, list[dict[str, float]]] = {k: [] for k in sizes}
    for r in range(rounds):
        for k, arm in enumerate(arms[r % len(arms) :] + arms[: r % len(arms)]):
            time.sleep(REST_S)
            if arm == "headless":
                got[arm].append(headless(headless_cfg, tmp, tokens) or math.nan)
                continue
            if arm == "in tmux":
                got[arm].append(headless_in_terminal(headless_cfg, tmp, tokens) or math.nan)
                continue
            app = Watched(*cfgs[arm])  # one app on the machine at a time, as a user has
            try:
                app.turn(PROMPT, 1)  # unmeasured: the app's and worker's first answer
                for watched in (True, False) if (r + k) % 2 == 0 else (False, True):
                    time.sleep(REST_S)
                    if watched:
                        cpu[arm].append(app.turn(PROMPT, 1))
                        got[arm].append(truth_decode(app.records()[-1]) or math.nan)
                    else:
                        app.frozen_turn(PROMPT)
                        frozen[arm].append(truth_decode(app.records()[-1]) or math.nan)
            finally:
                app.close()
        print(
            f"round {r + 1}: headless {got['headless'][-1]:.1f} (in tmux "
            f"{got['in tmux'][-1]:.1f})  "
            + "  ".join(f"{a} {got[a][-1]:.1f} (frozen {frozen[a][-1]:.1f})" for a in sizes)
            + f" tok/s (engine's clock)   {load()}"
        )
    for arm in sizes:
        c = cpu[arm]
        vs_frozen = [a / b for a, b in zip(got[arm], frozen[arm], strict=True)]
        vs_headless = [a / b for a, b in zip(got[arm], got["headless"], strict=True)]
        vs_tmux = [a / b for a, b in zip(got[arm], got["in tmux"], strict=True)]
        print(
            f"{arm:>8}: engine decode watched {med(got[arm]):.1f} tok/s, the app frozen "
            f"{med(frozen[arm]):.1f}, headless run {med(got['headless']):.1f} (in tmux "
            f"{med(got['in tmux']):.1f})\n"
            f"          watched ÷ frozen (same worker, back to back): median "
            f"{med_ci(vs_frozen)} (rounds {' '.join(f'{x:.2f}' for x in vs_frozen)})\n"
            f"          watched ÷ headless run (same round): median {med_ci(vs_headless)} "
            f"(rounds {' '.join(f'{x:.2f}' for x in vs_headless)})\n"
            f"          watched ÷ the headless run started in tmux (same round): median "
            f"{med_ci(vs_tmux)} (rounds {' '.join(f'{x:.2f}' for x in vs_tmux)})\n"
            f"          while streaming: UI (main thread) {med([x['ui'] for x in c]):.1f}%, "
            f"app process {med([x['app'] for x in c]):.1f}%, terminal (tmux) "
            f"{med([x['term'] for x in c]):.1f}% of a core; from {START_S:g} s after the "
            f"first token on: UI {med([x['ui_late'] for x in c]):.1f}%, app "
            f"{med([x['app_late'] for x in c]):.1f}%"
        )
    shares = [v for arm in sizes for x in cpu[arm] for k, v in x.items() if "late" not in k]
    return [v for k in got for v in got[k]] + [v for k in frozen for v in frozen[k]] + shares


def part_ui(tmp: Path, seconds: float, settle_s: float = 2.0, idle_s: float = 5.0) -> list[float]:
    """Prints the part; returns the UI's and the process's CPU share while streaming."""
    print("\n== ui: the UI's own CPU at a fixed 100 tok/s (synthetic engine) ==")
    synth = '[engines.s]\nkind = "synthetic"\noptions = { tokens_per_s = 100 }\n'
    cfg = config(tmp, 100_000, synth, "s")
    out: list[float] = []
    for size in SIZES:
        app = TmuxApp(["--config", str(cfg)], size=size, env=env_for(tmp))
        try:
            app.wait(lambda s: "ready" in s, 30)
            time.sleep(settle_s)
            i0 = thread_cpu(app.pid)
            time.sleep(idle_s)
            i1 = thread_cpu(app.pid)
            app.keys(PROMPT, literal=True)
            app.keys("Enter")
            app.wait(lambda s: "streaming" in s, 10)
            time.sleep(settle_s)
            c0, t0 = thread_cpu(app.pid), time.monotonic()
            time.sleep(seconds)
            c1, dt = thread_cpu(app.pid), time.monotonic() - t0
        finally:
            app.close()
        print(
            f"{size[0]}x{size[1]}: streaming: UI {100 * (c1['main'] - c0['main']) / dt:.1f}%, "
            f"process {100 * (sum(c1.values()) - sum(c0.values())) / dt:.1f}% of a core "
            f"(incl. the synthetic engine's clock thread); idle: UI "
            f"{100 * (i1['main'] - i0['main']) / idle_s:.1f}%   {load()}"
        )
        out += [c1["main"] - c0["main"], sum(c1.values()) - sum(c0.values())]
    return out


def part_ab(tmp: Path, rounds: int, tokens: int, answers: int = 2) -> dict[str, dict[str, int]]:
    """Prints the part; returns how many answers each engine gave under each schedule."""
    from tests.support.real_servers import start_llama_server
    from tui.engines.files.default_model import default_model_path

    print("\n== ab: A = embedded llama.cpp, B = llama-server, one machine ==")
    model = default_model_path()
    server = start_llama_server(model, tmp)  # type: ignore[arg-type]
    try:
        engines = LOCAL + f'[engines.server]\nkind = "llama-server"\nurl = "{server.url}"\n'
        runs: dict[str, dict[str, list[dict]]] = {
            s: {"local": [], "server": []} for s in ("alone", "sequential", "concurrent")
        }
        for r in range(rounds):
            for default in ("local", "server"):  # each engine alone
                app = Watched(config(tmp, tokens, engines, default), SIZES[-1], tmp)
                try:
                    for _ in range(answers):  # as many as each engine gives in A/B below
                        app.turn(PROMPT, 1)
                    runs["alone"][default] += app.records()
                finally:
                    app.close()
            for sched in ("sequential", "concurrent"):
                ui = "" if sched == "sequential" else 'ab_schedule = "concurrent"'
                app = Watched(config(tmp, tokens, engines, "local", ui), SIZES[-1], tmp)
                try:
                    app.keys("C-o")
                    app.app.wait(lambda s: s.count("ready") >= 2, 60)
                    for _ in range(answers):  # sequential: A first, then B first
                        app.turn(PROMPT, 2)
                    for rec in app.records():
                        runs[sched][rec["engine"]].append(rec)
                finally:
                    app.close()
            print(f"round {r + 1} done   {load()}")
    finally:
        server.stop()

    def stat(recs: list[dict], key: str) -> float:
        if key == "decode":
            return med([v for v in map(truth_decode, recs) if v])
        return med([x["metrics"]["ttft_ms"] for x in recs if x["metrics"].get("ttft_ms")])

    for key, unit in (("decode", "tok/s (engine's clock)"), ("ttft", "ms TTFT")):
        alone = {e: stat(runs["alone"][e], key) for e in ("local", "server")}
        print(f"{key}: alone A {alone['local']:.1f}, B {alone['server']:.1f} {unit}")
        for sched in ("sequential", "concurrent"):
            now = {e: stat(runs[sched][e], key) for e in ("local", "server")}
            print(
                f"  {sched:>10}: A {now['local']:.1f} ({now['local'] / alone['local']:.2f}× alone)"
                f", B {now['server']:.1f} ({now['server'] / alone['server']:.2f}× alone); "
                f"B/A {now['server'] / now['local']:.2f} vs alone "
                f"{alone['server'] / alone['local']:.2f}"
            )
    return {s: {e: len(recs) for e, recs in by.items()} for s, by in runs.items()}


def part_panel(tmp: Path, rounds: int, tokens: int) -> dict[str, list[float]]:
    """Prints the part; returns each arm's decode rates (and the rounds the panel showed,
    as \"seen <size>\")."""
    from tests.support.real_servers import start_llama_server
    from tui.engines.files.default_model import default_model_path

    print(
        f"\n== panel: llama-server decode, the TUI with its engine panel ÷ headless ({tokens} tok)"
    )
    server = start_llama_server(default_model_path(), tmp)  # type: ignore[arg-type]
    engine = f'[engines.server]\nkind = "llama-server"\nurl = "{server.url}"\n'
    sizes = [f"{w}x{h}" for w, h in SIZES]
    arms = ["headless", *sizes]
    got: dict[str, list[float]] = {k: [] for k in arms}
    seen: dict[str, int] = dict.fromkeys(sizes, 0)
    try:
        cfg = config(tmp, tokens, engine, "server")
        for r in range(rounds):
            for arm in arms[r % len(arms) :] + arms[: r % len(arms)]:
                time.sleep(REST_S)
                if arm == "headless":
                    got[arm].append(headless(cfg, tmp, tokens) or math.nan)
                    continue
                size = SIZES[sizes.index(arm)]
                app = Watched(cfg, size, tmp)
                try:
                    app.turn(PROMPT, 1)  # unmeasured: the app's first answer
                    time.sleep(REST_S)
                    app.turn(PROMPT, 1)
                    got[arm].append(truth_decode(app.records()[-1]) or math.nan)
                    screen = app.app.screen()
                    seen[arm] += ("llama-server · slots" in screen) or ("slots 0/1" in screen)
                finally:
                    app.close()
            print(
                f"round {r + 1}: "
                + "  ".join(f"{a} {got[a][-1]:.1f}" for a in arms)
                + f" tok/s (engine's clock)   {load()}"
            )
    finally:
        server.stop()
    for arm in sizes:
        ratios = [a / b for a, b in zip(got[arm], got["headless"], strict=True)]
        print(
            f"{arm:>8}: watched with the panel {med(got[arm]):.1f} tok/s, headless "
            f"{med(got['headless']):.1f}; watched ÷ headless (same round): median "
            f"{med_ci(ratios)} (rounds {' '.join(f'{x:.2f}' for x in ratios)}); the panel "
            f"on screen in {seen[arm]} of {rounds} rounds"
        )
    return got | {f"seen {arm}": [float(seen[arm])] for arm in sizes}


def part_bench(tmp: Path, runs: int = 4, tokens: int = 32) -> int:
    """Prints the part; returns how many levels the bench's report holds."""
    from tests.support.real_servers import start_llama_server
    from tui.engines.files.default_model import default_model_path

    print("\n== bench: requests the bench made that were not measured ==")
    server = start_llama_server(default_model_path(), tmp, ["-np", "4"])  # type: ignore[arg-type]
    try:
        out = tmp / "bench"
        cmd = [
            sys.executable,
            "-m",
            "tui",
            "bench",
            "--url",
            server.url,
        ]
        cmd += ["--concurrency", "1,4", "--runs", str(runs), "--max-tokens", str(tokens)]
        cmd += ["--out", str(out)]
        proc = subprocess.run(
            cmd, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT))
        )
        if proc.returncode != 0:
            print(f"bench failed: {proc.stderr[-500:]}")
            return 0
        report = json.loads(next(out.rglob("report.json")).read_text())
        levels = 0
        for eng in report["summary"]["engines"]:
            print(f"{eng['name']}: before the levels {eng.get('setup_requests') or {}}")
            for level in eng["levels"]:
                print(f"  {level['label']}: {level['extra_requests']}")
                levels += 1
    finally:
        server.stop()
    return levels


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--turns", type=int, default=1, help="answers per arm per round")
    ap.add_argument("--threads", type=int, help="llama.cpp threads under the TUI")
    ap.add_argument("--seconds", type=float, default=15.0, help="part ui: streaming window")
    ap.add_argument("--parts", default="tui,ui,ab,panel,bench")
    ap.add_argument("--ui", default="", help='part tui: [ui] settings, e.g. "refresh_hz = 2"')
    smoke.add_flag(ap)
    a = ap.parse_args()
    if a.smoke:
        return smoke_run(a)
    tmp = Path(tempfile.mkdtemp(prefix="infertop-watch-"))
    print(f"{os.cpu_count()} cores, {load()}, cwd for children: {tmp}")
    parts = a.parts.split(",")
    if "tui" in parts:
        part_tui(tmp, a.rounds, a.tokens, a.turns, a.threads, a.ui.replace(";", "\n"))
    if "ui" in parts:
        part_ui(tmp, a.seconds)
    if "ab" in parts:
        part_ab(tmp, min(a.rounds, 3), 64)
    if "panel" in parts:
        part_panel(tmp, a.rounds, a.tokens)
    if "bench" in parts:
        part_bench(tmp)
    print(f"\n{load()} at the end")
    return 0


def smoke_run(a: argparse.Namespace) -> int:
    """``--smoke``: every part once, small — one round at one size, 16 tokens, short rests,
    one engine thread (a busy machine's two spin at their barriers), one answer per A/B
    schedule, a bench of two requests per level; each part's figures checked present."""
    global REST_S, SIZES, LOCAL
    REST_S, SIZES, LOCAL = 0.2, ((80, 24),), LOCAL + "n_threads = 1\n"
    tmp = Path(tempfile.mkdtemp(prefix="infertop-watch-"))
    parts = a.parts.split(",")
    if "tui" in parts:
        got = part_tui(tmp, 1, 16, 1, None)  # (LOCAL says one thread)
        smoke.check(got and not any(math.isnan(x) for x in got), f"tui: a figure is lost {got}")
    if "ui" in parts:
        shares = part_ui(tmp, 1.0, settle_s=0.5, idle_s=0.5)
        smoke.check(all(x > 0 for x in shares), f"ui: no CPU read while streaming {shares}")
    if "ab" in parts:
        counts = part_ab(tmp, 1, 16, answers=1)
        smoke.check(all(n >= 1 for by in counts.values() for n in by.values()), f"ab: {counts}")
    if "panel" in parts:
        rates = part_panel(tmp, 1, 16)
        got = [v for k, vs in rates.items() if not k.startswith("seen") for v in vs]
        smoke.check(got and not any(math.isnan(x) for x in got), f"panel: {rates}")
        smoke.check(all(vs == [1.0] for k, vs in rates.items() if k.startswith("seen")), "panel")
    if "bench" in parts:
        levels = part_bench(tmp, runs=2, tokens=8)
        smoke.check(levels == 2, f"bench: {levels} levels in its report")
    smoke.passed(f"parts {a.parts}: every figure measured")
    return 0


if __name__ == "__main__":
    sys.exit(main())
