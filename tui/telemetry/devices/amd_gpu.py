"""AMD GPUs: the amdgpu driver's sysfs files (no library), or amdsmi when it imports.

Stdlib only, Python 3.6 syntax, no annotations (types are PEP 484 type comments): this
file is bundled into the agent that is fed to a remote ``python3`` (tui/telemetry/devices/agent.py),
so every top-level name here is unique across the bundle.

sysfs, as the kernel documents it (Documentation/gpu/amdgpu/thermal.rst, "GPU
Power/Thermal Controls and Monitoring", and amdgpu's "Memory information" files), under
``ROOT/sys/class/drm/cardN/device/``:

- ``vendor`` ``0x1002``: an AMD GPU (other cards are left to their own readers);
- ``gpu_busy_percent``: how busy the GPU is, % → ``util_percent``;
- ``mem_info_vram_used`` / ``mem_info_vram_total``: bytes → ``mem_used`` / ``mem_total``;
- ``product_name`` (where the board has one), else ``device`` (the PCI id) → ``name``;
- ``hwmon/hwmonM/``: ``power1_average`` (average power, µW; on APUs it includes the
  CPU), else ``power1_input`` (instantaneous, µW) → ``power_w``; ``temp1_input`` (edge,
  m°C) → ``temp_c``; ``freq1_input`` / ``freq2_input`` (gfx / memory clock, Hz) → MHz;
  ``energy1_input`` (the hwmon ABI's cumulative energy, µJ) → ``energy_j`` where the
  driver has it (amdgpu documents none: then J/token is integrated from power).

amdsmi (ROCm's Python binding), when ``import amdsmi`` and ``amdsmi_init()`` work:
``amdsmi_get_gpu_activity`` (``gfx_activity`` %), ``amdsmi_get_gpu_vram_usage`` (MB),
``amdsmi_get_power_info`` (``current_socket_power`` / ``average_socket_power``, W),
``amdsmi_get_temp_metric`` (edge, °C), ``amdsmi_get_clock_info`` (``clk``, MHz) and
``amdsmi_get_energy_count`` (``energy_accumulator`` — ``power`` before amdsmi 6.2.1 — ×
``counter_resolution`` µJ).

Every file is read bounded (a few KiB) and parsed strictly: a value that is not a plain
number in range is unknown (None), never a traceback. Devices are the agent's GPU dicts.
"""

import os

if False:  # typing only (never runs): names for the type comments, read by mypy alone
    from collections.abc import Callable  # noqa: F401
    from typing import Any  # noqa: F401

AMD_VENDOR = "0x1002"
AMD_READ_LIMIT = 4096  # bytes: no sysfs value we read is longer
AMD_MAX_CARDS = 64


def amd_read_text(path, limit=AMD_READ_LIMIT):  # type: (str, int) -> str | None
    """The file's text, stripped; None when it is missing, unreadable, too long or not
    ASCII text."""
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except OSError:
        return None
    if len(data) > limit:
        return None
    try:
        text = data.decode("ascii").strip()
    except UnicodeDecodeError:
        return None
    return text if all(c.isprintable() for c in text) else None


def amd_read_int(path, low=0, high=1 << 63):  # type: (str, int, int) -> int | None
    """A non-negative decimal integer file in [low, high], else None."""
    text = amd_read_text(path, 64)
    if text is None or not text.isdigit() or len(text) > 20:
        return None
    value = int(text)
    return value if low <= value <= high else None


def amd_card_dirs(root="/"):  # type: (str) -> list[str]
    """The ``cardN`` directories of AMD GPUs, in card order (connectors like
    ``card0-DP-1`` are not cards)."""
    base = os.path.join(root, "sys", "class", "drm")
    try:
        names = os.listdir(base)
    except OSError:
        return []
    cards = []
    for name in names:
        if name.startswith("card") and name[4:].isdigit() and len(name) < 12:
            cards.append((int(name[4:]), os.path.join(base, name)))
    out = []
    for _n, path in sorted(cards)[:AMD_MAX_CARDS]:
        if amd_read_text(os.path.join(path, "device", "vendor")) == AMD_VENDOR:
            out.append(path)
    return out


