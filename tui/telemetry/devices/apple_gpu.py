"""Apple Silicon's GPU without sudo: IORegistry statistics, the working-set budget, and
power from ``macmon`` when it is installed.

Stdlib only, Python 3.6 syntax, no annotations (types are PEP 484 type comments): bundled
into the agent fed to a remote ``python3`` (tui/telemetry/devices/agent.py); every top-level name
is unique across the bundle.

- Utilisation and memory: ``ioreg -r -d 1 -w 0 -c IOAccelerator -a`` prints the GPU's
  registry entry (class ``AGXAccelerator…``) as an XML plist: an array of dicts with
  ``model`` ("Apple M1 Pro"), ``gpu-core-count`` and ``PerformanceStatistics``, whose
  ``"Device Utilization %"`` is ``util_percent`` and ``"In use system memory"`` (bytes)
  the unified memory the GPU has in use → ``mem_used``. That memory *is* RAM: the device
  says ``unified_memory`` and no VRAM is reported.
- Working-set budget (how much of RAM the GPU may keep wired) → ``mem_total``: ``sysctl
  iogpu.wired_limit_mb`` when the user set it (macOS 14+, 0 = the default); else Metal's
  ``recommendedMaxWorkingSetSize`` where PyObjC's Metal binding imports; else unknown.
- Power: ``macmon pipe -i MS`` (github.com/vladkens/macmon: IOReport, no sudo) prints a JSON
  object per interval with ``gpu_power`` / ``cpu_power`` in watts — each the average over
  its interval, from IOReport's energy counters — and ``temp.gpu_temp_avg`` and
  ``gpu_usage`` [MHz, ratio]. Without macmon: "power: needs macmon (brew install macmon)".

Everything read is bounded and parsed strictly (plistlib refuses entity declarations);
what does not parse is a message, never a traceback.
"""

import json
import plistlib
import shutil
import subprocess
import threading
import time

if False:  # typing only (never runs): names for the type comments, read by mypy alone
    from collections.abc import Callable, Iterable  # noqa: F401
    from typing import Any  # noqa: F401

APPLE_IOREG = ("ioreg", "-r", "-d", "1", "-w", "0", "-c", "IOAccelerator", "-a")
APPLE_MAX_OUTPUT = 4 << 20  # bytes of command output read at most
APPLE_MACMON_LINE = 1 << 16  # a longer macmon line is not macmon's
APPLE_UTIL_KEY = "Device Utilization %"
APPLE_IN_USE_KEY = "In use system memory"
APPLE_POWER_NEEDS = "power: needs macmon (brew install macmon; reads IOReport without sudo)"


