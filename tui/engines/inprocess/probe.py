"""The engine probe: load a model and generate one token in a child process.

A llama.cpp build that does not fit the CPU does not fail at import: it dies with
SIGILL at the first matmul (see tui/engines/files/ggml_build.py). So setup and ``infertop
doctor`` prove the engine runs by doing exactly that, in a child process whose death is
a finding, not a crash: "engine probe: ok, 1 token in N ms" or the signal it died of.

The child prints one JSON line per stage it completes (import, load, token); the parent
knows from the last line how far it got.

``python -m tui.engines.inprocess.probe`` runs the probe on the default model and prints one line
(setup uses it); exit status 0 when the engine answered. ``--build=prebuilt`` probes the
prebuilt llama.cpp (xllamacpp) instead: its server started in the child, one token asked
of it over loopback — after the CPU was checked for what that wheel needs (no AVX2: a
message, no child at all).
"""

from __future__ import annotations

import argparse
import json
import platform
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tui.core.child_python import absolute_if_path, child_env, neutral_cwd, python_argv
from tui.engines.files.ggml_build import AMX_CPU_FLAGS, X86_OPTIONS, cpu_flags, cpu_has_amx
from tui.engines.inprocess.llama_builds import (
    PREBUILT,
    TUNED,
    Build,
    build_label,
    prebuilt_cpu_problem,
)

PROBE_TIMEOUT_S = 300.0
PROBE_PROMPT = b"The sky is"


@dataclass
class ProbeResult:
    """How far the probe got, and why it stopped there."""

    ok: bool
    stages: dict[str, dict[str, Any]] = field(default_factory=dict)
    signal: str | None = None  # "SIGILL" when the child died of a signal
    error: str | None = None  # one line for the user when not ok

    @property
    def token_ms(self) -> float | None:
        value = self.stages.get("token", {}).get("token_ms")
        return None if value is None else float(value)

    @property
    def system_info(self) -> str | None:
        value = self.stages.get("import", {}).get("system_info")
        return None if value is None else str(value)

    def describe(self) -> str:
        if self.ok:
            load = self.stages.get("load", {}).get("load_ms")
            extra = f" (model load {load:.0f} ms)" if isinstance(load, (int, float)) else ""
            return f"ok, 1 token in {self.token_ms:.0f} ms{extra}"
        return self.error or "failed"


def run_probe(
    model: str | None = None, timeout_s: float = PROBE_TIMEOUT_S, build: Build = TUNED
) -> ProbeResult:
    """Run the probe in a child process (same interpreter) and read what it got to."""
    if build == PREBUILT:
        problem = prebuilt_cpu_problem()
        if problem is not None:
            return ProbeResult(False, error=problem)
    argv = python_argv("tui.engines.inprocess.probe", "--child", f"--build={build}")
    if model:
        argv += ["--model", absolute_if_path(model) or model]
    try:
        # no code from the user's folder: -P, a neutral cwd, absolute import paths
        done = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout_s,
            env=child_env(),
            cwd=neutral_cwd(),
        )
    except subprocess.TimeoutExpired:
        return ProbeResult(False, error=f"no answer within {timeout_s:.0f} s")
    return read_probe(done.returncode, done.stdout, done.stderr)


def read_probe(returncode: int, stdout: bytes, stderr: bytes) -> ProbeResult:
    """A :class:`ProbeResult` from the child's exit status and output."""
    stages: dict[str, dict[str, Any]] = {}
    for line in stdout.decode("utf-8", errors="replace").splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict) and "stage" in item:
            stages[str(item["stage"])] = item
    if returncode == 0 and "token" in stages:
        return ProbeResult(True, stages)
    reached = next((s for s in ("token", "load", "import") if s in stages), None)
    doing = {None: "importing llama.cpp", "import": "loading the model", "load": "generating"}
    during = doing.get(reached, "finishing")
    last_words = _last_line(stderr)
    if "error" in stages:
        why = str(stages["error"].get("message"))
        return ProbeResult(False, stages, error=f"failed while {during}: {why}")
    if returncode < 0:
        try:
            sig = signal.Signals(-returncode)
            name, text = sig.name, signal.strsignal(sig) or ""
        except ValueError:
            name, text = f"signal {-returncode}", ""
        error = f"died of {name} ({text}) while {during}"
        return ProbeResult(False, stages, signal=name, error=_with(error, last_words))
    error = f"exited with status {returncode} while {during}"
    return ProbeResult(False, stages, error=_with(error, last_words))


def _with(error: str, last_words: str) -> str:
    return f"{error}; last words: {last_words}" if last_words else error


def _last_line(data: bytes) -> str:
    lines = [ln.strip() for ln in data.decode("utf-8", errors="replace").splitlines()]
    lines = [ln for ln in lines if ln]
    return lines[-1][:300] if lines else ""


def system_info_features(system_info: str) -> dict[str, bool]:
    """``"AVX2 = 1 | AMX_INT8 = 0 | ..."`` (llama.cpp's system info) as a dict."""
    features: dict[str, bool] = {}
    for part in system_info.replace("\n", "|").split("|"):
        key, sep, value = part.partition("=")
        key = key.strip().rsplit(":", 1)[-1].strip()
        if sep and key:
            features[key] = value.strip() not in ("0", "")
    return features


def _say(stage: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"stage": stage, **fields}) + "\n")
    sys.stdout.flush()


