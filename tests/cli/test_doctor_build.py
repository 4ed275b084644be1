"""What ``infertop doctor`` says about a llama.cpp build: its SIMD, AMX, and the GPU
backend it offloads to — Metal on Apple Silicon — from llama.cpp's own system info (the
Metal line as llama.cpp's macOS CI logs print it; no Mac here)."""

from __future__ import annotations

from tui.cli.doctor import build_summary, gpu_backends
from tui.engines.inprocess.probe import ProbeResult

# llama_print_system_info() on Apple Silicon (llama.cpp CI logs, M-series runner)
METAL = (
    "Metal : EMBED_LIBRARY = 1 | BF16 = 1 | CPU : NEON = 1 | ARM_FMA = 1 | FP16_VA = 1 | "
    "MATMUL_INT8 = 1 | DOTPROD = 1 | ACCELERATE = 1 | AARCH64_REPACK = 1 | "
)
X86_CPU = "CPU : SSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | AMX_INT8 = 0 | "


def _result(info: str, offload: bool) -> ProbeResult:
    return ProbeResult(True, {"import": {"system_info": info, "gpu_offload": offload}})


def test_metal_build_says_metal() -> None:
    assert gpu_backends(METAL) == ["Metal"]
    assert build_summary(_result(METAL, True), "darwin") == "NEON; no AMX; GPU offload (Metal)"


def test_cpu_build_says_cpu_only() -> None:
    assert gpu_backends(X86_CPU) == []
    assert build_summary(_result(X86_CPU, False), "linux") == "AVX AVX2 F16C FMA; no AMX; CPU only"


def test_older_flat_system_info() -> None:
    """Older llama.cpp printed flat flags ("METAL = 1"); with none, macOS offload is Metal."""
    old = "AVX = 0 | NEON = 1 | ARM_FMA = 1 | METAL = 1 | "
    assert build_summary(_result(old, True), "linux").endswith("GPU offload (Metal)")
    bare = "AVX = 0 | NEON = 1 | ARM_FMA = 1 | "
    assert build_summary(_result(bare, True), "darwin").endswith("GPU offload (Metal)")
    assert build_summary(_result(bare, True), "linux").endswith("GPU offload (backend not named)")