def amd_hwmon_dir(device_dir):  # type: (str) -> str | None
    """The card's hwmon directory (``device/hwmon/hwmonM``), or None."""
    base = os.path.join(device_dir, "hwmon")
    try:
        names = sorted(n for n in os.listdir(base) if n.startswith("hwmon"))
    except OSError:
        return None
    return os.path.join(base, names[0]) if names else None


def amd_sysfs_device(index, card_dir):  # type: (int, str) -> dict[str, Any]
    """One AMD GPU's reading from its sysfs files (see the module docstring)."""
    dev = os.path.join(card_dir, "device")
    name = amd_read_text(os.path.join(dev, "product_name"), 200)
    if not name:
        pci = amd_read_text(os.path.join(dev, "device"), 16)
        name = "AMD GPU" + (" (device " + pci + ")" if pci else "")
    busy = amd_read_int(os.path.join(dev, "gpu_busy_percent"), 0, 100)
    out = {
        "index": index,
        "name": name,
        "vendor": "amd",
        "unified_memory": False,
        "util_percent": None if busy is None else float(busy),
        "mem_used": amd_read_int(os.path.join(dev, "mem_info_vram_used")),
        "mem_total": amd_read_int(os.path.join(dev, "mem_info_vram_total")),
        "power_w": None,
        "power_source": None,
        "temp_c": None,
        "sm_clock_mhz": None,
        "mem_clock_mhz": None,
        "energy_j": None,
        "energy_source": None,
        "processes": [],
    }
    hw = amd_hwmon_dir(dev)
    if hw is None:
        return out
    for field in ("power1_average", "power1_input"):
        uw = amd_read_int(os.path.join(hw, field), 0, 10**10)  # ≤ 10 kW
        if uw is not None:
            out["power_w"] = uw / 1e6
            out["power_source"] = "amdgpu hwmon " + field
            break
    temp = amd_read_int(os.path.join(hw, "temp1_input"), 0, 200000)
    out["temp_c"] = None if temp is None else temp / 1000.0
    for field, key in (("freq1_input", "sm_clock_mhz"), ("freq2_input", "mem_clock_mhz")):
        hz = amd_read_int(os.path.join(hw, field), 0, 10**11)
        out[key] = None if hz is None else int(hz // 1000000)
    uj = amd_read_int(os.path.join(hw, "energy1_input"))
    if uj is not None:
        out["energy_j"] = uj / 1e6
        out["energy_source"] = "hwmon energy1_input"
    return out


def _amd_number(value):  # type: (object) -> float | None
    """A finite number from an amdsmi field ("N/A" and the like are None)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if value == value and abs(value) != float("inf") else None


def _amd_call(fn, *args):  # type: (Callable[..., Any], *Any) -> Any
    try:
        return fn(*args)
    except Exception:  # AmdSmiLibraryException: not supported on this device, ...
        return None


def _amd_dict(fn, *args):  # type: (Callable[..., Any], *Any) -> dict[Any, Any]
    """An amdsmi call's dict answer ({} when it failed or answered something else)."""
    got = _amd_call(fn, *args)
    return got if isinstance(got, dict) else {}


def amdsmi_device(smi, index, handle):  # type: (Any, int, Any) -> dict[str, Any]
    """One AMD GPU's reading through the amdsmi module ``smi``."""
    name = _amd_dict(smi.amdsmi_get_gpu_asic_info, handle).get("market_name")
    activity = _amd_dict(smi.amdsmi_get_gpu_activity, handle)
    vram = _amd_dict(smi.amdsmi_get_gpu_vram_usage, handle)
    power = _amd_dict(smi.amdsmi_get_power_info, handle)
    util = _amd_number(activity.get("gfx_activity"))
    used, total = _amd_number(vram.get("vram_used")), _amd_number(vram.get("vram_total"))
    out = {
        "index": index,
        "name": name if isinstance(name, str) and name else "AMD GPU",
        "vendor": "amd",
        "unified_memory": False,
        "util_percent": util if util is not None and 0 <= util <= 100 else None,
        "mem_used": None if used is None or used < 0 else int(used * 2**20),
        "mem_total": None if total is None or total < 0 else int(total * 2**20),
        "power_w": None,
        "power_source": None,
        "temp_c": None,
        "sm_clock_mhz": None,
        "mem_clock_mhz": None,
        "energy_j": None,
        "energy_source": None,
        "processes": [],
    }
    for key in ("current_socket_power", "average_socket_power"):
        watts = _amd_number(power.get(key))
        if watts is not None and 0 <= watts < 10000:
            out["power_w"], out["power_source"] = watts, "amdsmi " + key
            break
    kinds = getattr(smi, "AmdSmiTemperatureType", None)
    metric = getattr(smi, "AmdSmiTemperatureMetric", None)
    if kinds is not None and metric is not None:
        for kind in ("EDGE", "HOTSPOT", "JUNCTION"):
            if hasattr(kinds, kind):
                temp = _amd_number(
                    _amd_call(
                        smi.amdsmi_get_temp_metric, handle, getattr(kinds, kind), metric.CURRENT
                    )
                )
                if temp is not None and 0 <= temp < 200:
                    out["temp_c"] = temp
                    break
    clk = getattr(smi, "AmdSmiClkType", None)
    if clk is not None:
        for kind, key in (("GFX", "sm_clock_mhz"), ("MEM", "mem_clock_mhz")):
            info = _amd_dict(smi.amdsmi_get_clock_info, handle, getattr(clk, kind, None))
            mhz = _amd_number(info.get("clk"))
            out[key] = None if mhz is None or mhz < 0 else int(mhz)
    energy = _amd_dict(smi.amdsmi_get_energy_count, handle)
    count = _amd_number(energy.get("energy_accumulator", energy.get("power")))
    resolution = _amd_number(energy.get("counter_resolution"))
    if count is not None and resolution is not None and count >= 0 and resolution > 0:
        out["energy_j"] = count * resolution / 1e6
        out["energy_source"] = "amdsmi energy accumulator"
    return out


class AmdGpus:
    """This machine's AMD GPUs: amdsmi when it imports and initialises (tried only when
    sysfs shows an AMD card, or when ``smi`` is given), else sysfs. ``read()`` never
    raises: it gives (devices, message)."""

    def __init__(self, root="/", smi=None, use_amdsmi=True):  # type: (str, Any, bool) -> None
        self.root = root
        self.smi = None  # type: Any
        self.handles = []  # type: list[Any]
        self.via = "sysfs"
        if use_amdsmi and smi is None and amd_card_dirs(root):
            try:
                import amdsmi  # optional: ROCm's binding

                smi = amdsmi
            except Exception:  # not installed, or its library missing
                smi = None
        if use_amdsmi and smi is not None:
            try:
                smi.amdsmi_init()
                self.handles = list(smi.amdsmi_get_processor_handles())[:AMD_MAX_CARDS]
                self.smi = smi
                self.via = "amdsmi"
            except Exception:
                self.smi = None
                self.handles = []

    def read(self):  # type: () -> tuple[list[dict[str, Any]], str]
        devices = []  # type: list[dict[str, Any]]
        if self.smi is not None and self.handles:
            for i, h in enumerate(self.handles):
                devices.append(amdsmi_device(self.smi, i, h))
            return devices, f"{len(devices)} AMD GPU(s) (amdsmi)"
        for i, card in enumerate(amd_card_dirs(self.root)):
            devices.append(amd_sysfs_device(i, card))
        if not devices:
            return [], "no AMD GPU (no amdgpu card in /sys/class/drm)"
        return devices, f"{len(devices)} AMD GPU(s) (amdgpu sysfs)"

    def close(self):  # type: () -> None
        if self.smi is not None:
            try:
                self.smi.amdsmi_shut_down()
            except Exception:
                pass
            self.smi = None
