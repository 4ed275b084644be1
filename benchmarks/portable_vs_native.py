"""What the AMX-safe build costs: prefill and decode tok/s of infertop's build ÷ a
``-march=native`` build of the same llama-cpp-python, on this machine, in one run.

infertop's build (scripts/setup.sh, tui/engines/files/ggml_build.py) turns GGML_NATIVE off and
sets each SIMD option from the CPU's flags, AMX off. The native build is llama.cpp's
default (GGML_NATIVE=ON: -march=native), built once into its own venv (``--build-native``,
8-15 min on 2 cores). On a CPU with AMX the native build dies with SIGILL at the first
matmul unless it loads with ``use_extra_bufts = False`` (no AMX path, no weight repacking):
this script shows that once, then measures it that way — the only way it runs there.

Variants, each in a fresh process per run, run in turn (A B C A B C ...) so machine noise
hits all alike:
  portable        infertop's build, llama.cpp's defaults (repacking on)
  native          the -march=native build (extra buffers off where the CPU has AMX)
  portable-norepack  infertop's build with extra buffers off: separates what the build
                  flags cost from what repacking gives

Per run: prefill = ``--prompt-tokens`` tokens evaluated in one call, timed by llama.cpp
(t_p_eval_ms, n_p_eval); decode = ``--tokens`` tokens generated greedily with EOS ignored,
(N − 1) / (t_last − t_first) from stamps taken as each token id returns. Each run checks
its workload happened (n_p_eval and tokens generated are as asked) or says so.

    .venv/bin/python -m benchmarks.portable_vs_native --build-native   # once
    .venv/bin/python -m benchmarks.portable_vs_native [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmarks import smoke
from tui.engines.files.default_model import default_model_path
from tui.engines.files.ggml_build import cpu_flags, cpu_has_amx
from tui.engines.inprocess.probe import read_probe

LLAMA_VERSION = "0.3.36"
DEFAULT_NATIVE_VENV = Path.home() / ".cache" / "infertop" / "bench-native-venv"

CHILD = r"""
import json, sys, time
import llama_cpp
import llama_cpp.llama_cpp as C
a = json.loads(sys.argv[1])
if not a["extra_bufts"]:
    original = C.llama_model_default_params
    def defaults():
        p = original(); p.use_extra_bufts = False; return p
    C.llama_model_default_params = defaults
info = llama_cpp.llama_print_system_info().decode(errors="replace")
print(json.dumps({"stage": "import", "system_info": info}), flush=True)
llm = llama_cpp.Llama(a["model"], n_ctx=a["n_ctx"], n_threads=a["threads"],
                      n_batch=512, verbose=False)
print(json.dumps({"stage": "load"}), flush=True)
text = ("The river runs past the old mill and under the stone bridge, where children "
        "watch the boats go by in the long summer evenings. ")
tokens = llm.tokenize((text * 200).encode(), add_bos=True)[: a["prompt_tokens"]]
ctx = llm._ctx.ctx
llm.reset()
C.llama_perf_context_reset(ctx)
llm.eval(tokens)
C.llama_synchronize(ctx)  # llama.cpp adds a batch's time to its counters here
perf = C.llama_perf_context(ctx)
prefill = {"n_p_eval": int(perf.n_p_eval), "t_p_eval_ms": float(perf.t_p_eval_ms)}
llm.reset()
short = llm.tokenize(b"Write a long story about the sea.", add_bos=True)
stamps = []
gen = llm.generate(short, temp=0.0, reset=True)
for tok in gen:
    stamps.append(time.perf_counter_ns())
    if len(stamps) >= a["tokens"]:
        break
gen.close()
print(json.dumps({"stage": "token", "system_info": info, "prefill": prefill,
                  "decode_tokens": len(stamps),
                  "decode_s": (stamps[-1] - stamps[0]) / 1e9}), flush=True)