def apple_run(argv, timeout=2.0):  # type: (Iterable[str], float) -> bytes | None
    """A command's stdout (at most APPLE_MAX_OUTPUT bytes), None when it fails."""
    try:
        proc = subprocess.run(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            timeout=timeout,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0 or len(proc.stdout) > APPLE_MAX_OUTPUT:
        return None
    return proc.stdout


def _apple_int(value, low=0, high=1 << 62):  # type: (object, int, int) -> int | None
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if low <= value <= high else None


def parse_ioreg_accelerators(data):  # type: (object) -> list[dict[str, Any]]
    """The GPUs in ``ioreg -r -d 1 -w 0 -c IOAccelerator -a`` output: a list of dicts
    (model, gpu_cores, util_percent, mem_used). Raises ValueError, with what was wrong,
    for output that is not such a plist."""
    if not isinstance(data, bytes) or len(data) > APPLE_MAX_OUTPUT:
        raise ValueError("ioreg output missing or too large")
    try:
        root = plistlib.loads(data)
    except Exception as e:  # InvalidFileException, ExpatError, ...
        raise ValueError(f"ioreg output is not a plist ({type(e).__name__})") from None
    entries = root if isinstance(root, list) else [root]
    out = []  # type: list[dict[str, Any]]
    for entry in entries[:16]:
        if not isinstance(entry, dict):
            continue
        stats = entry.get("PerformanceStatistics")
        if not isinstance(stats, dict):
            continue
        model = entry.get("model")
        util = _apple_int(stats.get(APPLE_UTIL_KEY), 0, 100)
        out.append(
            {
                "model": model[:100] if isinstance(model, str) and model.isprintable() else None,
                "gpu_cores": _apple_int(entry.get("gpu-core-count"), 1, 4096),
                "util_percent": None if util is None else float(util),
                "mem_used": _apple_int(stats.get(APPLE_IN_USE_KEY)),
            }
        )
    if not out:
        raise ValueError("no IOAccelerator entry with PerformanceStatistics")
    return out


def parse_sysctl_int(data):  # type: (object) -> int | None
    """``sysctl -n NAME`` output as a non-negative integer, else None."""
    if not isinstance(data, bytes) or len(data) > 64:
        return None
    text = data.decode("ascii", "replace").strip()
    return int(text) if text.isdigit() and len(text) < 19 else None


def parse_macmon_line(line):  # type: (str | bytes) -> dict[str, Any] | None
    """One ``macmon pipe`` JSON line → {gpu_w, cpu_w, gpu_temp_c, gpu_mhz}; None when the
    line is not one (each field None when missing or not a plausible number)."""
    if len(line) > APPLE_MACMON_LINE:
        return None
    try:
        data = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(data, dict):
        return None

    def watts(v):  # type: (object) -> float | None
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return None
        v = float(v)
        return v if 0.0 <= v < 10000.0 else None  # also drops NaN and inf

    temp = data.get("temp")
    gpu_temp = watts(temp.get("gpu_temp_avg")) if isinstance(temp, dict) else None
    usage = data.get("gpu_usage")
    mhz = None
    if isinstance(usage, list) and usage and isinstance(usage[0], (int, float)):
        mhz = int(usage[0]) if 0 <= usage[0] < 100000 else None
    out = {
        "gpu_w": watts(data.get("gpu_power")),
        "cpu_w": watts(data.get("cpu_power")),
        "gpu_temp_c": gpu_temp if gpu_temp is None or gpu_temp < 200 else None,
        "gpu_mhz": mhz,
    }  # type: dict[str, Any]
    return out if out["gpu_w"] is not None or out["cpu_w"] is not None else None


class MacmonPower:
    """``macmon pipe`` kept running; a thread keeps its latest reading. ``latest()`` gives
    it while it is fresh (three intervals), else None with ``self.message`` saying why."""

    def __init__(
        self,
        interval_s=0.5,  # type: float
        command=None,  # type: Iterable[str] | None
        popen=None,  # type: Callable[..., subprocess.Popen[bytes]] | None
        clock=time.monotonic,  # type: Callable[[], float]
    ):
        # type: (...) -> None
        ms = max(100, int(interval_s * 1000))
        self.interval_s = ms / 1000.0
        self.command = list(command) if command else ["macmon", "pipe", "-i", str(ms)]
        self._popen = popen or subprocess.Popen
        self._clock = clock
        self._proc = None  # type: subprocess.Popen[bytes] | None
        self._thread = None  # type: threading.Thread | None
        self._lock = threading.Lock()
        self._latest = None  # type: tuple[float, dict[str, Any]] | None  # (t, reading)
        self.message = "not started"

    def start(self):  # type: () -> bool
        try:
            self._proc = self._popen(
                self.command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
        except OSError as e:
            self.message = f"macmon did not start ({e.strerror or type(e).__name__})"
            return False
        self.message = "macmon started, no reading yet"
        self._thread = threading.Thread(target=self._read, name="macmon", daemon=True)
        self._thread.start()
        return True

    def _read(self):  # type: () -> None
        out = self._proc.stdout if self._proc is not None else None
        if out is None:
            return
        skipping = False
        for line in iter(lambda: out.readline(APPLE_MACMON_LINE), b""):
            whole = line.endswith(b"\n")
            if skipping or not whole:
                skipping = not whole  # the rest of an over-long line: dropped
                continue
            reading = parse_macmon_line(line)
            with self._lock:
                if reading is None:
                    self.message = "macmon printed a line that is not its JSON"
                else:
                    self._latest = (self._clock(), reading)
                    self.message = "macmon"
        with self._lock:
            self.message = "macmon exited"

    def latest(self):  # type: () -> dict[str, Any] | None
        with self._lock:
            got = self._latest
        if got is None:
            return None
        if self._clock() - got[0] > 3 * self.interval_s + 1.0:
            return None
        return got[1]

    def close(self):  # type: () -> None
        proc, self._proc = self._proc, None
        if proc is not None:
            try:
                proc.terminate()
                proc.wait(timeout=2)
            except Exception:
                try:
                    proc.kill()
                except Exception:
                    pass
        if self._thread is not None:
            self._thread.join(2)
            self._thread = None


def apple_metal_working_set():  # type: () -> int | None
    """Metal's recommendedMaxWorkingSetSize (bytes) where PyObjC's Metal imports, else
    None."""
    try:
        import Metal  # optional: pyobjc-framework-Metal

        device = Metal.MTLCreateSystemDefaultDevice()
        size = int(device.recommendedMaxWorkingSetSize())
    except Exception:
        return None
    return size if size > 0 else None


class AppleGpu:
    """The Apple GPU of this Mac. ``read()`` never raises; it gives (devices, message,
    cpu_energy) — cpu_energy: the CPU's power from macmon, as agent energy dicts."""

    def __init__(
        self,
        run=None,  # type: Callable[..., bytes | None] | None
        macmon=None,  # type: MacmonPower | None
        working_set=None,  # type: Callable[[], int | None] | None
        interval_s=0.5,  # type: float
        ioreg_every_s=1.0,  # type: float
        clock=time.monotonic,  # type: Callable[[], float]
    ):
        # type: (...) -> None
        """``ioreg_every_s``: each ioreg reading is a process started, so one is reused for
        this long (utilisation moves slower than the panel's 2 Hz)."""
        self._run = run or apple_run
        self._ioreg_every_s = ioreg_every_s
        self._clock = clock
        self._ioreg_at = None  # type: float | None
        self._ioreg = None  # type: bytes | None
        self.macmon = macmon
        self._working_set_fn = working_set or apple_metal_working_set
        self.interval_s = interval_s
        self.working_set = None  # type: int | None
        self.working_set_source = None  # type: str | None
        self.chip = None  # type: str | None
        self.power_note = None  # type: str | None

    def start(self):  # type: () -> None
        limit = parse_sysctl_int(self._run(["sysctl", "-n", "iogpu.wired_limit_mb"]))
        if limit:
            self.working_set = limit * 2**20
            self.working_set_source = "sysctl iogpu.wired_limit_mb"
        else:
            size = self._working_set_fn()
            if size:
                self.working_set = size
                self.working_set_source = "Metal recommendedMaxWorkingSetSize"
        brand = self._run(["sysctl", "-n", "machdep.cpu.brand_string"])
        if isinstance(brand, bytes) and len(brand) < 200:
            text = brand.decode("utf-8", "replace").strip()
            self.chip = text if text.isprintable() and text else None
        if self.macmon is None:
            if shutil.which("macmon") is None:
                self.power_note = APPLE_POWER_NEEDS
            else:
                self.macmon = MacmonPower(self.interval_s)
        if self.macmon is not None and not self.macmon.start():
            self.power_note = "power: " + self.macmon.message

    def read(self):  # type: () -> tuple[list[dict[str, Any]], str, list[dict[str, Any]]]
        now = self._clock()
        if self._ioreg_at is None or now - self._ioreg_at >= self._ioreg_every_s:
            self._ioreg, self._ioreg_at = self._run(APPLE_IOREG), now
        data = self._ioreg
        if data is None:
            return [], "Apple GPU: ioreg gave nothing", []
        try:
            entries = parse_ioreg_accelerators(data)
        except ValueError as e:
            return [], f"Apple GPU: {e}", []
        power = self.macmon.latest() if self.macmon is not None else None
        note = self.power_note
        if self.macmon is not None and power is None and note is None:
            note = "power: " + self.macmon.message
        devices = []  # type: list[dict[str, Any]]
        for i, entry in enumerate(entries):
            name = entry["model"] or self.chip or "Apple GPU"
            devices.append(
                {
                    "index": i,
                    "name": name,
                    "vendor": "apple",
                    "unified_memory": True,
                    "gpu_cores": entry["gpu_cores"],
                    "util_percent": entry["util_percent"],
                    "mem_used": entry["mem_used"],
                    "mem_total": self.working_set,
                    "mem_total_source": self.working_set_source,
                    "power_w": power["gpu_w"] if power and i == 0 else None,
                    "power_source": "macmon gpu_power (IOReport)" if power and i == 0 else None,
                    "temp_c": power["gpu_temp_c"] if power and i == 0 else None,
                    "sm_clock_mhz": power["gpu_mhz"] if power and i == 0 else None,
                    "mem_clock_mhz": None,
                    "energy_j": None,
                    "energy_source": None,
                    "note": note,
                    "processes": [],
                }
            )
        cpu = []  # type: list[dict[str, Any]]
        if power is not None and power["cpu_w"] is not None:
            cpu.append(
                {
                    "domain": "CPU (macmon)",
                    "watts": power["cpu_w"],
                    "power_source": "macmon cpu_power (IOReport)",
                }
            )
        return devices, "Apple GPU (IORegistry, no sudo)", cpu

    def close(self):  # type: () -> None
        if self.macmon is not None:
            self.macmon.close()
