"""The background build's state file: written by the builder, read by everyone else.

The builder (tui/engines/files/tuned_build.py) compiles llama.cpp for this CPU while the
prebuilt llama.cpp answers. It keeps one small JSON file in the virtual environment it
builds for, ``VENV/infertop-build/state.json``, rewritten whole (a temporary file, then
``os.replace``) whenever its progress changes and at least every
:data:`HEARTBEAT_S` seconds. The TUI's status line, ``infertop bench`` (which never
measures beside a compile), ``infertop doctor`` and the chat core's "disturbed" mark read
it here.

Times are ``time.perf_counter_ns()`` readings: CLOCK_MONOTONIC on Linux (the clock every
stream event is stamped with, shared by every process of one boot), so "a build ran
while this answer streamed" is a comparison of two intervals on one clock. The file
names the boot it was written in (Linux's boot id): a state from an earlier boot is
history, never running and never overlapping anything now.

The file sits in the user's own venv, but is read as untrusted input all the same:
at most :data:`MAX_STATE_BYTES`, JSON of the expected shape or nothing; its texts are
shown through the terminal-safe filter by whoever shows them. Stdlib only (the builder
runs it before anything else is imported).
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Literal, get_args

STATE_DIR = "infertop-build"
STATE_FILE = "state.json"
MODE_FILE = "mode"  # the INFERTOP_BUILD mode setup.sh last ran with (doctor says why)
MAX_STATE_BYTES = 64 * 1024
HEARTBEAT_S = 2.0
SCHEMA = 1
BUILDER_MODULE = "tui.engines.files.tuned_build"  # in the running builder's command line

Phase = Literal["starting", "compiling", "installing", "probing", "done", "failed"]
RUNNING: frozenset[Phase] = frozenset({"starting", "compiling", "installing", "probing"})
BuildMode = Literal["now", "background", "never"]
BUILD_MODES: tuple[BuildMode, ...] = get_args(BuildMode)
DISTURBED = "a build was compiling"  # the mark's words (turn summary, session log, --json)


def venv_state_dir(prefix: str | None = None) -> Path:
    """Where the state of the build for the environment ``prefix`` (default: this
    interpreter's, ``sys.prefix``) is kept."""
    return Path(prefix or sys.prefix) / STATE_DIR


def boot_id() -> str:
    """This boot's identity (Linux's random boot id); "" where there is none."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            return f.read(64).strip()
    except OSError:
        return ""


@dataclass(frozen=True)
class BuildState:
    """One build of llama.cpp for this CPU, as its builder last wrote it."""

    phase: Phase
    pid: int  # the builder's process id
    what: str  # "llama-cpp-python 0.3.36"
    log: str  # the build's full log (absolute path)
    started_ns: int  # perf_counter_ns when it began
    updated_ns: int  # perf_counter_ns of this write
    ended_ns: int | None = None  # perf_counter_ns when it ended (done or failed)
    boot: str = ""  # boot_id() of the boot it ran in
    started_at: str = ""  # wall-clock time it began (ISO 8601), for people
    step: int | None = None  # the build's own step counter: step / total
    total: int | None = None
    percent: int | None = None  # make's percentage, when there is no step counter
    stage: str = "starting"  # before the first step: what it does ("configuring (CMake)")
    priority: str = ""  # how it was made to yield ("nice 19, ionice idle")
    error: str | None = None  # why it failed, one line
    wheel: str | None = None  # the wheel it built (in the wheelhouse once it runs here)
    schema: int = SCHEMA

    # -- what it says about now ---------------------------------------------------------
    def same_boot(self) -> bool:
        here = boot_id()
        return not here or not self.boot or here == self.boot

    def running(self) -> bool:
        """Its builder is still at work (its phase is not final and the process lives)."""
        return self.phase in RUNNING and self.same_boot() and builder_alive(self.pid)

    def interval(self, now_ns: int | None = None) -> tuple[int, int] | None:
        """[start, end] of the build on the perf_counter_ns clock: the end is its end, now
        while it runs, or its last heartbeat when its builder died unseen. None: another
        boot's build (its stamps are on another clock)."""
        if not self.same_boot():
            return None
        if self.ended_ns is not None:
            return self.started_ns, self.ended_ns
        if self.running():
            return self.started_ns, time.perf_counter_ns() if now_ns is None else now_ns
        return self.started_ns, self.updated_ns

    def ran_between(self, t0_ns: int, t1_ns: int) -> bool:
        """Whether the build ran at some moment in [t0, t1] (both on perf_counter_ns)."""
        span = self.interval(max(t1_ns, time.perf_counter_ns()))
        return span is not None and span[0] <= t1_ns and t0_ns <= span[1]

    def elapsed_s(self) -> float:
        span = self.interval()
        return 0.0 if span is None else max(0.0, (span[1] - span[0]) / 1e9)

    def progress(self) -> str:
        """ "step 40/193 (20%)", "42% (make)", or the stage."""
        if self.step is not None and self.total:
            return f"step {self.step}/{self.total} ({100 * self.step // self.total}%)"
        if self.percent is not None:
            return f"{self.percent}% (make)"
        return self.stage

    def describe(self) -> str:
        """One line for the user (raw: shown through the terminal-safe filter)."""
        from tui.engines.files.build_progress import elapsed_text

        took = elapsed_text(self.elapsed_s())
        if self.phase == "done":
            return f"llama.cpp for this CPU was built in {took} ({self.what}); log: {self.log}"
        if self.phase == "failed":
            why = self.error or "no reason was written"
            return f"building llama.cpp for this CPU failed after {took}: {why}; log: {self.log}"
        if not self.running():
            return (
                f"building llama.cpp for this CPU stopped at {self.progress()} after {took} "
                f"(its process {self.pid} is gone); log: {self.log}"
            )
        doing = {"installing": "installing it", "probing": "checking it runs"}.get(self.phase)
        where = doing or self.progress()
        return f"building llama.cpp for this CPU: {where} · {took} · log: {self.log}"


def builder_alive(pid: int) -> bool:
    """Process ``pid`` lives and (where /proc tells) is a builder, not a reused pid."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False  # another user's process: not our builder
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read(4096)
    except OSError:
        return True  # no /proc (macOS): the signal check is all there is
    return BUILDER_MODULE.encode() in cmdline


# -- the file ---------------------------------------------------------------------------
_INT_FIELDS = ("pid", "started_ns", "updated_ns", "ended_ns", "step", "total", "percent")
_STR_FIELDS = ("what", "log", "boot", "started_at", "stage", "priority", "error", "wheel")
_REQUIRED = ("phase", "pid", "what", "log", "started_ns", "updated_ns")
MAX_TEXT = 2000  # characters kept of any text field


def parse_state(data: bytes) -> BuildState | None:
    """A BuildState from the file's bytes; None for anything but the expected shape
    (not JSON, too big, a field of the wrong type, an unknown phase, a step past its
    total)."""
    if len(data) > MAX_STATE_BYTES:
        return None
    try:
        raw = json.loads(data.decode("utf-8", errors="replace"))
    except (ValueError, RecursionError):
        return None
    if not isinstance(raw, dict) or raw.get("schema") != SCHEMA:
        return None
    if any(raw.get(key) is None for key in _REQUIRED):
        return None
    if raw.get("phase") not in get_args(Phase):
        return None
    fields: dict[str, Any] = {"phase": raw["phase"]}
    for key in _INT_FIELDS:
        value = raw.get(key)
        if value is None:
            continue
        if type(value) is not int or not 0 <= value < 2**63:
            return None
        fields[key] = value
    for key in _STR_FIELDS:
        value = raw.get(key)
        if value is None:
            continue
        if not isinstance(value, str):
            return None
        fields[key] = value[:MAX_TEXT]
    step, total = fields.get("step"), fields.get("total")
    if (step is None) != (total is None) or (step is not None and not 0 < step <= total):
        return None
    if fields.get("percent") is not None and fields["percent"] > 100:
        return None
    return BuildState(**fields)


def read_build_state(state_dir: Path) -> BuildState | None:
    """The build's state in ``state_dir`` (None: no build, or an unreadable file)."""
    path = state_dir / STATE_FILE
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as f:
            data = f.read(MAX_STATE_BYTES + 1)
    except OSError:
        return None
    return parse_state(data)


def write_build_state(state_dir: Path, state: BuildState) -> None:
    """Replace the state file whole (readers see the old one or the new one)."""
    state_dir.mkdir(parents=True, exist_ok=True)
    tmp = state_dir / f".{STATE_FILE}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(asdict(state), separators=(",", ":")), encoding="utf-8")
    os.replace(tmp, state_dir / STATE_FILE)


def updated(state: BuildState, **changes: Any) -> BuildState:
    """``state`` with ``changes`` and this moment as its last update."""
    return replace(state, updated_ns=time.perf_counter_ns(), **changes)


def read_mode(state_dir: Path) -> BuildMode | None:
    """The INFERTOP_BUILD mode setup.sh last ran with (None: not written, or unknown)."""
    try:
        with open(state_dir / MODE_FILE, "rb") as f:
            text = f.read(64).decode("ascii", errors="replace").strip()
    except OSError:
        return None
    for mode in BUILD_MODES:
        if text == mode:
            return mode
    return None


class BuildWatch:
    """The background build of one environment (default: this interpreter's), as its
    state file says at each call (a read of a small file: cheap enough per answer)."""

    def __init__(self, state_dir: Path | None = None) -> None:
        self.state_dir = venv_state_dir() if state_dir is None else state_dir

    def state(self) -> BuildState | None:
        return read_build_state(self.state_dir)

    def disturbance(self, t0_ns: int, t1_ns: int) -> str | None:
        """:data:`DISTURBED` when the build ran at some moment in [t0, t1] (an answer
        from its send to its end), else None."""
        state = self.state()
        return DISTURBED if state is not None and state.ran_between(t0_ns, t1_ns) else None
