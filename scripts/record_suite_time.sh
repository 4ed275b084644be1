#!/usr/bin/env bash
# Run the README's test command (.ci/run) from a clean clone of HEAD and record how long
# it took as the last line of docs/testing.md — the one place the suite's time is kept
# (it changes every run; prose elsewhere never quotes it).
#   bash scripts/record_suite_time.sh
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
clone=$(mktemp -d)
trap 'rm -rf "$clone"' EXIT
git clone -q "$root" "$clone/infertop"
start=$(date +%s)
status=0
(cd "$clone/infertop" && bash .ci/run -q) >"$clone/log" 2>&1 || status=$?
secs=$(( $(date +%s) - start ))
summary=$(grep -E '[0-9]+ passed' "$clone/log" | tail -n 1 | tr -d '=' | sed 's/^ *//; s/ *$//')
line="Last run: $(date -u +%Y-%m-%d) at $(git rev-parse --short HEAD), a clean clone, .ci/run: ${summary:-no summary} — $((secs / 60)) min $((secs % 60)) s in all (exit $status), on $(nproc 2>/dev/null || echo ?) cores."
python3 - "$line" <<'PY'
import sys
from pathlib import Path
p = Path("docs/testing.md")
lines = p.read_text().rstrip("\n").split("\n")
if lines[-1].startswith("Last run: "):
    lines.pop()
p.write_text("\n".join(lines) + "\n\n" + sys.argv[1] + "\n")
PY
echo "$line"
exit $status
