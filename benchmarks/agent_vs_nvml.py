"""The hardware agent's GPU fields against NVML read directly, on a real NVIDIA GPU.

Runs the agent the two ways the SSH source does — ``infertop agent`` and the agent's
source fed to ``python -`` on stdin — while a torch child holds a known allocation and
keeps the GPU busy, and reads NVML (pynvml) directly at the same moments. Compares, per
sample: name, UUID, memory total (exact), memory used (within 1 % of total: it moves),
utilisation (busy in both while the load runs), power (within 25 %: it moves within a
sample period), temperature (±3 °C), bus width and max memory clock (exact: the roofline's
peak), and the torch child among the agent's GPU processes with NVML's byte count. Prints
PASS/FAIL per check and writes a JSON record (``--out``).

    python -m benchmarks.agent_vs_nvml [--seconds 8] [--gib 4] [--out FILE]
(needs an NVIDIA GPU, nvidia-ml-py and, for the load, PyTorch with CUDA)
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import multiprocessing as mp
import subprocess
import sys
import time
from pathlib import Path

from benchmarks import smoke

ROOT = Path(__file__).resolve().parents[1]


def load(gib: float, seconds: float, ready: mp.Queue) -> None:
    import torch

    a = torch.empty(int(gib * 2**30 / 2), dtype=torch.bfloat16, device="cuda")
    m = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    torch.cuda.synchronize()
    ready.put(a.numel() * 2)
    t_end = time.time() + seconds
    while time.time() < t_end:
        for _ in range(20):
            m @ m
        torch.cuda.synchronize()


def nvml_direct(pynvml, pid: int) -> dict:  # type: ignore[no-untyped-def]
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    mem = pynvml.nvmlDeviceGetMemoryInfo(h)
    procs = {p.pid: p.usedGpuMemory for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h)}
    name = pynvml.nvmlDeviceGetName(h)
    uuid = pynvml.nvmlDeviceGetUUID(h)
    return {
        "name": name.decode() if isinstance(name, bytes) else name,
        "uuid": uuid.decode() if isinstance(uuid, bytes) else uuid,
        "mem_total": mem.total,
        "mem_used": mem.used,
        "util_percent": float(pynvml.nvmlDeviceGetUtilizationRates(h).gpu),
        "power_w": pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0,
        "temp_c": float(pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU)),
        "bus_width_bits": pynvml.nvmlDeviceGetMemoryBusWidth(h),
        "max_mem_clock_mhz": pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_MEM),
        "load_bytes": procs.get(pid),
    }


def agent_lines(how: str, n: int) -> list[tuple[dict, float]]:
    """n agent samples (with our monotonic arrival time), run ``how``."""
    from tui.telemetry.remote.remote_ssh import agent_source

    if how == "infertop agent":
        cmd = [sys.executable, "-m", "tui", "agent", "--interval", "0.5"]
        stdin = subprocess.DEVNULL
    else:  # the SSH source's fallback: the file on stdin of `python -`
        cmd = [sys.executable, "-", "--interval", "0.5"]
        stdin = subprocess.PIPE
    p = subprocess.Popen(cmd, stdin=stdin, stdout=subprocess.PIPE, cwd=ROOT)
    if p.stdin is not None:
        p.stdin.write(agent_source())  # the bundle the SSH source feeds
        p.stdin.close()
    out = []
    assert p.stdout is not None
    for _ in range(n):
        out.append((json.loads(p.stdout.readline()), time.monotonic()))
    p.terminate()
    p.wait()
    return out


def main(seconds: float, gib: float, out_path: str | None, is_smoke: bool = False) -> int:
    import pynvml

    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as e:
        if is_smoke:
            smoke.skip(f"no NVIDIA GPU here ({e})")
        print(f"no NVIDIA GPU here ({e}): this check needs one")
        return 2
    if is_smoke and importlib.util.find_spec("torch") is None:
        smoke.skip("no torch in this venv to load the GPU")
    ctx = mp.get_context("spawn")
    ready: mp.Queue = ctx.Queue()
    child = ctx.Process(target=load, args=(gib, seconds + 20, ready))
    child.start()
    allocated = ready.get(timeout=120)
    time.sleep(1.0)
    checks: list[tuple[str, bool, str]] = []
    record: dict = {"allocated_bytes": allocated, "runs": {}}
    for how in ("infertop agent", "python - (stdin)"):
        samples = agent_lines(how, max(4, int(seconds)))
        direct = nvml_direct(pynvml, child.pid)
        record["runs"][how] = {"agent": samples[-1][0], "nvml": direct}
        d = samples[-1][0]["gpu"]["devices"][0]
        procs = {p["pid"]: p for p in d["processes"]}

        def check(name: str, ok: bool, detail: str, how: str = how) -> None:
            checks.append((f"{how}: {name}", ok, detail))

        check("name", d["name"] == direct["name"], f"{d['name']!r} vs {direct['name']!r}")
        check("uuid", d["uuid"] == direct["uuid"], f"{d['uuid']} vs {direct['uuid']}")
        check("memory total", d["mem_total"] == direct["mem_total"], f"{d['mem_total']}")
        used_diff = abs(d["mem_used"] - direct["mem_used"])
        check("memory used", used_diff < 0.01 * direct["mem_total"], f"Δ {used_diff} B")
        busy = [s["gpu"]["devices"][0]["util_percent"] for s, _ in samples]
        check(
            "util busy",
            min(busy) > 20 and direct["util_percent"] > 20,
            f"{busy} / {direct['util_percent']}",
        )
        check(
            "power",
            abs(d["power_w"] - direct["power_w"]) < 0.25 * direct["power_w"],
            f"{d['power_w']} vs {direct['power_w']} W",
        )
        check(
            "temperature",
            abs(d["temp_c"] - direct["temp_c"]) <= 3,
            f"{d['temp_c']} vs {direct['temp_c']}",
        )
        check(
            "peak inputs",
            (d["bus_width_bits"], d["max_mem_clock_mhz"])
            == (direct["bus_width_bits"], direct["max_mem_clock_mhz"]),
            f"{d['bus_width_bits']} bit × {d['max_mem_clock_mhz']} MHz",
        )
        mine = procs.get(child.pid)
        check(
            "load process",
            mine is not None
            and mine["bytes"] == direct["load_bytes"]
            and mine["bytes"] >= allocated,
            f"{mine} vs NVML {direct['load_bytes']} (allocated {allocated})",
        )
    child.terminate()
    child.join()
    for name, ok, detail in checks:
        print(f"{'PASS' if ok else 'FAIL'}  {name}: {detail}")
    record["checks"] = [{"check": n, "ok": ok, "detail": d} for n, ok, d in checks]
    if out_path:
        Path(out_path).write_text(json.dumps(record, indent=2))
    return 0 if all(ok for _, ok, _ in checks) else 1


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--gib", type=float, default=4.0)
    ap.add_argument("--out", default=None)
    smoke.add_flag(ap)
    a = ap.parse_args()
    if a.smoke:
        a.seconds, a.gib = 4.0, 0.5
    status = main(a.seconds, a.gib, a.out, a.smoke)
    if a.smoke:
        smoke.check(status == 0, "a check failed (above)")
        smoke.passed("the agent's GPU fields agree with NVML under load")
    sys.exit(status)
