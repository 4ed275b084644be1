"""scripts/setup.sh uses nothing bash 3.2 (macOS's /bin/bash) lacks, and no GNU-only tool.

No bash 3.2 binary is here, so this is a check of the constructs added after 3.2 (bash's
NEWS for 4.0–5.2) and of GNU-only tools and flags — shown to catch each of them on a
script that has them, so a pass means something. ``bash -n`` checks the syntax.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SETUP = ROOT / "scripts" / "setup.sh"

# (what, a regex on a code line with comments and quoted text left in: they are rare enough)
NOT_IN_BASH32: tuple[tuple[str, str], ...] = (
    ("associative arrays (bash 4.0)", r"\b(declare|local|typeset)\s+-[a-zA-Z]*A"),
    ("namerefs (bash 4.3)", r"\b(declare|local|typeset)\s+-[a-zA-Z]*n\b"),
    ("declare -g (bash 4.2)", r"\bdeclare\s+-[a-zA-Z]*g"),
    ("mapfile/readarray (bash 4.0)", r"\b(mapfile|readarray)\b"),
    ("case modification ${x,,} ${x^^} (bash 4.0)", r"\$\{[^}]*(,,|\^\^|,|\^)\}"),
    ("${x@Q} transformations (bash 4.4)", r"\$\{[^}]*@[QEPAaKkUuL]\}"),
    ("|& (bash 4.0)", r"\|&"),
    ("&>> (bash 4.0)", r"&>>"),
    ("coproc (bash 4.0)", r"\bcoproc\b"),
    (";& and ;;& in case (bash 4.0)", r";;&|[^;];&"),
    ("negative array index (bash 4.3)", r"\$\{\w+\[-\d+\]\}"),
    ("[[ -v ]] (bash 4.2)", r"\[\[\s+-v\b"),
    ("wait -n (bash 4.3)", r"\bwait\s+-n\b"),
    ("printf %(...)T (bash 4.2)", r"%\([^)]*\)T"),
    ("globstar (bash 4.0)", r"shopt\s+-s\s+globstar"),
    ("{a..b..step} (bash 4.0)", r"\{\d+\.\.\d+\.\.\d+\}"),
    ("$EPOCHSECONDS, $EPOCHREALTIME, $BASHPID (bash 4+)", r"\$\{?(EPOCH\w+|BASHPID)"),
    ('"${arr[@]}" of a maybe-empty array under set -u (fails before 4.4)', r"\"\$\{\w+\[@\]\}\""),
)
GNU_ONLY: tuple[tuple[str, str], ...] = (
    ("md5sum (not on macOS before 15)", r"\bmd5sum\b"),
    ("sha256sum / sha1sum", r"\bsha(1|256|512)sum\b"),
    ("nproc (not on macOS)", r"\bnproc\b"),
    ("timeout (not on macOS)", r"(^|[;&|]\s*|\$\()\s*timeout\s"),
    ("readlink -f (not on older macOS)", r"\breadlink\s+-f\b"),
    ("sed -i without a suffix (BSD needs one)", r"\bsed\s+-i\s"),
    ("grep -P (not in BSD grep)", r"\bgrep\s+-\w*P"),
    ("date -d (GNU)", r"\bdate\s+-d\b"),
    ("stat -c (GNU)", r"\bstat\s+-c\b"),
    ("GNU long options of coreutils", r"\b(ls|cp|mv|rm|mkdir|head|tail|sort|cut)\s+--[a-z]"),
    ("xargs -r (GNU)", r"\bxargs\s+-\w*r"),
)

# Arrays setup.sh expands with "${x[@]}": each is set non-empty before any use.
NON_EMPTY_ARRAYS = {"PIP", "NATIVE_WHEELS"}


def problems(text: str, allow_arrays: set[str] = frozenset()) -> list[str]:  # type: ignore[assignment]
    """Each line (number: what) using a construct bash 3.2 lacks or a GNU-only tool."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        code = line.split(" #", 1)[0] if not line.lstrip().startswith("#") else ""
        for what, pattern in NOT_IN_BASH32 + GNU_ONLY:
            for m in re.finditer(pattern, code):
                name = re.match(r"\"\$\{(\w+)\[@\]\}\"", m.group(0))
                if name and name.group(1) in allow_arrays:
                    continue
                out.append(f"{n}: {what}: {line.strip()}")
    return out


def test_setup_sh_is_bash32_and_posix_tools_only() -> None:
    assert problems(SETUP.read_text(), NON_EMPTY_ARRAYS) == []


def test_the_arrays_it_expands_are_never_empty() -> None:
    """The exemption above is true: PIP is a literal, NATIVE_WHEELS starts from a glob."""
    text = SETUP.read_text()
    assert re.search(r"^PIP=\(\.venv/bin/python ", text, re.M)
    assert re.search(r'^NATIVE_WHEELS=\("\$WHEELS"/llama_cpp_python-\*\.whl\)', text, re.M)
    used = set(re.findall(r"\"\$\{(\w+)\[@\]\}\"", text))
    assert used <= NON_EMPTY_ARRAYS


BAD = """\
declare -A seen
mapfile -t lines < f
echo "${name,,}" |& tee x
cmd &>> log
key=$(cat f | md5sum | cut -c1-10)
jobs=$(nproc)
sed -i 's/a/b/' f
ls --color=never
for f in "${files[@]}"; do :; done
"""


@pytest.mark.parametrize(
    "needle",
    [
        "associative arrays",
        "mapfile",
        "case modification",
        "|&",
        "&>>",
        "md5sum",
        "nproc",
        "sed -i",
        "GNU long options",
        "maybe-empty array",
    ],
)
def test_the_check_catches_what_it_looks_for(needle: str) -> None:
    found = problems(BAD)
    assert any(needle in p for p in found), found


def test_setup_sh_parses() -> None:
    bash = shutil.which("bash")
    assert bash is not None
    subprocess.run([bash, "-n", str(SETUP)], check=True)
