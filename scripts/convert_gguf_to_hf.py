"""Convert a GGUF model to a Hugging Face-format folder (bf16 safetensors) for vLLM's CPU build.

vLLM cannot load the SmolLM2 GGUF on CPU (its GGUF plugin dequantises with CUDA-only Triton
kernels), so tests serve an HF copy. Run with the vLLM venv's python (it has transformers,
torch, gguf, accelerate):

    python scripts/convert_gguf_to_hf.py GGUF_PATH OUT_DIR

Writes OUT_DIR atomically (a temporary sibling, renamed at the end) so an interrupted run
never leaves a half-written model that later runs would trust.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def convert(gguf: Path, out: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(
        str(gguf.parent), gguf_file=gguf.name, dtype=torch.bfloat16
    )
    # The weights are dequantised already; keep the saved config free of GGUF quantisation.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(str(tmp))
    tok.save_pretrained(str(tmp))
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: convert_gguf_to_hf.py GGUF_PATH OUT_DIR", file=sys.stderr)
        return 2
    gguf, out = Path(argv[0]), Path(argv[1]).expanduser()
    if not gguf.is_file():
        print(f"GGUF file not found: {gguf}", file=sys.stderr)
        return 2
    convert(gguf, out)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
