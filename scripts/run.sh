#!/usr/bin/env bash
# The README's first command: set up (idempotent) and start the TUI on the default model.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/infertop "$@"
