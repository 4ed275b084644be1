"""Reading ``infertop agent`` lines (format: tui/telemetry/devices/agent.py) into TelemetrySamples.

The line comes from another machine, so nothing in it is trusted: a line that is not a
version-1 agent object is an :class:`AgentLineError` (the SSH source calls that link
trouble); a field of the wrong type or a number that is not finite reads as unknown
(None). Remote samples carry no engine RSS: no local pid means anything there.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from tui.telemetry.device_dicts import as_int as _int
from tui.telemetry.device_dicts import as_list as _list
from tui.telemetry.device_dicts import as_num as _num
from tui.telemetry.device_dicts import as_str as _str
from tui.telemetry.device_dicts import clamp as _clamp
from tui.telemetry.device_dicts import energy_from_dicts, gpu_from_dict
from tui.telemetry.device_dicts import printable as _text
from tui.telemetry.devices.agent import FORMAT_VERSION
from tui.telemetry.devices.nvml import ABSENT, ERROR, OK, NvmlSample
from tui.telemetry.sampler import TelemetrySample
from tui.telemetry.system import SystemSample

MAX_LINE = 1 << 20  # bytes: a longer line is no agent's


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
    system = _system(data.get("cpu"), data.get("mem"))
    if system is not None:
        system = replace(system, energy=energy_from_dicts(data.get("energy")))
    return TelemetrySample(
        t,
        system,
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
        return NvmlSample(status, message or ("no GPU" if status == ABSENT else "error"))
    devices = enumerate(_list(gpu.get("devices")))
    gpus = [g for g in (gpu_from_dict(i, d) for i, d in devices) if g]
    return NvmlSample(OK, message or f"{len(gpus)} GPU(s)", gpus)


def _brief(v: Any) -> str:
    return _text(repr(v))[:40]


def _preview(line: str | bytes) -> str:
    text = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
    text = _text(text.strip())
    return repr(text[:60] + ("…" if len(text) > 60 else ""))
