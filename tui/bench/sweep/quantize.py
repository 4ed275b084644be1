"""GGUF quantization variants made with llama.cpp's own quantizer (llama-cpp-python).

``llama_model_quantize`` writes a GGUF of another weight type from a GGUF: F16, Q8_0,
Q4_K_M, ... A quantized source (the embedded SmolLM2 is Q4_1) has to be *requantized*
(``allow_requantize``): its weights are dequantized to floats first, so every variant
carries the source's rounding error on top of its own. The honest path is therefore:
source → F16 (a dequantization: F16 holds the Q4_1 values to within F16 rounding), then
F16 → each smaller type, and the quant table says which source the variants came from.

llama.cpp falls back to another type for tensors a type cannot hold (k-quants need rows
of 256: SmolLM2's 576-wide rows get Q5_0 / Q8_0 instead of Q4_K / Q6_K), so a variant's
name is the file type asked for; its size is what was written.

Variants are cached under ``$INFERTOP_VARIANTS_DIR`` or the user cache folder
(``~/.cache/infertop/variants`` on Linux), named by the source file's SHA-256, so a
second run finds them and does no work.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import tempfile
from pathlib import Path

from tui.engines.base import EngineError

VARIANTS_ENV = "INFERTOP_VARIANTS_DIR"

# name -> llama.cpp's LLAMA_FTYPE_MOSTLY_* constant name
QUANT_TYPES: dict[str, str] = {
    "F16": "LLAMA_FTYPE_MOSTLY_F16",
    "BF16": "LLAMA_FTYPE_MOSTLY_BF16",
    "Q8_0": "LLAMA_FTYPE_MOSTLY_Q8_0",
    "Q6_K": "LLAMA_FTYPE_MOSTLY_Q6_K",
    "Q5_K_M": "LLAMA_FTYPE_MOSTLY_Q5_K_M",
    "Q5_0": "LLAMA_FTYPE_MOSTLY_Q5_0",
    "Q4_K_M": "LLAMA_FTYPE_MOSTLY_Q4_K_M",
    "Q4_K_S": "LLAMA_FTYPE_MOSTLY_Q4_K_S",
    "Q4_1": "LLAMA_FTYPE_MOSTLY_Q4_1",
    "Q4_0": "LLAMA_FTYPE_MOSTLY_Q4_0",
    "Q3_K_M": "LLAMA_FTYPE_MOSTLY_Q3_K_M",
    "Q2_K": "LLAMA_FTYPE_MOSTLY_Q2_K",
}
FLOAT_TYPES = ("F16", "BF16")


def variants_dir() -> Path:
    """Where variants are cached (read when called, never at import)."""
    env = os.environ.get(VARIANTS_ENV)
    if env:
        return Path(env).expanduser()
    from platformdirs import user_cache_path

    return user_cache_path("infertop") / "variants"


def file_sha256(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def quant_name(text: str) -> str:
    """A file type name as written by a user ("q4_k_m") → its canonical name ("Q4_K_M")."""
    name = text.strip().upper()
    if name not in QUANT_TYPES:
        known = ", ".join(QUANT_TYPES)
        raise EngineError(f"unknown quantization {text!r} (known: {known})")
    return name


def quantize(source: Path, dest: Path, quant: str, n_threads: int | None = None) -> Path:
    """Write ``dest`` as ``quant`` from the GGUF ``source`` (requantizing when the source
    is quantized). Written to a temporary name first: ``dest`` appears whole or not at all.
    llama.cpp's per-tensor log goes nowhere; a failure keeps its last line."""
    try:
        import llama_cpp
    except ImportError as e:  # pragma: no cover - depends on the install
        raise EngineError(f"llama-cpp-python is not installed ({e})") from None
    from tui.engines.inprocess.stderr_capture import captured_stderr

    name = quant_name(quant)
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, QUANT_TYPES[name])
    params.allow_requantize = True
    params.nthread = n_threads or 0  # 0: llama.cpp uses every hardware thread
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=dest.name + ".", suffix=".part", dir=dest.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        with captured_stderr(True) as log:
            rc = llama_cpp.llama_model_quantize(
                str(source).encode(), str(tmp).encode(), ctypes.byref(params)
            )
        if rc != 0:
            why = log.last_line() or f"return code {rc}"
            raise EngineError(f"llama.cpp could not quantize {source} to {name}: {why}")
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    return dest


def make_variants(
    source: Path,
    quants: list[str],
    cache: Path | None = None,
    n_threads: int | None = None,
) -> dict[str, Path]:
    """GGUF files of ``source`` in each of ``quants`` ({name: path}), cached.

    A float type is written from ``source`` directly; any other type from the F16 variant
    (made first when needed), never by requantizing a quantized file twice."""
    names = [quant_name(q) for q in quants]
    digest = file_sha256(source)
    folder = (cache or variants_dir()) / digest[:16]
    stem = source.name.removesuffix(".gguf")

    def path_of(name: str) -> Path:
        return folder / f"{stem}.{name}.gguf"

    out: dict[str, Path] = {}
    for name in names:
        dest = path_of(name)
        if not dest.is_file():
            base = source
            if name not in FLOAT_TYPES:
                base = path_of("F16")
                if not base.is_file():
                    quantize(source, base, "F16", n_threads)
            quantize(base, dest, name, n_threads)
        out[name] = dest
    (folder / "SOURCE.txt").write_text(
        f"variants of {source} (sha256 {digest}), made with llama.cpp's "
        "llama_model_quantize: F16 from the source, other types from the F16\n",
        encoding="utf-8",
    )
    return out
