"""llama.cpp under a running UI: in infertop's own process vs in its worker process.

In-process, llama.cpp's generation thread needs the GIL between tokens (sampling, the
hand-over, the stamp) and the UI thread holds it while it lays out and paints. So a busy
UI delays tokens: the stamps move late, and decode itself slows because the next
``llama_decode`` waits. In the worker process the engine has its own GIL.

The real app runs in a real terminal (tmux, 120×36, hardware sampler on, answers streaming
into the Markdown pane), autoplaying ``--requests`` prompts with the embedded SmolLM2
model, greedy, ``--tokens`` tokens each; the two modes run in turn (in-process, worker,
in-process, ...). llama.cpp's own clock is the reference: its perf context times each
decode call (t_eval_ms over n_eval tokens), GIL waits excluded. Per request:

  ours ÷ engine   our decode tok/s ((N − 1) / (t_last − t_first), from our stamps) ÷ the
                  engine's decode tok/s. 1.0 = the stamps and the decode pace are the
                  engine's own; below 1 = tokens waited for Python.
  ITL p99 ÷ mean  the 99th-percentile per-token ITL ÷ the engine's mean time per token:
                  how far the slowest gaps stray from the engine's pace.

    .venv/bin/python -m benchmarks.ui_llamacpp_worker [--rounds 3] [--requests 4]
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import smoke
from benchmarks.ui_common import ROOT
from benchmarks.ui_itl_under_load import load

MODES = {"in-process": False, "worker": True}
PROMPT = "Write a long story about a lighthouse keeper and a storm (part {i})."
MIN_TOKENS = 32  # a request that stopped (EOS) before this is too short to read ITL from


def config(isolate: bool, tokens: int, threads: int) -> str:
    return (
        'default_engine = "local"\n'
        f"[generation]\nmax_tokens = {tokens}\ntemperature = 0.0\nseed = 1\n"
        '[engines.local]\nkind = "llamacpp"\nmodel = "default"\n'
        f"n_threads = {threads}\n"
        f"options = {{ isolate = {'true' if isolate else 'false'} }}\n"
    )


def run_app(cfg: Path, session: Path, requests: int, timeout_s: float) -> list[dict]:
    """The real app in tmux, autoplaying ``requests`` prompts; its session records."""
    sock = f"infertop-bench-w-{time.time_ns()}"
    cmd = (
        f"cd {shlex.quote(str(ROOT))} && exec env PYTHONPATH={shlex.quote(str(ROOT))} "
        f"{shlex.quote(sys.executable)} -m benchmarks.ui_itl_under_load"
        f" --inside {cfg} {session} {requests} {shlex.quote(PROMPT)}"
    )
    subprocess.run(
        ["tmux", "-L", sock, "new-session", "-d", "-s", "b", "-x", "120", "-y", "36", cmd],
        check=True,
    )
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            n = len(session.read_text().splitlines()) if session.exists() else 0
            if n >= requests:
                break
            time.sleep(0.2)
    finally:
        subprocess.run(["tmux", "-L", sock, "send-keys", "-t", "b", "C-q"], capture_output=True)
        time.sleep(0.5)
        subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True)
    return [json.loads(x) for x in session.read_text().splitlines()] if session.exists() else []


def per_request(rec: dict) -> dict[str, float] | None:
    m, truth = rec["metrics"], rec.get("engine_truth") or {}
    if m.get("error") or (m.get("output_tokens") or 0) < MIN_TOKENS or not truth.get("decode_ms"):
        return None  # not the workload asked for: left out, and counted below
    per_token_ms = truth["decode_ms"] / truth["decode_tokens"]
    chunks = [c for c in rec["timeline"]["chunks"] if c[1]]
    itl = []  # per-token ITL from the recorded stamps (ms)
    for a, b in zip(chunks, chunks[1:], strict=False):
        k = b[2]
        if k:  # a chunk of text with no token of its own (a UTF-8 tail) adds no gap
            itl += [(b[0] - a[0]) / 1e6 / k] * k
    itl.sort()
    p99 = itl[min(len(itl) - 1, int(0.99 * (len(itl) - 1) + 0.5))]
    return {
        "ratio": m["decode_tps"] / truth["decode_tps"],
        "p99_over_mean": p99 / per_token_ms,
        "decode_tps": m["decode_tps"],
        "engine_tps": truth["decode_tps"],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1, help="llama.cpp threads (UI keeps a core)")
    smoke.add_flag(ap)
    a = ap.parse_args()
    if a.smoke:
        a.rounds, a.requests, a.tokens = 1, 1, MIN_TOKENS
    tmp = Path(tempfile.mkdtemp(prefix="infertop-bench-"))
    results: dict[str, list[dict[str, float]]] = {m: [] for m in MODES}
    dropped = {m: 0 for m in MODES}
    print(f"{load()} at the start; prompt {PROMPT!r}, greedy, up to {a.tokens} tokens")
    for r in range(a.rounds):
        for mode, isolate in MODES.items():
            cfg = tmp / f"{mode}-{r}.toml"
            cfg.write_text(config(isolate, a.tokens, a.threads))
            session = tmp / f"{mode}-{r}.jsonl"
            recs = run_app(cfg, session, a.requests, 120 + a.requests * a.tokens * 0.2)
            rows = [per_request(rec) for rec in recs]
            ok = [x for x in rows if x is not None]
            dropped[mode] += a.requests - len(ok)
            results[mode] += ok
            if ok:
                print(
                    f"round {r + 1} {mode:10}: ours÷engine "
                    + " ".join(f"{x['ratio']:.3f}" for x in ok)
                    + "   ITL p99÷mean "
                    + " ".join(f"{x['p99_over_mean']:.2f}" for x in ok)
                )
    print(f"\n{load()} at the end (2 cores, shared)")
    for mode, rows in results.items():
        if not rows:
            print(f"{mode:10}: no complete requests")
            continue
        med = {k: statistics.median(x[k] for x in rows) for k in rows[0]}
        print(
            f"{mode:10}: {len(rows)} requests ({dropped[mode]} left out: error, missing, or under "
            f"{MIN_TOKENS} tokens): ours÷engine median "
            f"{med['ratio']:.3f} (min {min(x['ratio'] for x in rows):.3f}); ITL p99÷mean median "
            f"{med['p99_over_mean']:.2f}; decode ours {med['decode_tps']:.1f} / engine "
            f"{med['engine_tps']:.1f} tok/s"
        )
    if a.smoke:  # the app answered in both modes, each answer with llama.cpp's own account
        smoke.check(all(len(rows) == a.requests for rows in results.values()), f"{dropped}")
        smoke.passed(f"one answer of {a.tokens} tokens in process and in the worker, under the UI")
    return 0


if __name__ == "__main__":
    sys.exit(main())
