"""Energy on a real NVIDIA GPU: NVML's total-energy counter against integrated power.

A torch child keeps the GPU busy for a known time (a matmul loop), then idles; infertop's
own reader (NvmlProbe through the sampler's EnergyTrack, at ``--interval``) records the
counter and the power. Over the busy window the energy from the counter (the way J/token
is measured where a counter exists) and the energy integrated from sampled power (the
fallback, tui/core/energy.py) must agree within 5 %; the counter's energy ÷ the window is
also compared with NVML's mean power. Prints PASS/FAIL and writes a JSON record.

    python -m benchmarks.energy_vs_power [--seconds 10] [--interval 0.1] [--out FILE]
(needs an NVIDIA GPU of Volta or later, nvidia-ml-py, and PyTorch with CUDA)
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import multiprocessing as mp
import sys
import time
from pathlib import Path

from benchmarks import smoke

ROOT = Path(__file__).resolve().parents[1]


def load(seconds: float, started: mp.Queue) -> None:
    import torch

    m = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    torch.cuda.synchronize()
    started.put(time.monotonic())
    t_end = time.monotonic() + seconds
    while time.monotonic() < t_end:
        for _ in range(20):
            m @ m
        torch.cuda.synchronize()
    started.put(time.monotonic())


def main(seconds: float, interval_s: float, out_path: str | None, is_smoke: bool = False) -> int:
    from tui.core.energy import EnergyPoint, counter_energy, integrated_energy
    from tui.telemetry.devices.nvml import OK, NvmlProbe
    from tui.telemetry.sampler import LocalSource, TelemetrySampler

    probe = NvmlProbe()
    if probe.start().status != OK:
        if is_smoke:
            smoke.skip(f"no NVIDIA GPU here ({probe.message})")
        print(f"no NVIDIA GPU here ({probe.message}): this check needs one")
        return 2
    if is_smoke and importlib.util.find_spec("torch") is None:
        smoke.skip("no torch in this venv to load the GPU")
    probe.close()
    sampler = TelemetrySampler(interval_s, source=LocalSource())
    samples = []
    sampler.on_sample = samples.append
    sampler.start()
    ctx = mp.get_context("spawn")
    q: mp.Queue = ctx.Queue()
    child = ctx.Process(target=load, args=(seconds, q))
    time.sleep(1.0)
    child.start()
    t0 = q.get(timeout=300)
    t1 = q.get(timeout=seconds + 300)
    child.join()
    time.sleep(2 * interval_s + 0.5)
    sampler.stop()
    pts = [
        EnergyPoint(s.t, s.gpu.gpus[0].energy_j, s.gpu.gpus[0].power_w)
        for s in samples
        if s.gpu.gpus
    ]
    by_counter = counter_energy(pts, t0, t1)[0]
    by_power = integrated_energy(pts, t0, t1)[0]
    busy_w = [p.watts for p in pts if t0 <= p.t <= t1 and p.watts is not None]
    record = {
        "gpu": samples[-1].gpu.gpus[0].name if samples and samples[-1].gpu.gpus else None,
        "window_s": t1 - t0,
        "interval_s": interval_s,
        "samples": len(pts),
        "energy_counter_j": by_counter,
        "energy_integrated_j": by_power,
        "mean_power_w": sum(busy_w) / len(busy_w) if busy_w else None,
    }
    checks = []
    if by_counter is None or by_power is None:
        checks.append(("both methods measured", False, f"{by_counter} / {by_power}"))
    else:
        diff = abs(by_counter - by_power) / by_counter
        checks.append(("counter vs integrated power ≤ 5 %", diff <= 0.05, f"{100 * diff:.2f} %"))
        mean = record["mean_power_w"]
        if mean:
            w = by_counter / (t1 - t0)
            checks.append(
                (
                    "counter ÷ window vs mean power ≤ 5 %",
                    abs(w - mean) / mean <= 0.05,
                    f"{w:.1f} W vs {mean:.1f} W",
                )
            )
    for name, ok, detail in checks:
        print(f"{'PASS' if ok else 'FAIL'}  {name}: {detail}")
    record["checks"] = [{"name": n, "ok": ok, "detail": d} for n, ok, d in checks]
    if out_path:
        Path(out_path).write_text(json.dumps(record, indent=2))
    return 0 if all(ok for _, ok, _ in checks) else 1


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--interval", type=float, default=0.1)
    ap.add_argument("--out")
    smoke.add_flag(ap)
    a = ap.parse_args()
    if a.smoke:
        a.seconds = 3.0
    status = main(a.seconds, a.interval, a.out, a.smoke)
    if a.smoke:
        smoke.check(status == 0, "a check failed (above)")
        smoke.passed("the energy counter and integrated power agree under load")
    sys.exit(status)
