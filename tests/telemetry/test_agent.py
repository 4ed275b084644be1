"""``infertop agent``: the JSON line format, its sources (psutil, /proc, NVML), and the
one self-contained module that is also fed to a remote ``python3 -``.

There is no NVIDIA GPU here: the GPU fields are checked with a stand-in NVML module (the
same calls pynvml has); NVML as it really is here (absent) must be a normal state.
"""

from __future__ import annotations

import ast
import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest

from tui.telemetry.devices import agent as agent_module
from tui.telemetry.devices.agent import Agent
from tui.telemetry.devices.host_stats import cpu_percent_between, read_meminfo, read_proc_stat
from tui.telemetry.devices.nvml import ABSENT, ERROR, OK
from tui.telemetry.remote.agent_lines import AgentLineError, sample_from_line
from tui.telemetry.remote.remote_ssh import AGENT_MODULES, agent_source

AGENT_FILE = Path(agent_module.__file__)


def test_agent_once_prints_one_valid_line(cli_env, infertop_cmd):
    proc = subprocess.run(
        [*infertop_cmd, "agent", "--once", "--interval", "0.2"],
        capture_output=True,
        text=True,
        env=cli_env,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 1
    data = json.loads(lines[0])
    assert data["v"] == 1 and data["via"] == "psutil" and data["interval_s"] == 0.2
    assert len(data["cpu"]["per_core"]) == os.cpu_count()
    assert data["mem"]["total"] == psutil.virtual_memory().total
    assert data["gpu"]["status"] in (OK, ABSENT) and data["errors"] == []
    s = sample_from_line(lines[0], "box via ssh", 1.0)
    assert s.source == "box via ssh" and s.system is not None and s.system.rss_bytes is None


def test_agent_rejects_a_bad_interval(cli_env, infertop_cmd):
    proc = subprocess.run(
        [*infertop_cmd, "agent", "--interval", "0"], capture_output=True, text=True, env=cli_env
    )
    assert proc.returncode == 2 and "--interval" in proc.stderr and "Traceback" not in proc.stderr


def test_agent_modules_are_self_contained_python36():
    """The bundle is fed to remote interpreters as it is: Python 3.6 syntax, stdlib only at
    module level, no tui import but the guarded one (skipped inside the bundle), and no
    top-level name defined by two of its modules."""
    defined: dict[str, str] = {}
    for name in AGENT_MODULES:
        src = (AGENT_FILE.parent / f"{name}.py").read_text()
        tree = ast.parse(src, feature_version=(3, 6))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                assert node.module != "__future__"  # 3.7+ for annotations
        for node in tree.body:  # module-level imports: the standard library only
            if isinstance(node, ast.Import | ast.ImportFrom):
                is_import = isinstance(node, ast.Import)
                mods = [a.name for a in node.names] if is_import else [node.module]
                for m in mods:
                    assert (m or "").split(".")[0] in sys.stdlib_module_names, m
            if isinstance(node, ast.If) and ast.unparse(node.test) == "False":
                # names for the type comments (mypy reads them; this block never runs)
                for sub in node.body:
                    assert isinstance(sub, ast.ImportFrom)
                    assert sub.module in ("typing", "collections.abc"), sub.module
            elif isinstance(node, ast.If) and "__main__" not in ast.unparse(node.test):
                # the one guarded import of the sibling readers
                assert ast.unparse(node.test) == "'_INFERTOP_AGENT_BUNDLE' not in globals()"
                for sub in node.body:
                    assert isinstance(sub, ast.ImportFrom)
                    assert (sub.module or "").removeprefix(
                        "tui.telemetry.devices."
                    ) in AGENT_MODULES
            # no annotations evaluated at run time on old interpreters
            if isinstance(node, ast.FunctionDef | ast.ClassDef):
                for sub in ast.walk(node):
                    if isinstance(sub, ast.FunctionDef):
                        assert sub.returns is None and all(
                            a.annotation is None for a in sub.args.args
                        ), sub.name
            if isinstance(node, ast.FunctionDef | ast.ClassDef):
                assert node.name not in defined, (node.name, name, defined.get(node.name))
                defined[node.name] = name
    bundle = agent_source()
    ast.parse(bundle, feature_version=(3, 6))
    assert bundle.count(b'\nif __name__ == "__main__":') == 1


def test_agent_bundle_is_python36_source_with_type_comments():
    """The bundle's types are PEP 484 type comments (mypy --strict checks them; Python
    ignores them): each is where the 3.6 grammar allows one, every function has one, and
    ``typing`` is imported at module level only under ``if False:`` (never at run time).
    The next test runs the bundle on a real 3.6 where this machine has one."""
    for name in AGENT_MODULES:
        src = (AGENT_FILE.parent / f"{name}.py").read_text()
        tree = ast.parse(src, feature_version=(3, 6), type_comments=True)
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                assert node.type_comment, f"{name}.py: {node.name}() has no type comment"
                assert "->" in node.type_comment, (name, node.name, node.type_comment)
        for node in tree.body:
            if isinstance(node, ast.Import):
                assert "typing" not in [a.name for a in node.names], name
            if isinstance(node, ast.ImportFrom):
                assert node.module != "typing", name
    ast.parse(agent_source(), feature_version=(3, 6), type_comments=True)


def _old_python() -> str | None:
    """A Python 3.6 or 3.7, if this machine has one (pyenv's, not its shims)."""
    found = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.[67].*/bin/python3")))
    for cand in ("python3.6", "python3.7"):
        path = shutil.which(cand)
        if path and "shims" not in path:
            found.append(path)
    return found[0] if found else None


def test_agent_source_runs_on_stdin_of_a_bare_python():
    """As over SSH with no infertop there: the file on stdin of ``python3 -``; a Python
    without psutil (Debian's /usr/bin/python3 here, and 3.6 where one is installed) reads
    /proc instead."""
    pythons = [p for p in ("/usr/bin/python3", _old_python()) if p and os.path.exists(p)]
    if not pythons:
        pytest.skip("no python3 outside the venv")
    for python in pythons:
        proc = subprocess.run(
            [python, "-", "--once", "--interval", "0.2"],
            input=agent_source(),
            capture_output=True,
            timeout=60,
            env={"PATH": "/usr/bin:/bin"},
        )
        assert proc.returncode == 0, (python, proc.stderr[-500:])
        data = json.loads(proc.stdout)
        assert data["v"] == 1 and data["via"] in ("proc", "psutil"), python
        assert len(data["cpu"]["per_core"]) == os.cpu_count()
        assert data["mem"]["total"] == psutil.virtual_memory().total


def test_proc_readings_agree_with_psutil():
    a = Agent(0.2, gpu=False, use_psutil=False)
    assert a.via == "proc"
    before = read_proc_stat()
    _ = [i * i for i in range(300_000)]
    total, per_core = cpu_percent_between(before, read_proc_stat())
    assert total is not None and 0 <= total <= 100 and len(per_core) == os.cpu_count()
    used, mem_total = read_meminfo()
    vm = psutil.virtual_memory()
    assert mem_total == vm.total
    assert abs(used - (vm.total - vm.available)) < 0.05 * vm.total
    s = a.sample()
    assert s["cpu"] is not None and len(s["cpu"]["per_core"]) == os.cpu_count()
    assert s["gpu"] == {
        "status": ABSENT,
        "message": "GPU sampling off",
        "unified_memory": False,
        "devices": [],
    }


def test_cpu_percent_between_counts_iowait_as_idle(tmp_path):
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 0 100 700 100 0 0 0 0 0\ncpu0 100 0 100 700 100 0 0 0 0 0\n")
    before = read_proc_stat(str(stat))
    stat.write_text("cpu  150 0 150 750 150 0 0 0 0 0\ncpu0 150 0 150 750 150 0 0 0 0 0\n")
    total, per_core = cpu_percent_between(before, read_proc_stat(str(stat)))
    assert total == pytest.approx(50.0) and per_core == [pytest.approx(50.0)]


class StandInNvml:
    """pynvml's calls, for one GPU with two processes (one also in the graphics list)."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0

    class NVMLError(Exception):
        pass

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        calls = {
            "nvmlInit": lambda: None,
            "nvmlShutdown": lambda: None,
            "nvmlDeviceGetCount": lambda: 1,
            "nvmlDeviceGetHandleByIndex": lambda i: "h0",
            "nvmlDeviceGetName": lambda h: b"Fake H200",
            "nvmlDeviceGetUUID": lambda h: "GPU-1234",
            "nvmlDeviceGetMemoryBusWidth": lambda h: 5120,
            "nvmlDeviceGetMaxClockInfo": lambda h, k: 2619,
            "nvmlDeviceGetMemoryInfo": lambda h: SimpleNamespace(used=9 * 2**30, total=141 * 2**30),
            "nvmlDeviceGetUtilizationRates": lambda h: SimpleNamespace(gpu=97),
            "nvmlDeviceGetTemperature": lambda h, s: 55,
            "nvmlDeviceGetClockInfo": lambda h, k: 1980 if k == 1 else 2619,
            "nvmlDeviceGetComputeRunningProcesses": lambda h: [
                SimpleNamespace(pid=os.getpid(), usedGpuMemory=8 * 2**30),
                SimpleNamespace(pid=1, usedGpuMemory=None),
            ],
            "nvmlDeviceGetGraphicsRunningProcesses": lambda h: [
                SimpleNamespace(pid=os.getpid(), usedGpuMemory=2**20)
            ],
        }
        if name == "nvmlDeviceGetPowerUsage":

            def power(h):  # type: ignore[no-untyped-def]
                raise self.NVMLError("Not Supported")

            return power
        if self.fail and name == "nvmlDeviceGetMemoryInfo":

            def lost(h):  # type: ignore[no-untyped-def]
                raise self.NVMLError("GPU is lost")

            return lost
        if name in calls:
            return calls[name]
        raise AttributeError(name)


def test_gpu_fields_processes_and_peak_bandwidth_inputs():
    a = Agent(0.2, nvml=StandInNvml())
    line = agent_module.dumps(a.sample())
    d = json.loads(line)["gpu"]["devices"][0]
    assert d["name"] == "Fake H200" and d["uuid"] == "GPU-1234"
    assert (d["util_percent"], d["temp_c"], d["sm_clock_mhz"], d["mem_clock_mhz"]) == (
        97.0,
        55.0,
        1980,
        2619,
    )
    assert d["power_w"] is None  # not supported: null, not an error
    assert (d["bus_width_bits"], d["max_mem_clock_mhz"]) == (5120, 2619)
    procs = {p["pid"]: p for p in d["processes"]}
    assert procs[os.getpid()]["bytes"] == 8 * 2**30  # listed twice: the larger
    assert procs[os.getpid()]["name"] == Path(f"/proc/{os.getpid()}/comm").read_text().strip()
    assert procs[1]["bytes"] is None
    s = sample_from_line(line, "box via ssh", 0.0)
    g = s.gpu.gpus[0]
    assert s.gpu.status == OK and g.mem_total == 141 * 2**30 and g.proc_mem is None
    assert g.peak_bandwidth_bps == pytest.approx(3.352e12, rel=1e-3)
    assert {p.pid for p in g.processes} == {1, os.getpid()}


def test_nvml_failing_is_an_error_in_the_sample_not_a_crash():
    a = Agent(0.2, nvml=StandInNvml(fail=True))
    gpu = a.sample()["gpu"]
    assert gpu["status"] == ERROR and "GPU is lost" in gpu["message"]


def test_no_nvml_is_a_normal_state():
    gpu = Agent(0.2).sample()["gpu"]
    if gpu["status"] == OK:
        pytest.skip("a GPU is present here")
    assert gpu["status"] == ABSENT and "no NVIDIA GPU" in gpu["message"]


def test_apple_silicon_is_unified_memory(monkeypatch):
    """On a Mac with no GPU reading (ioreg gave nothing): unified memory, no VRAM, no GPU
    row (tests/telemetry/test_gpu_rows.py reads the Apple GPU from its fixture)."""
    from tui.telemetry.devices.apple_gpu import AppleGpu

    monkeypatch.setattr(agent_module.platform, "system", lambda: "Darwin")
    monkeypatch.setattr(agent_module.platform, "machine", lambda: "arm64")
    monkeypatch.setattr("tui.telemetry.devices.apple_gpu.shutil.which", lambda name: None)
    mac = AppleGpu(run=lambda argv, timeout=2.0: None, working_set=lambda: None)
    line = agent_module.dumps(Agent(0.2, apple=mac).sample())
    data = json.loads(line)
    assert data["mem"]["label"] == "unified memory (RAM)"
    assert data["gpu"]["devices"] == []
    s = sample_from_line(line, "mac via ssh", 0.0)
    assert s.system is not None and s.system.ram_label == "unified memory (RAM)"
    assert s.gpu.status == ABSENT and "Apple GPU: ioreg gave nothing" in s.gpu.message
    assert not s.gpu.gpus


@pytest.mark.parametrize(
    "line, says",
    [
        (b"hello from .bashrc", "not an agent line"),
        (b"[1, 2]", "not an agent line"),
        (b'{"v": 2}', "format v2"),
        (b"\xff\xfe{", "not an agent line"),
        (b"{" + b" " * (1 << 20) + b"}", "bytes"),
    ],
)
def test_lines_that_are_not_samples(line, says):
    with pytest.raises(AgentLineError, match=says):
        sample_from_line(line, "x", 0.0)


def test_hostile_fields_read_as_unknown():
    line = json.dumps(
        {
            "v": 1,
            "cpu": {"percent": 1e999 if False else 250, "per_core": ["x", True, 30, None]},
            "mem": {"used": -5, "total": "lots", "label": "\x1b[2J"},
            "gpu": {
                "status": "ok",
                "devices": [
                    {"index": True, "name": 7, "util_percent": "hot", "processes": [{"pid": "1"}]},
                    "not a device",
                ],
            },
            "errors": ["nvml: flaky", 5],
        }
    )
    s = sample_from_line(line, "x", 0.0)
    assert s.system is not None and s.system.cpu_percent == 100.0 and s.system.per_core == [30.0]
    assert s.system.ram_used == 0 and s.system.ram_total == 0 and "\x1b" not in s.system.ram_label
    assert len(s.gpu.gpus) == 1
    g = s.gpu.gpus[0]
    assert (g.index, g.name, g.util_percent, g.processes) == (0, "GPU", None, ())
    assert s.error == "nvml: flaky"
