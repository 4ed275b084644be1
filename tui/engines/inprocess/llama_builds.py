"""The two llama.cpp builds infertop runs in its engine worker, and how each is named.

- **tuned** (kind ``llamacpp``): llama-cpp-python compiled on this machine for this CPU by
  ``scripts/setup.sh`` — each SIMD option from the CPU's own flags, AMX off
  (tui/engines/files/ggml_build.py). Minutes of compiling, once per machine.
- **prebuilt** (kind ``llamacpp-prebuilt``): PyPI's ``xllamacpp``, a manylinux x86-64
  wheel compiled for a generic AVX2 CPU (AVX, AVX2, FMA, F16C, BMI2; no AVX-512), or its
  macOS arm64 wheel: llama.cpp's own server, run inside the engine's worker process
  (tui/engines/inprocess/llamacpp_prebuilt.py). A pip install: chatting within a minute,
  while the tuned build compiles in the background (tui/engines/files/tuned_build.py).

Each is labelled wherever an engine is named (engine bar, ``run``'s footer and
``--json``, the session log, bench reports, ``doctor``), so a number measured on the
generic build is never taken for the tuned one's. Nothing here imports either library:
:func:`installed_builds` only looks for them.
"""

from __future__ import annotations

import importlib.util
import platform
from collections.abc import Iterable
from typing import Literal

from tui.engines.base import EngineSpec
from tui.engines.files.ggml_build import cpu_flags, prebuilt_problem

Build = Literal["tuned", "prebuilt"]
TUNED: Build = "tuned"
PREBUILT: Build = "prebuilt"
TUNED_KIND = "llamacpp"
PREBUILT_KIND = "llamacpp-prebuilt"
KIND_BUILDS: dict[str, Build] = {TUNED_KIND: TUNED, PREBUILT_KIND: PREBUILT}
MODULES: dict[Build, str] = {TUNED: "llama_cpp", PREBUILT: "xllamacpp"}
PREBUILT_PIN = "xllamacpp==2026.10.11549"  # as pyproject.toml pins it

TUNED_LABEL = "llama.cpp built for this CPU"


def _is_x86_64(machine: str) -> bool:
    return machine.lower() in ("x86_64", "amd64")


def prebuilt_label(machine: str | None = None, system: str | None = None) -> str:
    """ "llama.cpp prebuilt (generic x86-64 AVX2)" — or the platform the wheel is for."""
    machine = machine or platform.machine()
    system = system or platform.system()
    if _is_x86_64(machine):
        return "llama.cpp prebuilt (generic x86-64 AVX2)"
    if system == "Darwin":
        return f"llama.cpp prebuilt (generic macOS {machine})"
    return f"llama.cpp prebuilt (generic {machine})"


def build_label(build: Build) -> str:
    return TUNED_LABEL if build == TUNED else prebuilt_label()


def kind_build(kind: str) -> Build | None:
    """Which llama.cpp build an engine kind runs (None: not an in-process llama.cpp)."""
    return KIND_BUILDS.get(kind)


def is_llama_cpp_kind(kind: str) -> bool:
    return kind in KIND_BUILDS


def kind_label(kind: str) -> str:
    """How an engine kind is named to the user: a llama.cpp build's label, else the kind."""
    build = KIND_BUILDS.get(kind)
    return kind if build is None else build_label(build)


SHORT_LABELS: dict[Build, str] = {TUNED: "llama.cpp (this CPU)", PREBUILT: "llama.cpp (prebuilt)"}


def kind_short_label(kind: str) -> str:
    """The label where a line is short of room (the engine bar): "llama.cpp (prebuilt)";
    "" for a kind with no shorter name."""
    build = KIND_BUILDS.get(kind)
    return "" if build is None else SHORT_LABELS[build]


def installed_builds() -> frozenset[Build]:
    """The builds this environment has (found, not imported: nothing native loads)."""
    found = set()
    for build, module in MODULES.items():
        try:
            if importlib.util.find_spec(module) is not None:
                found.add(build)
        except (ImportError, ValueError):
            continue
    return frozenset(found)


def embedded_kind(builds: frozenset[Build] | None = None) -> str:
    """The kind that runs an in-process GGUF now: the tuned build when installed, else the
    prebuilt one (else the tuned kind, whose load says what is missing)."""
    builds = installed_builds() if builds is None else builds
    return PREBUILT_KIND if PREBUILT in builds and TUNED not in builds else TUNED_KIND


def embedded_engines(builds: frozenset[Build] | None = None) -> dict[str, EngineSpec]:
    """The engines infertop offers on the embedded model when config names none: ``local``
    (the tuned build) and ``prebuilt``, each where installed; ``local`` also when neither
    is (its load then says what is missing)."""
    builds = installed_builds() if builds is None else builds
    engines = {}
    if TUNED in builds or PREBUILT not in builds:
        engines["local"] = EngineSpec(name="local", kind=TUNED_KIND, model="default")
    if PREBUILT in builds:
        engines["prebuilt"] = EngineSpec(name="prebuilt", kind=PREBUILT_KIND, model="default")
    return engines


def embedded_default(engines: dict[str, EngineSpec]) -> str:
    """The default of :func:`embedded_engines`: ``local`` if there, else the first (the
    prebuilt llama.cpp, until the build for this CPU is installed)."""
    return "local" if "local" in engines or not engines else next(iter(engines))


def prebuilt_cpu_problem(flags: Iterable[str] | None = None) -> str | None:
    """Why the prebuilt llama.cpp cannot run on this machine, with what to do instead
    (None: it can). Checked before it is loaded, so a CPU without AVX2 reads a message,
    not a SIGILL (tui/engines/files/ggml_build.py: :func:`prebuilt_problem`)."""
    problem = prebuilt_problem(cpu_flags() if flags is None else flags)
    if problem is None:
        return None
    return f"{problem}. Build llama.cpp for this CPU: INFERTOP_BUILD=now bash scripts/setup.sh"
