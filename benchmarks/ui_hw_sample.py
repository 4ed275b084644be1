"""Print what the hardware sampler reads on this machine (run it once on a GPU box).

Samples psutil and NVML through TelemetrySampler at its default 2 Hz for ``--seconds``,
then prints the last reading in full, the NVML peak bandwidth, and the cost of one
sample (CPU time per reading of psutil + NVML). No Textual involved.

    .venv/bin/python -m benchmarks.ui_hw_sample [--seconds 3]
"""

from __future__ import annotations

import argparse
import os
import time

from benchmarks import smoke
from tui.telemetry.sampler import TelemetrySampler


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=3.0)
    smoke.add_flag(ap)
    args = ap.parse_args()
    if args.smoke:
        args.seconds = 1.2
    sampler = TelemetrySampler()
    sampler.pid = os.getpid()
    sampler.start()
    time.sleep(args.seconds)
    sampler.stop()
    s = sampler.latest
    print(f"samples: {sampler.count} in {args.seconds:.1f} s (interval {sampler.interval_s} s)")
    if s is None:
        print("no sample taken")
        smoke.check(not args.smoke, "the sampler took no sample")
        return
    if s.system:
        sy = s.system
        print(
            f"CPU {sy.cpu_percent:.1f}% over {len(sy.per_core)} cores; {sy.ram_label} "
            f"{sy.ram_used / 2**30:.1f}/{sy.ram_total / 2**30:.1f} GiB; our RSS "
            f"{(sy.rss_bytes or 0) / 2**20:.0f} MiB"
        )
    print(f"NVML: {s.gpu.status} — {s.gpu.message}")
    for g in s.gpu.gpus:
        peak = "–" if g.peak_bandwidth_bps is None else f"{g.peak_bandwidth_bps / 1e9:.0f} GB/s"
        print(
            f"  GPU{g.index} {g.name}: util {g.util_percent}% mem "
            f"{(g.mem_used or 0) / 2**30:.1f}/{(g.mem_total or 0) / 2**30:.1f} GiB "
            f"power {g.power_w} W temp {g.temp_c} °C sm {g.sm_clock_mhz} MHz mem "
            f"{g.mem_clock_mhz} MHz; our process {g.proc_mem}; peak bandwidth {peak}"
        )
    probe = TelemetrySampler()
    probe.source.start()
    c0 = time.process_time()
    for _ in range(50):
        probe.sample_once()
    print(f"cost of one sample: {(time.process_time() - c0) / 50 * 1000:.2f} ms CPU")
    probe.source.close()
    if args.smoke:
        smoke.check(s.system is not None and s.system.per_core, "no CPU reading in the sample")
        smoke.passed(f"{sampler.count} samples, CPU over {len(s.system.per_core)} cores")


if __name__ == "__main__":
    main()
