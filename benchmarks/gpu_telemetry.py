"""Read infertop's NVML probe on a real NVIDIA GPU, idle and under a known load.

Starts the probe, samples idle for a few seconds, then runs a torch worker (a bf16 matmul
loop and a device-to-device copy loop on a fixed allocation) in a child process, and
samples while it runs. Prints each reading and a summary: utilisation idle vs busy, the
worker's own GPU memory as NVML lists it (against what the worker allocated), power,
temperature, clocks, and the achieved copy bandwidth as a share of NVML's peak
(bus width × max memory clock × 2) — the same roofline arithmetic the decode panel uses.

    python -m benchmarks.gpu_telemetry [--seconds 12] [--gib 8]
(needs an NVIDIA GPU, nvidia-ml-py and, for the load, PyTorch with CUDA)
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import multiprocessing as mp
import statistics
import time

from benchmarks import smoke
from tui.telemetry.devices.nvml import NvmlProbe


def worker(gib: float, seconds: float, out: mp.Queue) -> None:
    import torch

    dev = torch.device("cuda")
    n = int(gib * 2**30 / 2 / 2)  # two bf16 buffers of gib/2 each
    a = torch.empty(n, dtype=torch.bfloat16, device=dev)
    b = torch.empty_like(a)
    m = torch.randn(8192, 8192, dtype=torch.bfloat16, device=dev)
    torch.cuda.synchronize()
    allocated = torch.cuda.memory_reserved()
    out.put(("ready", allocated))
    t_end = time.time() + seconds
    copies, t_copy = 0, 0.0
    while time.time() < t_end:
        for _ in range(20):
            m @ m
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(10):
            b.copy_(a)
        stop.record()
        torch.cuda.synchronize()
        t_copy += start.elapsed_time(stop) / 1000.0
        copies += 10
    # one copy reads and writes the buffer: 2 × its bytes
    out.put(("bandwidth", copies * 2 * a.numel() * 2 / t_copy))


def main(seconds: float, gib: float, is_smoke: bool = False) -> dict:
    probe = NvmlProbe()
    started = probe.start()
    print("probe:", started.status, started.message)
    if started.status != "ok":
        if is_smoke:
            smoke.skip(f"no NVIDIA GPU here ({started.message})")
        return {"status": started.status, "message": started.message}
    if is_smoke and importlib.util.find_spec("torch") is None:
        smoke.skip("no torch in this venv to load the GPU")
    idle = []
    for _ in range(4):
        idle.append(probe.sample())
        time.sleep(0.5)
    ctx = mp.get_context("spawn")
    q: mp.Queue = ctx.Queue()
    proc = ctx.Process(target=worker, args=(gib, seconds, q))
    proc.start()
    kind, reserved = q.get(timeout=120)
    busy = []
    while proc.is_alive():
        s = probe.sample(pid=proc.pid)
        busy.append(s)
        g = s.gpus[0]
        print(
            f"busy: util {g.util_percent}% mem {g.mem_used / 2**30:.2f}/"
            f"{g.mem_total / 2**30:.1f} GiB power {g.power_w} W temp {g.temp_c} C "
            f"sm {g.sm_clock_mhz} MHz memclk {g.mem_clock_mhz} MHz "
            f"proc_mem {g.proc_mem}"
        )
        time.sleep(0.5)
    _, bandwidth = q.get(timeout=30)
    proc.join()
    g0 = idle[-1].gpus[0]
    busy_util = [
        s.gpus[0].util_percent for s in busy if s.gpus and s.gpus[0].util_percent is not None
    ]
    summary = {
        "gpu": g0.name,
        "gpus": len(idle[-1].gpus),
        "idle_util_percent": [s.gpus[0].util_percent for s in idle],
        "busy_util_percent_median": statistics.median(busy_util) if busy_util else None,
        "idle_mem_used_gib": g0.mem_used / 2**30,
        "busy_mem_used_gib_max": max(s.gpus[0].mem_used for s in busy) / 2**30,
        "mem_total_gib": g0.mem_total / 2**30,
        "worker_reserved_gib": reserved / 2**30,
        "worker_proc_mem_gib_nvml": max((s.gpus[0].proc_mem or 0) for s in busy) / 2**30,
        "power_w_idle": g0.power_w,
        "power_w_busy_max": max((s.gpus[0].power_w or 0) for s in busy),
        "temp_c_busy_max": max((s.gpus[0].temp_c or 0) for s in busy),
        "peak_bandwidth_gbs_nvml": (g0.peak_bandwidth_bps or 0) / 1e9,
        "copy_bandwidth_gbs_measured": bandwidth / 1e9,
        "copy_share_of_peak": bandwidth / g0.peak_bandwidth_bps if g0.peak_bandwidth_bps else None,
        "samples_busy": len(busy),
    }
    probe.close()
    print(json.dumps(summary, indent=2))
    return summary


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=12)
    ap.add_argument("--gib", type=float, default=8)
    ap.add_argument("--json", help="also write the summary here")
    smoke.add_flag(ap)
    a = ap.parse_args()
    if a.smoke:
        a.seconds, a.gib = 3.0, 0.5
    result = main(a.seconds, a.gib, a.smoke)
    if a.smoke:
        smoke.check(result.get("samples_busy", 0) > 0, "no sample while the GPU was loaded")
        smoke.check((result.get("busy_util_percent_median") or 0) > 0, "the GPU never looked busy")
        smoke.passed(f"{result['samples_busy']} samples of {result['gpu']} under load")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=2)
