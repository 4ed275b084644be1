"""tui/core/sched_slice.py against this machine's real kernel: each test runs in a thread
of its own (a slice is per thread), so the test process keeps the kernel's default."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest

from tests.support.sched import kernel_keeps_slices
from tui.core.sched_slice import PROXY_SLICE_NS, get_attr, request_slice

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's scheduler")

RUNTIME, NICE, POLICY = 5, 3, 1  # sched_attr fields, as get_attr returns them


def in_thread(fn: Callable[[], Any]) -> Any:
    out: list[Any] = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join(10)
    return out[0]


def test_a_thread_gets_the_slice_it_asks_for_and_keeps_its_nice_value() -> None:
    def ask() -> tuple[Any, Any, Any]:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, 4)  # this thread only
        before = get_attr()
        result = request_slice(PROXY_SLICE_NS)
        return before, result, get_attr()

    before, result, after = in_thread(ask)
    assert not isinstance(after, str)
    assert after[NICE] == before[NICE] == 4 and after[POLICY] == before[POLICY]
    if kernel_keeps_slices():
        assert result.granted and result.granted_ns == PROXY_SLICE_NS == after[RUNTIME]
        assert result.describe().startswith("0.1 ms, asked for with sched_setattr")
    else:
        assert not result.granted and "6.12" in result.why


@pytest.mark.skipif(not kernel_keeps_slices(), reason="custom slices need Linux 6.12+")
def test_threads_made_afterwards_inherit_it_and_zero_asks_for_the_default_back() -> None:
    def ask() -> tuple[int, int, int]:
        default = get_attr()[RUNTIME]
        request_slice(PROXY_SLICE_NS)
        child = in_thread(lambda: get_attr()[RUNTIME])
        request_slice(0)
        return default, child, get_attr()[RUNTIME]

    default, child, back = in_thread(ask)
    assert child == PROXY_SLICE_NS != default and back == default


def test_a_slice_out_of_range_is_clamped_to_the_kernels_bounds() -> None:
    result = in_thread(lambda: request_slice(5))
    assert result.asked_ns == 100_000
    assert in_thread(lambda: request_slice(10**12)).asked_ns == 100_000_000


def test_a_thread_outside_the_fair_policies_is_left_as_it_is() -> None:
    def ask() -> tuple[Any, Any]:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        return request_slice(PROXY_SLICE_NS), get_attr()

    result, after = in_thread(ask)
    assert not result.granted and "policy 5" in result.why
    assert after[POLICY] == os.SCHED_IDLE and after[RUNTIME] != PROXY_SLICE_NS
