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


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads), in seconds."""
    return stat_seconds(Path(f"/proc/{pid}/stat").read_text())


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds per thread of a process: "main" (the UI's) and the others by tid."""
    out: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue
        name = "main" if task.name == str(pid) else f"tid {task.name}"
        out[name] = out.get(name, 0.0) + stat_seconds(stat)
    return out


class StatClock:
    """utime + stime (seconds) of one process or thread, re-read from a /proc stat file
    kept open (``os.pread`` at offset 0): ~10 µs a reading, for polls that run while the
    engine they measure decodes (opening the files and listing a process's threads each
    time cost ~0.9 ms a poll, ~1.8 % of a core at 20 polls a second)."""

    def __init__(self, pid: int, tid: int | None = None) -> None:
        path = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
        self._fd = os.open(path, os.O_RDONLY)

    def seconds(self) -> float:
        return stat_seconds(os.pread(self._fd, 4096, 0))

    def close(self) -> None:
        os.close(self._fd)


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
