#!/usr/bin/env bash
# Set up the OTLP receiver the OpenTelemetry tests start (tests/otel): Arize Phoenix in a
# venv of its own, with the official openai client and its OpenTelemetry instrumentation
# (the differential test's client side). Phoenix needs Python >= 3.11.
# Idempotent: skipped when the venv holds these pins already (a rerun takes ~1 s).
#
#   bash scripts/setup-phoenix.sh
#
# Environment: INFERTOP_CACHE (default ~/.cache/infertop), INFERTOP_PHOENIX_PYTHON (the
# venv's python; the tests read it too), INFERTOP_SKIP_PHOENIX=1 to skip (its tests skip,
# loudly).
set -euo pipefail
cd "$(dirname "$0")/.."

CACHE=${INFERTOP_CACHE:-$HOME/.cache/infertop}
PHOENIX_PY=${INFERTOP_PHOENIX_PYTHON:-$CACHE/venv-phoenix/bin/python}
VENV=$(dirname "$(dirname "$PHOENIX_PY")")
PYTHON=${PYTHON:-python3}
PINS="arize-phoenix==20.26.1 opentelemetry-sdk==1.45.2 opentelemetry-exporter-otlp-proto-http==1.45.2 openai==3.51.0 opentelemetry-instrumentation-openai-v2==2.4b0 opentelemetry-instrumentation-httpx==0.66b2 opentelemetry-util-genai==1.1b0"

say() { printf '\033[1m[setup-phoenix]\033[0m %s\n' "$*"; }

if [ "${INFERTOP_SKIP_PHOENIX:-0}" = 1 ]; then
  say "INFERTOP_SKIP_PHOENIX=1: Phoenix not set up (its tests will skip, loudly)"
  exit 0
fi
STAMP="$VENV/.infertop-phoenix"
if [ -x "$PHOENIX_PY" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$PINS" ]; then
  say "Phoenix venv up to date ($VENV)"
  exit 0
fi
"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || { say "Phoenix needs Python >= 3.11 (found $("$PYTHON" --version)): its tests will skip" >&2; exit 0; }
say "installing Arize Phoenix into $VENV (a few minutes, once)"
mkdir -p "$(dirname "$VENV")"
[ -x "$PHOENIX_PY" ] || "$PYTHON" -m venv "$VENV"
# shellcheck disable=SC2086  # PINS is a list of words
"$PHOENIX_PY" -m pip install -q --disable-pip-version-check $PINS
"$VENV/bin/phoenix" --help >/dev/null
echo "$PINS" > "$STAMP"
say "ready"
