"""Shared helpers for the UI benchmarks: run infertop in a real terminal (tmux), read
its screen, and measure the app process's CPU from /proc (Linux)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLK_TCK = os.sysconf("SC_CLK_TCK")


def stat_fields(stat: str | bytes) -> list[str]:
    """The fields of a /proc ``stat`` file after the command name (which may hold spaces
    and parentheses): [0] the state, [11] utime, [12] stime, ..."""
    text = stat.decode() if isinstance(stat, bytes) else stat
    return text.rsplit(")", 1)[1].split()


def stat_seconds(stat: str | bytes) -> float:
    """utime + stime, in seconds, from the text of a /proc ``stat`` file."""
    fields = stat_fields(stat)
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def schedstat_seconds(schedstat: str | bytes) -> float:
    """The run time, in seconds, from the text of a /proc ``schedstat`` file (its first
    field: the scheduler's account of the task's time on a CPU, in ns)."""
    return int(schedstat.split(None, 1)[0]) / 1e9


def cpu_seconds(pid: int) -> float:
    """CPU time of a process (all its threads, exited ones too), in seconds: to the ns
    from its CPU-time clock, else utime + stime from /proc (10 ms ticks)."""
    try:
        return time.clock_gettime_ns(process_clock_id(pid)) / 1e9
    except OSError:
        return stat_seconds(Path(f"/proc/{pid}/stat").read_text())


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds per thread of a process: "main" (the UI's) and the others by tid; to
    the ns from each thread's schedstat, else from its stat (10 ms ticks)."""
    out: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            seconds = schedstat_seconds((task / "schedstat").read_text())
        except (OSError, ValueError, IndexError):
            try:
                seconds = stat_seconds((task / "stat").read_text())
            except OSError:
                continue
        name = "main" if task.name == str(pid) else f"tid {task.name}"
        out[name] = out.get(name, 0.0) + seconds
    return out


def process_clock_id(pid: int) -> int:
    """The clock id of process ``pid``'s CPU time (every thread, exited ones too), as
    ``clock_getcpuclockid(3)`` makes it on Linux (``MAKE_PROCESS_CPUCLOCK(pid,
    CPUCLOCK_SCHED)``): any process's is readable with ``clock_gettime``."""
    return ((~pid) << 3) | 2


class StatClock:
    """CPU time (seconds) of one process or one thread of it, to the nanosecond, for polls
    that run while the engine they measure decodes: a process by its CPU-time clock
    (:func:`process_clock_id`, one syscall), a thread by its ``schedstat`` (the
    scheduler's run time in ns) re-read from a file kept open (``os.pread`` at offset 0).
    Both cost a few µs a reading; opening the files and listing a process's threads each
    time cost ~0.9 ms a poll, ~1.8 % of a core at 20 polls a second. Where the kernel has
    neither, utime + stime from the ``stat`` file: whole clock ticks (10 ms), which over a
    2.5 s answer is ±0.4 % of a core in every reading of a share."""

    def __init__(self, pid: int, tid: int | None = None) -> None:
        self._clock: int | None = None
        self._fd = -1
        self.precise = True
        if tid is None:
            try:
                self._clock = process_clock_id(pid)
                time.clock_gettime_ns(self._clock)
                return
            except OSError:
                self._clock = None
        base = f"/proc/{pid}" if tid is None else f"/proc/{pid}/task/{tid}"
        try:
            self._fd = os.open(f"{base}/schedstat", os.O_RDONLY)
        except OSError:
            self.precise = False
            self._fd = os.open(f"{base}/stat", os.O_RDONLY)

    def seconds(self) -> float:
        if self._clock is not None:
            return time.clock_gettime_ns(self._clock) / 1e9
        text = os.pread(self._fd, 4096, 0)
        return schedstat_seconds(text) if self.precise else stat_seconds(text)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def cpu_share(pid: int, seconds: float) -> float:
    """Share of one core the process used over the next ``seconds`` (1.0 = one core)."""
    c0, t0 = cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    return (cpu_seconds(pid) - c0) / (time.monotonic() - t0)


class TmuxApp:
    """infertop (``python -m tui ARGS``) in a detached tmux pane of a fixed size."""

    count = 0

    def __init__(
        self,
        args: list[str],
        size: tuple[int, int] = (120, 36),
        env: dict[str, str] | None = None,
        python_args: list[str] | None = None,
    ) -> None:
        """``python_args``: run ``python PYTHON_ARGS`` instead of ``python -m tui ARGS``."""
        TmuxApp.count += 1
        self.sock = f"infertop-bench-{os.getpid()}-{TmuxApp.count}"
        envs = " ".join(f"{k}={shlex.quote(v)}" for k, v in (env or {}).items())
        argv = python_args if python_args is not None else ["-m", "tui", *args]
        cmd = (
            f"cd {shlex.quote(str(ROOT))} && exec env PYTHONPATH={shlex.quote(str(ROOT))} {envs} "
            f"{shlex.quote(sys.executable)} {' '.join(shlex.quote(a) for a in argv)}"
        )
        self.t_start = time.perf_counter()
        self.tmux("new-session", "-d", "-s", "b", "-x", str(size[0]), "-y", str(size[1]), cmd)
        self.pid = int(self.tmux("display", "-p", "-t", "b", "#{pane_pid}").strip())

    def tmux(self, *args: str) -> str:
        return subprocess.run(
            ["tmux", "-L", self.sock, *args], check=True, capture_output=True, text=True
        ).stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "b")

    def keys(self, *keys: str, literal: bool = False) -> None:
        self.tmux("send-keys", "-t", "b", *(["-l"] if literal else []), *keys)

    def wait(self, pred, timeout: float, poll: float = 0.05) -> str:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout
        while True:
            text = self.screen()
            if pred(text):
                return text
            if time.monotonic() > deadline:
                raise TimeoutError(f"screen did not reach the state:\n{text}")
            time.sleep(poll)

    def close(self) -> None:
        try:
            self.keys("C-q")
            time.sleep(0.5)
        except subprocess.CalledProcessError:
            pass
        subprocess.run(["tmux", "-L", self.sock, "kill-server"], capture_output=True)


def write_config(path: Path, text: str) -> Path:
    path.write_text(text)
    return path
