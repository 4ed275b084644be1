"""Reading ``infertop agent`` lines (format: tui/telemetry/agent.py) into TelemetrySamples.

The line comes from another machine, so nothing in it is trusted: a line that is not a
version-1 agent object is an :class:`AgentLineError` (the SSH source calls that link
trouble); a field of the wrong type or a number that is not finite reads as unknown
(None). Remote samples carry no engine RSS: no local pid means anything there.
"""

from __future__ import annotations

import json
import math
from typing import Any

from tui.telemetry.agent import FORMAT_VERSION
from tui.telemetry.nvml import (
    ABSENT,
    ERROR,
    OK,
    GpuProcess,
    GpuSample,
    NvmlSample,
    peak_bandwidth_bps,
)
from tui.telemetry.sampler import TelemetrySample
from tui.telemetry.system import SystemSample

MAX_LINE = 1 << 20  # bytes: a longer line is no agent's
MAX_ITEMS = 4096  # cores, GPUs or processes kept from one line
_TEXT = 200


class AgentLineError(ValueError):
    """A line that is not an infertop agent sample; the message says what it was."""


def sample_from_line(line: str | bytes, source: str, t: float) -> TelemetrySample:
    """The sample in one agent line, labelled ``source``, stamped ``t`` (our monotonic
    time when it arrived)."""
    if len(line) > MAX_LINE:
        raise AgentLineError(f"a line of {len(line)} bytes (no agent sends that)")
    try:
        data = json.loads(line)
    except (ValueError, UnicodeDecodeError, RecursionError):  # (nested too deep)
        raise AgentLineError(f"not an agent line: {_preview(line)}") from None
    if not isinstance(data, dict) or "v" not in data:
        raise AgentLineError(f"not an agent line: {_preview(line)}")
    if data["v"] != FORMAT_VERSION:
        raise AgentLineError(
            f"the agent speaks format v{_brief(data['v'])}; this infertop reads "
            f"v{FORMAT_VERSION} (update infertop on one side)"
        )
    errors = [_text(e) for e in _list(data.get("errors")) if isinstance(e, str)]
    return TelemetrySample(
        t,
        _system(data.get("cpu"), data.get("mem")),
        _gpu(data.get("gpu")),
        "; ".join(errors) or None,
        source=source,
    )


def _system(cpu: Any, mem: Any) -> SystemSample | None:
    if not isinstance(cpu, dict):
        return None
    percent = _num(cpu.get("percent"))
    if percent is None:
        return None
    per_core = [_num(x) for x in _list(cpu.get("per_core"))]
    mem = mem if isinstance(mem, dict) else {}
    used, total = _int(mem.get("used")), _int(mem.get("total"))
    return SystemSample(
        cpu_percent=_clamp(percent),
        per_core=[_clamp(x) for x in per_core if x is not None],
        ram_used=used or 0,
        ram_total=total or 0,
        ram_label=_str(mem.get("label")) or "RAM",
    )


def _gpu(gpu: Any) -> NvmlSample:
    if not isinstance(gpu, dict):
        return NvmlSample(ERROR, "the agent sent no GPU reading")
    status = gpu.get("status")
    message = _str(gpu.get("message")) or ""
    if status not in (OK, ABSENT, ERROR):
        return NvmlSample(ERROR, f"the agent sent GPU status {_brief(status)}")
    if status != OK:
        return NvmlSample(status, message or ("no NVIDIA GPU" if status == ABSENT else "error"))
    gpus = [g for g in (_device(i, d) for i, d in enumerate(_list(gpu.get("devices")))) if g]
    return NvmlSample(OK, message or f"{len(gpus)} NVIDIA GPU(s)", gpus)


def _device(position: int, d: Any) -> GpuSample | None:
    if not isinstance(d, dict):
        return None
    index = _int(d.get("index"))
    procs = []
    for p in _list(d.get("processes")):
        if isinstance(p, dict) and _int(p.get("pid")) is not None:
            procs.append(
                GpuProcess(
                    pid=_int(p.get("pid")) or 0,
                    name=_str(p.get("name")),
                    bytes=_int(p.get("bytes")),
                )
            )
    sm, mclk = _int(d.get("sm_clock_mhz")), _int(d.get("mem_clock_mhz"))
    return GpuSample(
        index=position if index is None else index,
        name=_str(d.get("name")) or "GPU",
        util_percent=_num(d.get("util_percent")),
        mem_used=_int(d.get("mem_used")),
        mem_total=_int(d.get("mem_total")),
        power_w=_num(d.get("power_w")),
        temp_c=_num(d.get("temp_c")),
        sm_clock_mhz=sm,
        mem_clock_mhz=mclk,
        peak_bandwidth_bps=peak_bandwidth_bps(
            _int(d.get("bus_width_bits")), _int(d.get("max_mem_clock_mhz"))
        ),
        processes=tuple(procs),
    )


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    try:
        f = float(v)
    except OverflowError:
        return None
    return f if math.isfinite(f) else None


def _int(v: Any) -> int | None:
    f = _num(v)
    return int(f) if f is not None and f >= 0 else None


def _clamp(p: float) -> float:
    return max(0.0, min(100.0, p))


def _list(v: Any) -> list[Any]:
    return v[:MAX_ITEMS] if isinstance(v, list) else []


def _str(v: Any) -> str | None:
    return _text(v) if isinstance(v, str) else None


def _text(s: str) -> str:
    s = "".join(c if c.isprintable() else "?" for c in s[:_TEXT])
    return s


def _brief(v: Any) -> str:
    return _text(repr(v))[:40]


def _preview(line: str | bytes) -> str:
    text = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
    text = _text(text.strip())
    return repr(text[:60] + ("…" if len(text) > 60 else ""))
