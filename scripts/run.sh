#!/usr/bin/env bash
# The README's first command: set up (idempotent) and start the TUI on the default model.
#   bash scripts/run.sh [--build=now|background|never] [infertop's arguments]
# --build (or INFERTOP_BUILD) says when llama.cpp is compiled for this CPU: by default in
# the background, while the prebuilt llama.cpp answers (scripts/setup.sh says more).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=""
case "${1:-}" in --build=*) BUILD=$1; shift ;; esac
bash scripts/setup.sh $BUILD
exec .venv/bin/infertop "$@"