def _child(model: str | None) -> int:
    """In the child: import, load, one token; a JSON line after each."""
    say = _say
    t0 = time.perf_counter()
    import llama_cpp

    system = llama_cpp.llama_print_system_info().decode(errors="replace").strip()
    say(
        "import",
        import_ms=(time.perf_counter() - t0) * 1000,
        version=getattr(llama_cpp, "__version__", "?"),
        system_info=system,
        gpu_offload=bool(llama_cpp.llama_supports_gpu_offload()),
    )
    from tui.engines.base import EngineError
    from tui.engines.files.default_model import resolve_model_path
    from tui.engines.inprocess.stderr_capture import captured_stderr

    try:
        path = resolve_model_path(model)
    except EngineError as e:
        say("error", message=str(e))
        return 1
    t0 = time.perf_counter()
    with captured_stderr() as log:
        try:
            llm = llama_cpp.Llama(model_path=str(path), n_ctx=256, verbose=False)
        except (ValueError, RuntimeError, OSError) as e:
            llm, err = None, log.last_line() or str(e)
    if llm is None:
        say("error", message=f"could not load {path}: {err}")
        return 1
    say("load", load_ms=(time.perf_counter() - t0) * 1000, model=str(path))
    t0 = time.perf_counter()
    tokens = llm.tokenize(PROBE_PROMPT, add_bos=True)
    generation = llm.generate(tokens, temp=0.0)
    first = next(iter(generation))
    token_ms = (time.perf_counter() - t0) * 1000
    say("token", token_ms=token_ms, token=int(first), prompt_tokens=len(tokens))
    return 0


def _prebuilt_child(model: str | None) -> int:
    """In the child: import xllamacpp, start its server on the model, ask it for one
    token over loopback; a JSON line after each."""
    import urllib.request

    t0 = time.perf_counter()
    import xllamacpp

    _say(
        "import",
        import_ms=(time.perf_counter() - t0) * 1000,
        version=str(getattr(xllamacpp, "__version__", "?")),
        system_info=str(xllamacpp.get_system_info()).strip(),
        gpu_offload=False,
    )
    from tui.engines.base import EngineError
    from tui.engines.files.default_model import resolve_model_path
    from tui.engines.inprocess.stderr_capture import captured_stderr

    try:
        path = resolve_model_path(model)
    except EngineError as e:
        _say("error", message=str(e))
        return 1
    params = xllamacpp.CommonParams()
    params.model.path = str(path)
    params.n_ctx = 256
    params.n_parallel = 1
    params.hostnames = ["127.0.0.1"]
    params.port = 0
    t0 = time.perf_counter()
    with captured_stderr() as log:
        try:
            server = xllamacpp.Server(params)
        except (RuntimeError, ValueError, OSError) as e:
            server, err = None, str(e)
    if server is None:
        _say("error", message=f"could not load {path}: {log.last_line() or err}")
        return 1
    _say("load", load_ms=(time.perf_counter() - t0) * 1000, model=str(path))
    body = json.dumps({"prompt": PROBE_PROMPT.decode(), "n_predict": 1}).encode()
    url = f"{server.listening_address}/completion"
    ask = urllib.request.Request(url, body, {"Content-Type": "application/json"})
    t0 = time.perf_counter()
    with urllib.request.urlopen(ask, timeout=PROBE_TIMEOUT_S) as answer:  # noqa: S310 - loopback
        got = json.loads(answer.read(1 << 20))
    token_ms = (time.perf_counter() - t0) * 1000
    _say("token", token_ms=token_ms, token=str(got.get("content", ""))[:40], prompt_tokens=0)
    return 0


def cpu_line() -> str:
    """The CPU's model name and the SIMD features that matter to llama.cpp."""
    name = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    flags = cpu_flags()
    wanted = {f for _, needs in X86_OPTIONS for f in needs} | set(AMX_CPU_FLAGS)
    shown = sorted(f for f in flags if f in wanted)
    return f"{name}; {' '.join(shown) or 'no x86 SIMD flags read'}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tui.engines.inprocess.probe",
        description="Prove the llama.cpp engine runs: load a model, generate one token, "
        "in a child process.",
    )
    parser.add_argument("--model", help="GGUF path (default: the embedded default model)")
    parser.add_argument(
        "--build",
        choices=(TUNED, PREBUILT),
        default=TUNED,
        help="which llama.cpp: the one built for this CPU (default) or the prebuilt one",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return _prebuilt_child(args.model) if args.build == PREBUILT else _child(args.model)
    result = run_probe(args.model, build=args.build)
    label = build_label(args.build)
    if result.ok:
        print(f"engine probe ({label}): {result.describe()}")
        return 0
    print(f"engine probe FAILED: {label} {result.error}.", file=sys.stderr)
    print(f"  CPU: {cpu_line()}", file=sys.stderr)
    if result.system_info:
        print(f"  llama.cpp build: {result.system_info}", file=sys.stderr)
    print(f"  What to do: {advice(result)}", file=sys.stderr)
    return 1


def advice(result: ProbeResult) -> str:
    if result.signal == "SIGILL":
        amx = " This CPU has AMX;" if cpu_has_amx(cpu_flags()) else ""
        return (
            f"the build uses an instruction this CPU refuses.{amx} rebuild with "
            "'rm -rf ~/.cache/infertop/wheels-* .venv && bash scripts/setup.sh' (the "
            "setup builds for this CPU's own flags, AMX off) and, if it still fails, "
            "report the two lines above."
        )
    if result.signal is not None:
        return "run 'infertop doctor' for details and report the lines above."
    return "check the model path and run 'infertop doctor'."


if __name__ == "__main__":
    sys.exit(main())
