"""Row 9's pattern wherever outside text becomes a number: "²".isdigit() is true, but
int("²") raises ValueError. Every such check takes ASCII digits only, so a superscript
is refused with the usual message (or ignored) instead of escaping as a traceback."""

from __future__ import annotations

import pytest

from tui.bench.run.depth import parse_depths
from tui.bench.run.plan import BenchError, parse_concurrency
from tui.core.kv import _int
from tui.fleet.promql import _gpu_order
from tui.telemetry.remote.exporters import dcgm_gpus
from tui.transport.prometheus import parse


def test_cli_lists_refuse_superscript_digits() -> None:
    with pytest.raises(BenchError, match="does not parse"):
        parse_concurrency("1,²")
    with pytest.raises(BenchError, match="does not parse"):
        parse_depths("0,²")


def test_outside_labels_with_superscript_digits_are_no_index() -> None:
    assert _int("²") is None and _int("-12") == -12
    assert _gpu_order("²") == (1 << 30, "²") and _gpu_order("3") == (3, "")
    page = 'DCGM_FI_DEV_GPU_UTIL{gpu="²",modelName="X"} 5\n'
    (gpu,) = dcgm_gpus(parse(page))
    assert gpu.index == 0 and gpu.util_percent == 5
