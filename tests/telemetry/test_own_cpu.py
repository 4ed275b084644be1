"""infertop's own CPU, thread by thread, beside the engine process's.

Each part burns a known amount of CPU time (measured by the thread's or process's own
CPU clock, so a busy machine only makes the test slower), and the reading must give that
amount back to the right part: the main thread is the UI, the reading thread the sampler,
a child process the engine.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

from tui.telemetry.own_cpu import FEW_CORES, CpuShares, OwnCpu

TICK = 0.03  # the kernel counts CPU time in ticks (10 ms at USER_HZ = 100): slack for 3


def burn(seconds: float) -> None:
    """Spin until this thread has used ``seconds`` of CPU."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_each_part_gets_the_cpu_it_used():
    code = (
        "import sys, time\n"
        "print('ready', flush=True)\n"  # started up: what it burns from here is counted
        "sys.stdin.readline()\n"
        "end = time.process_time() + 0.3\n"
        "while time.process_time() < end: pass\n"
        "sys.stdin.readline()\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-I", "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None and child.stdout.readline() == "ready\n"
    started = _cpu_s(child.pid)  # its start-up, before the engine's interval begins
    readings: list[CpuShares] = []
    go, done = threading.Event(), threading.Event()

    def sampler() -> None:
        own = OwnCpu()
        own.read(child.pid)  # the engine's first reading only starts its interval
        go.set()
        burn(0.1)
        done.wait()
        readings.append(own.read(child.pid))

    t = threading.Thread(target=sampler)
    t.start()
    go.wait()
    burn(0.2)  # the UI's work
    assert child.stdin is not None
    child.stdin.write("go\n")
    child.stdin.flush()
    while child.poll() is None and _cpu_s(child.pid) < started + 0.3 - 0.01:
        time.sleep(0.02)
    done.set()
    t.join()
    child.stdin.write("end\n")
    child.stdin.close()
    child.wait(10)
    r = readings[0]
    used = {k: getattr(r, k) * r.interval_s / 100 for k in ("ui", "sampler", "engine")}
    assert abs(used["ui"] - 0.2) <= TICK, used
    assert abs(used["sampler"] - 0.1) <= TICK, used
    assert abs(used["engine"] - 0.3) <= TICK, used
    assert r.engine_pid == child.pid and r.own == r.ui + r.sampler + r.other


def _cpu_s(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_an_engine_in_this_process_is_not_counted_twice():
    own = OwnCpu()
    r = own.read(os.getpid())
    assert r.engine is None and r.engine_pid is None and not r.shares_few_cores


def test_few_cores_shared_with_a_local_engine_are_flagged():
    local = CpuShares(3.0, 0.5, 0.5, engine=180.0, engine_pid=42, cores=FEW_CORES)
    assert local.shares_few_cores
    assert local.describe() == (
        "infertop 4.0% (UI 3.0, sampler 0.5, other 0.5) · engine 180% (pid 42)"
    )
    assert not CpuShares(3.0, 0.5, 0.5, engine=180.0, engine_pid=42, cores=16).shares_few_cores
    assert not CpuShares(3.0, 0.5, 0.5, cores=2).shares_few_cores  # the engine is elsewhere
