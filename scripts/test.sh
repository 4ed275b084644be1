#!/usr/bin/env bash
# The README's second command: set up everything the tests need, then run the whole suite.
# Real engines: llama.cpp in-process, llama-server and vLLM's CPU build are installed
# (cached after the first run) and started by the tests on free loopback ports.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --dev
for extra in scripts/setup-test-servers.sh scripts/setup-e2e.sh scripts/setup-phoenix.sh; do
  [ -f "$extra" ] && bash "$extra"
done
# The servers were just installed, so a server that cannot start is a failure, not a skip.
export INFERTOP_REQUIRE_SERVERS=${INFERTOP_REQUIRE_SERVERS:-1}
# Lint and types first (about 10 s): a style or type slip fails the run like a test.
.venv/bin/ruff check tui tests benchmarks scripts
.venv/bin/ruff format --check tui tests benchmarks scripts
.venv/bin/mypy --strict tui tests/support
status=0
.venv/bin/python -m pytest "$@" || status=$?
# The whole suite (no arguments): the tests that draw through Textual's private fast paths
# run again with them off, on Textual's own code (docs/testing.md, the private_paths mark).
if [ $# -eq 0 ]; then
  INFERTOP_TEXTUAL_PRIVATE=0 .venv/bin/python -m pytest -q -m private_paths tests/app || status=$?
fi
exit "$status"