"""


def run_variant(python: Path, args: dict[str, Any]) -> dict[str, Any]:
    """One measurement in a fresh process; {"error": ...} when it died."""
    done = subprocess.run(
        [str(python), "-c", CHILD, json.dumps(args)],
        capture_output=True,
        timeout=600,
    )
    probe = read_probe(done.returncode, done.stdout, done.stderr)
    if not probe.ok:
        return {"error": probe.error}
    out = probe.stages["token"]
    prefill = out["prefill"]
    if not prefill["t_p_eval_ms"]:
        return {"error": "llama.cpp reported no prefill time"}
    problems = []
    if prefill["n_p_eval"] != args["prompt_tokens"]:
        problems.append(f"prefill evaluated {prefill['n_p_eval']} of {args['prompt_tokens']}")
    if out["decode_tokens"] != args["tokens"]:
        problems.append(f"decode made {out['decode_tokens']} of {args['tokens']} tokens")
    return {
        "prefill_tps": prefill["n_p_eval"] / (prefill["t_p_eval_ms"] / 1000),
        "decode_tps": (out["decode_tokens"] - 1) / out["decode_s"],
        "system_info": out["system_info"],
        "problems": problems,
    }


def build_native(venv: Path) -> None:
    """A venv with llama-cpp-python built the default way (GGML_NATIVE=ON)."""
    wheels = venv.parent / "bench-native-wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    if not list(wheels.glob(f"llama_cpp_python-{LLAMA_VERSION}-*.whl")):
        print("building llama-cpp-python with -march=native (8-15 min on 2 cores) ...")
        env = dict(os.environ, CMAKE_ARGS="-DGGML_NATIVE=ON")
        subprocess.run(
            [str(py), "-m", "pip", "wheel", "--no-deps", "--no-cache-dir", "-w", str(wheels),
             f"llama-cpp-python=={LLAMA_VERSION}"],
            check=True,
            env=env,
        )  # fmt: skip
    wheel = next(wheels.glob(f"llama_cpp_python-{LLAMA_VERSION}-*.whl"))
    subprocess.run([str(py), "-m", "pip", "install", "-q", str(wheel)], check=True)


def _load() -> str:
    return "load avg " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--tokens", type=int, default=128, help="decode tokens per run")
    ap.add_argument("--prompt-tokens", type=int, default=480, help="prefill tokens per run")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--native-venv", type=Path, default=DEFAULT_NATIVE_VENV)
    ap.add_argument("--build-native", action="store_true", help="build the native venv first")
    smoke.add_flag(ap)
    a = ap.parse_args()
    if a.smoke:
        a.runs, a.tokens, a.prompt_tokens, a.threads = 1, 8, 32, 1

    native_py = a.native_venv / "bin" / "python"
    if a.build_native:
        build_native(a.native_venv)
    if not native_py.exists():
        if not a.smoke:
            print(f"no native build at {a.native_venv}: run with --build-native first")
            return 2
        smoke.left_out("the native arm", f"no native build at {a.native_venv} (--build-native)")
    model = default_model_path()
    if model is None:
        print("default model missing: run scripts/setup.sh")
        return 2
    amx = cpu_has_amx(cpu_flags())
    base = {
        "model": str(model),
        "n_ctx": a.prompt_tokens + a.tokens + 64,
        "threads": a.threads,
        "tokens": a.tokens,
        "prompt_tokens": a.prompt_tokens,
    }
    print(f"CPU has AMX: {amx}; threads {a.threads}; model {model.name}; {_load()}")
    if amx and native_py.exists():  # show the crash the portable build exists to avoid
        crash = run_variant(native_py, {**base, "tokens": 4, "extra_bufts": True})
        print(f"native build, llama.cpp defaults: {crash.get('error') or 'ran (no crash)'}")
    variants = {
        "portable": (Path(sys.executable), True),
        "native": (native_py, not amx),
        "portable-norepack": (Path(sys.executable), False),
    }
    if not native_py.exists():  # (smoke only) the portable arms alone
        del variants["native"]
    results: dict[str, list[dict[str, Any]]] = {k: [] for k in variants}
    for i in range(a.runs):
        for name, (py, extra) in variants.items():
            r = run_variant(py, {**base, "extra_bufts": extra})
            results[name].append(r)
            if "error" in r:
                print(f"run {i + 1} {name:18}: {r['error']}")
                continue
            warn = f"  WORKLOAD: {'; '.join(r['problems'])}" if r["problems"] else ""
            print(
                f"run {i + 1} {name:18}: prefill {r['prefill_tps']:7.1f} tok/s"
                f"   decode {r['decode_tps']:6.1f} tok/s{warn}"
            )
    print()
    for name, (_py, extra) in variants.items():
        info = next((r["system_info"] for r in results[name] if "system_info" in r), "?")
        flags = [p.split("=")[0].strip() for p in info.split("|") if p.strip().endswith("= 1")]
        print(f"{name:18} extra_bufts={extra!s:5}  build: {' '.join(flags)}")
    print()

    def med(name: str, key: str) -> float | None:
        values = [r[key] for r in results[name] if key in r]
        return statistics.median(values) if values else None

    def ratio(x: str, y: str, key: str) -> str:
        """Median of the per-round ratios (each round's runs were back to back), range."""
        if x not in results or y not in results:
            return "n/a (an arm left out)"
        pairs = [
            rx[key] / ry[key]
            for rx, ry in zip(results[x], results[y], strict=True)
            if key in rx and key in ry
        ]
        if not pairs:
            return "n/a"
        return f"{statistics.median(pairs):.3f} [{min(pairs):.3f}–{max(pairs):.3f}]"

    for name in variants:
        p, d = med(name, "prefill_tps"), med(name, "decode_tps")
        if p is not None and d is not None:
            print(f"median {name:18}: prefill {p:7.1f} tok/s   decode {d:6.1f} tok/s")
    print(f"\nper-round ratios, median [min–max] over {a.runs} rounds; {_load()}")
    print(
        f"portable ÷ native:            prefill {ratio('portable', 'native', 'prefill_tps')}"
        f"   decode {ratio('portable', 'native', 'decode_tps')}"
    )
    print(
        f"portable-norepack ÷ native:   prefill "
        f"{ratio('portable-norepack', 'native', 'prefill_tps')}"
        f"   decode {ratio('portable-norepack', 'native', 'decode_tps')}"
    )
    if a.smoke:  # every arm's run made its prefill and its tokens
        bad = {n: r for n, rs in results.items() for r in rs if "error" in r or r["problems"]}
        smoke.check(not bad, f"{bad}")
        smoke.passed(f"arms {', '.join(variants)}: prefill and decode as asked")
    return 0


if __name__ == "__main__":
    sys.exit(main())
