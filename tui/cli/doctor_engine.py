"""What ``infertop doctor`` says about the embedded llama.cpp: which build is installed,
which one the default engine runs, and why — the prebuilt llama.cpp while the build for
this CPU compiles in the background, after it failed, or because setup was told never to
build (tui/engines/inprocess/llama_builds.py, tui/engines/files/build_state.py)."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable

from tui.engines.base import EngineSpec
from tui.engines.files.build_state import BuildWatch, read_mode
from tui.engines.inprocess.llama_builds import (
    PREBUILT,
    PREBUILT_PIN,
    TUNED,
    Build,
    build_label,
    embedded_engines,
    installed_builds,
    kind_build,
    prebuilt_cpu_problem,
)

OK, MISSING, INFO, WARN = "ok", "--", "  ", "!!"
Line = Callable[[str, str, str], None]


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def check_builds(line: Line) -> frozenset[Build]:
    """One line per llama.cpp build: installed (its version) or why not; the builds
    installed."""
    builds = installed_builds()
    tuned = _version("llama_cpp_python")
    if TUNED in builds and tuned:
        line(OK, "llama-cpp-python", f"{tuned} ({build_label(TUNED)})")
    else:
        state = BuildWatch().state()
        why = state.describe() if state is not None else "not built here yet"
        line(INFO if PREBUILT in builds else MISSING, "llama-cpp-python", f"not installed: {why}")
    prebuilt = _version("xllamacpp")
    if PREBUILT in builds and prebuilt:
        problem = prebuilt_cpu_problem()
        status, note = (WARN, f"; but {problem}") if problem else (OK, "")
        line(status, "xllamacpp", f"{prebuilt} ({build_label(PREBUILT)}){note}")
    else:
        line(
            INFO,
            "xllamacpp",
            f"not installed (the prebuilt llama.cpp: pip install '{PREBUILT_PIN}')",
        )
    return builds


def why_this_build(spec: EngineSpec, from_config: bool) -> str:
    """Why the default engine runs the build it runs, in one clause."""
    build = kind_build(spec.kind)
    if build == TUNED:
        return "the build for this CPU is installed"
    if from_config:
        return f"config names it (engine {spec.name!r}, kind {spec.kind})"
    watch = BuildWatch()
    state = watch.state()
    if state is not None and state.phase != "done":
        return state.describe()
    mode = read_mode(watch.state_dir)
    if mode == "never":
        return "setup ran with INFERTOP_BUILD=never: llama.cpp is not built for this CPU here"
    return (
        "llama.cpp is not built for this CPU here yet: `bash scripts/setup.sh` builds it in "
        "the background (--build=now: in the foreground)"
    )


def check_default_build(line: Line, spec: EngineSpec) -> Build | None:
    """The default engine's llama.cpp build and why (None: not an in-process llama.cpp)."""
    build = kind_build(spec.kind)
    if build is None:
        return None
    from_config = spec != embedded_engines().get(spec.name)  # not a built-in engine
    line(
        INFO,
        "embedded engine",
        f"{spec.name}: {build_label(build)} — {why_this_build(spec, from_config)}",
    )
    return build
