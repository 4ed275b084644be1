"""What a report says about where it was measured, found without needless imports."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tui.bench.run import environment


def test_memory_total_matches_psutil():
    import psutil  # a hard dependency: missing is a failure, not a skip

    assert environment.memory_total_bytes() == psutil.virtual_memory().total


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the NVML device is Linux's")
def test_gpus_without_the_nvidia_device_ask_nothing():
    """No /dev/nvidiactl: no GPU listed and pynvml never imported (a fresh interpreter,
    so an import elsewhere in the suite does not hide one here)."""
    if os.path.exists(environment.NVIDIA_CONTROL_DEVICE):
        pytest.skip("this machine has the NVIDIA driver's device")
    code = (
        "import sys; from tui.bench.run import environment as e; "
        "print(e.gpus(), 'pynvml' in sys.modules, 'psutil' in sys.modules, "
        "e.memory_total_bytes() > 0)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["[]", "False", "False", "True"]
