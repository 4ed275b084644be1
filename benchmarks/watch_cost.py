"""What watching costs the engine: the TUI, A/B and the bench, each beside its control.

One run, four parts (``--parts``, default all), on this machine:

tui   The embedded SmolLM2 (in-process llama.cpp, its worker process) answers the same
      prompt, greedy, ``--tokens`` tokens, (a) headless — ``infertop run --json`` — and
      (b) in the real TUI in a real terminal (tmux) at 80×24 and 120×40, the conversation
      cleared between answers (each answer starts from the same context). Rounds are
      interleaved (headless, 80×24, 120×40, rotated each round). The figure is the
      engine's own decode rate (llama.cpp's perf clock: t_eval over n_eval, in the
      session log's engine truth and in run's JSON), so it is the engine that slowed, not
      our stamps: watched ÷ headless, median of rounds. Beside it, while the TUI
      streams (prompt sent → answer recorded): the app process's CPU (its main thread =
      the UI; the whole process) and the terminal's (the tmux server's: a terminal
      costs CPU too, on this machine when local).
ui    The UI alone at a fixed pace: the synthetic engine at 100 tok/s (its clock is a
      sleeping thread), 15 s of streaming at each size: the app's main thread and
      process CPU.
ab    A/B on one machine: A = the embedded llama.cpp (worker process), B = llama-server
      (loopback, 2 threads), the same prompt. Each engine alone, then A/B turns as the
      default schedule runs them (sequential: shared machine, order alternating), then
      with ``ab_schedule = "concurrent"``. Per engine: decode tok/s (engine's clock) and
      TTFT, each ÷ alone; the B/A ratios of each schedule beside B/A of the engines alone.
bench The bench's own requests: ``infertop bench`` against a llama-server at c = 1 and 4:
      the requests it made that were not measured, per level, as its report lists them.

    .venv/bin/python benchmarks/watch_cost.py [--rounds 3] [--tokens 192] [--parts tui,ui]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ui_common import ROOT, TmuxApp, cpu_seconds, thread_cpu  # noqa: E402

PROMPT = "Write a long story about a lighthouse keeper and a storm."
SIZES = ((80, 24), (120, 40))


def load() -> str:
    return "load avg " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


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
        self.app = TmuxApp(["--config", str(cfg)], size=size, env=env_for(tmp))
        self.app.wait(lambda s: s.count("ready") >= 1 and "loading" not in s, 60)
        self.server_pid = int(self.app.tmux("display", "-p", "#{pid}").strip())

    def records(self) -> list[dict]:
        new = [p for p in self.log_dir.glob("*.jsonl") if p not in self.before]
        out = []
        for p in new:
            out += [json.loads(x) for x in p.read_text().splitlines() if x.strip()]
        return out

    def turn(self, prompt: str, expect: int) -> dict[str, float]:
        """Type ``prompt``, wait for ``expect`` more records; CPU over the turn."""
        n0 = len(self.records())
        ui0, app0, term0 = (
            thread_cpu(self.app.pid)["main"],
            cpu_seconds(self.app.pid),
            (cpu_seconds(self.server_pid)),
        )
        t0 = time.monotonic()
        self.app.keys(prompt, literal=True)
        self.app.keys("Enter")
        deadline = time.monotonic() + 300
        while len(self.records()) < n0 + expect:
            if time.monotonic() > deadline:
                raise TimeoutError(self.app.screen())
            time.sleep(0.05)
        dt = time.monotonic() - t0
        ui1, app1 = thread_cpu(self.app.pid)["main"], cpu_seconds(self.app.pid)
        term1 = cpu_seconds(self.server_pid)
        time.sleep(0.3)
        self.app.keys("C-l")  # a fresh context for the next answer
        time.sleep(0.3)
        return {
            "ui": 100 * (ui1 - ui0) / dt,
            "app": 100 * (app1 - app0) / dt,
            "term": 100 * (term1 - term0) / dt,
        }

    def keys(self, *keys: str) -> None:
        self.app.keys(*keys)
        time.sleep(0.5)

    def close(self) -> None:
        self.app.close()


def truth_decode(rec: dict) -> float | None:
    truth = rec.get("engine_truth") or {}
    return truth.get("decode_tps")


def headless(cfg: Path, tmp: Path, tokens: int) -> float | None:
    env = dict(os.environ, **env_for(tmp), PYTHONPATH=str(ROOT))
    out = subprocess.run(
        [sys.executable, "-m", "tui", "--config", str(cfg), "run", "--prompt", PROMPT]
        + ["--max-tokens", str(tokens), "--temperature", "0", "--seed", "1", "--json"],
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


def part_tui(tmp: Path, rounds: int, tokens: int, turns: int, threads: int | None) -> None:
    print(f"\n== tui: engine decode watched ÷ headless (embedded SmolLM2, {tokens} tokens) ==")
    engine = LOCAL + (f"n_threads = {threads}\n" if threads else "")
    cfg = config(tmp, tokens, engine, "local")
    arms = ["headless", *(f"{w}x{h}" for w, h in SIZES)]
    got: dict[str, list[float]] = {a: [] for a in arms}
    cpu: dict[str, list[dict[str, float]]] = {a: [] for a in arms[1:]}
    for r in range(rounds):
        for k in range(len(arms)):
            arm = arms[(r + k) % len(arms)]
            if arm == "headless":
                vals = [headless(cfg, tmp, tokens) for _ in range(turns)]
                got[arm] += [v for v in vals if v]
            else:
                w, h = (int(x) for x in arm.split("x"))
                app = Watched(cfg, (w, h), tmp)
                try:
                    for _ in range(turns):
                        cpu[arm].append(app.turn(PROMPT, 1))
                    recs = app.records()
                finally:
                    app.close()
                got[arm] += [v for v in map(truth_decode, recs) if v]
        print(
            f"round {r + 1}: "
            + "  ".join(f"{a} {med(got[a][-turns:]):.1f}" for a in arms)
            + f" tok/s (engine's clock)   {load()}"
        )
    base = med(got["headless"])
    for arm in arms[1:]:
        c = cpu[arm]
        print(
            f"{arm:>8}: engine decode {med(got[arm]):.1f} tok/s vs headless {base:.1f}: "
            f"ratio {med(got[arm]) / base:.3f}   while streaming: UI (main thread) "
            f"{med([x['ui'] for x in c]):.1f}%, app process {med([x['app'] for x in c]):.1f}%, "
            f"terminal (tmux) {med([x['term'] for x in c]):.1f}% of a core"
        )


def part_ui(tmp: Path, seconds: float) -> None:
    print("\n== ui: the UI's own CPU at a fixed 100 tok/s (synthetic engine) ==")
    synth = '[engines.s]\nkind = "synthetic"\noptions = { tokens_per_s = 100 }\n'
    cfg = config(tmp, 100_000, synth, "s")
    for size in SIZES:
        app = TmuxApp(["--config", str(cfg)], size=size, env=env_for(tmp))
        try:
            app.wait(lambda s: "ready" in s, 30)
            time.sleep(2)
            i0 = thread_cpu(app.pid)
            time.sleep(5)
            i1 = thread_cpu(app.pid)
            app.keys(PROMPT, literal=True)
            app.keys("Enter")
            app.wait(lambda s: "streaming" in s, 10)
            time.sleep(2)
            c0, t0 = thread_cpu(app.pid), time.monotonic()
            time.sleep(seconds)
            c1, dt = thread_cpu(app.pid), time.monotonic() - t0
        finally:
            app.close()
        print(
            f"{size[0]}x{size[1]}: streaming: UI {100 * (c1['main'] - c0['main']) / dt:.1f}%, "
            f"process {100 * (sum(c1.values()) - sum(c0.values())) / dt:.1f}% of a core "
            f"(incl. the synthetic engine's clock thread); idle: UI "
            f"{100 * (i1['main'] - i0['main']) / 5:.1f}%   {load()}"
        )


def part_ab(tmp: Path, rounds: int, tokens: int) -> None:
    from tests.support.real_servers import start_llama_server
    from tui.engines.default_model import default_model_path

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
                app = Watched(config(tmp, tokens, engines, default), SIZES[1], tmp)
                try:
                    app.turn(PROMPT, 1)
                    runs["alone"][default] += app.records()
                finally:
                    app.close()
            for sched in ("sequential", "concurrent"):
                ui = "" if sched == "sequential" else 'ab_schedule = "concurrent"'
                app = Watched(config(tmp, tokens, engines, "local", ui), SIZES[1], tmp)
                try:
                    app.keys("C-o")
                    app.app.wait(lambda s: s.count("ready") >= 2, 60)
                    for _ in range(2):  # sequential: A first, then B first
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


def part_bench(tmp: Path) -> None:
    from tests.support.real_servers import start_llama_server
    from tui.engines.default_model import default_model_path

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
        cmd += ["--concurrency", "1,4", "--runs", "4", "--max-tokens", "32", "--out", str(out)]
        proc = subprocess.run(
            cmd, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT))
        )
        if proc.returncode != 0:
            print(f"bench failed: {proc.stderr[-500:]}")
            return
        report = json.loads(next(out.rglob("report.json")).read_text())
        for eng in report["engines"]:
            for level in eng.get("levels", []):
                extra = level.get("extra_requests")
                print(f"{eng['name']} {level['label']}: extra requests {extra}")
    finally:
        server.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=192)
    ap.add_argument("--turns", type=int, default=2, help="answers per app start")
    ap.add_argument("--threads", type=int, help="llama.cpp threads under the TUI")
    ap.add_argument("--seconds", type=float, default=15.0, help="part ui: streaming window")
    ap.add_argument("--parts", default="tui,ui,ab,bench")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="infertop-watch-"))
    print(f"{os.cpu_count()} cores, {load()}, cwd for children: {tmp}")
    parts = a.parts.split(",")
    if "tui" in parts:
        part_tui(tmp, a.rounds, a.tokens, a.turns, a.threads)
    if "ui" in parts:
        part_ui(tmp, a.seconds)
    if "ab" in parts:
        part_ab(tmp, a.rounds, min(a.tokens, 128))
    if "bench" in parts:
        part_bench(tmp)
    print(f"\n{load()} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
