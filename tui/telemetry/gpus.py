"""This machine's GPUs, every vendor: one reading, one row shape.

- NVIDIA through NVML (tui/telemetry/devices/nvml.py);
- AMD through amdsmi or the amdgpu sysfs files (tui/telemetry/devices/amd_gpu.py);
- Apple Silicon through IORegistry and, for power, macmon (tui/telemetry/devices/apple_gpu.py) —
  on Apple Silicon only (an Intel Mac's GPU is not unified memory).

The readers' GPUs are numbered in that order (NVIDIA first), so each has its own index in
the panel. No GPU of any kind is a normal state (status "absent", and the message says
what was looked for); NVML failing after it worked is "error" only when no other GPU was
read. ``sample()`` never raises.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tui.core.energy import EnergyReading
from tui.telemetry.device_dicts import energy_from_dicts, gpu_from_dict
from tui.telemetry.devices.apple import is_apple_silicon
from tui.telemetry.devices.nvml import ABSENT, ERROR, OK, GpuSample, NvmlProbe, NvmlSample


class LocalGpus:
    """``amd``/``apple``: reader objects (tests pass fixture-backed ones); by default AMD
    is read from ``root``'s sysfs and Apple's GPU on macOS only."""

    def __init__(
        self,
        nvml: NvmlProbe | None = None,
        amd: Any = None,
        apple: Any = None,
        root: str = "/",
        interval_s: float = 0.5,
    ) -> None:
        self._nvml = nvml or NvmlProbe()
        self._amd = amd
        self._apple = apple
        self._root = root
        self._interval_s = interval_s
        self._nvml_status = NvmlSample(ABSENT, "not started")

    def start(self) -> NvmlSample:
        self._nvml_status = self._nvml.start()
        if self._amd is None:
            from tui.telemetry.devices.amd_gpu import AmdGpus

            self._amd = AmdGpus(self._root)
        if self._apple is None and is_apple_silicon():
            from tui.telemetry.devices.apple_gpu import AppleGpu

            self._apple = AppleGpu(interval_s=self._interval_s)
        if self._apple is not None:
            try:
                self._apple.start()
            except Exception as e:  # a reader bug must not stop the sampling
                self._apple_error = f"Apple GPU: {e}"
        return self.sample(None)[0]

    _apple_error: str | None = None

    def sample(self, pid: int | None) -> tuple[NvmlSample, tuple[EnergyReading, ...]]:
        """The GPUs now, and CPU energy readings that came with them (macmon's CPU power)."""
        nv = self._nvml.sample(pid)
        gpus: list[GpuSample] = list(nv.gpus)
        found: list[str] = [nv.message] if nv.gpus else []
        missing = [f"NVIDIA: {nv.message}"] if not nv.gpus else []
        cpu: tuple[EnergyReading, ...] = ()
        for reader in (self._amd, self._apple):
            if reader is None:
                continue
            try:
                got = reader.read()
            except Exception as e:  # a reader bug must not stop the sampling
                missing.append(f"{type(reader).__name__}: {type(e).__name__}: {e}")
                continue
            devices, message = got[0], got[1]
            if len(got) > 2:
                cpu += energy_from_dicts(got[2])
            start = len(gpus)
            for i, d in enumerate(devices):
                g = gpu_from_dict(i, d)
                if g is not None:
                    gpus.append(replace(g, index=start + i))
            (found if devices else missing).append(message)
        if self._apple is None and is_apple_silicon():
            missing.append("Apple GPU: not read")
        if self._apple_error:
            missing.append(self._apple_error)
        if gpus:
            if nv.status == ERROR:  # NVML failed, the other GPUs still read
                found.append(nv.message)
            return NvmlSample(OK, "; ".join(found), gpus), cpu
        if nv.status == ERROR:
            return nv, cpu
        return NvmlSample(ABSENT, "no GPU (" + "; ".join(missing) + ")"), cpu

    def close(self) -> None:
        self._nvml.close()
        for reader in (self._amd, self._apple):
            close = getattr(reader, "close", None)
            if close is not None:
                try:
                    close()
                except Exception:
                    pass
