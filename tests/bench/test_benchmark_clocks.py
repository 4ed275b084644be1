"""The CPU clocks the UI benchmarks read another process with (benchmarks/ui_common.py):
the process's own CPU-time clock (every thread, exited ones too) and a thread's
schedstat, both to the nanosecond, checked against CPU time a child spends on purpose."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="Linux /proc")

CHILD = """
import sys, threading, time
def spin(s):
    t = time.thread_time()
    while time.thread_time() - t < s:
        pass
th = threading.Thread(target=spin, args=(0.30,)); th.start(); th.join()
spin(0.20)
print("done", time.process_time(), time.thread_time(), flush=True)
sys.stdin.readline()
"""


def _ui_common() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ui_common", ROOT / "benchmarks/ui_common.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_process_and_thread_clocks_read_a_child_to_the_tick() -> None:
    uc = _ui_common()
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdin is not None
        _, process_s, main_s = child.stdout.readline().split()  # its own clocks, then idle
        proc, main = uc.StatClock(child.pid), uc.StatClock(child.pid, child.pid)
        try:
            if not main.precise:
                pytest.skip("this kernel has no schedstat: the clocks fall back to ticks")
            got_proc, got_main = proc.seconds(), main.seconds()
            time.sleep(0.05)
            assert proc.seconds() - got_proc < 0.005  # it waits on stdin: nothing moves
        finally:
            proc.close()
            main.close()
        # the exited thread's 0.3 s is in the process's time, not in the main thread's
        assert got_proc >= 0.5 and got_main >= 0.2 and got_proc - got_main >= 0.3
        # what the child read of itself, just before it went idle (a few µs of exit path)
        assert abs(got_proc - float(process_s)) < 0.002, (got_proc, process_s)
        assert abs(got_main - float(main_s)) < 0.002, (got_main, main_s)
        assert abs(uc.cpu_seconds(child.pid) - got_proc) < 0.002
        per_thread = uc.thread_cpu(child.pid)
        assert abs(per_thread["main"] - got_main) < 0.002, per_thread
    finally:
        child.kill()
        child.wait()
