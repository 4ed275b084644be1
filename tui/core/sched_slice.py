"""A short time slice from Linux's scheduler, for a process whose job is to pass bytes on.

Linux's fair scheduler (EEVDF, kernel 6.12 and later) lets a normal thread ask for its own
slice, 0.1 to 100 ms, in ``sched_attr.sched_runtime`` (``sched_setattr(2)``; no privilege is
needed while the policy and nice value stay as they are). A thread woken with a shorter
slice has an earlier deadline, so when it is woken on a CPU where another thread runs —
the server that just wrote the bytes it waits for, or the client that just wrote a
request — it runs at once instead of after that thread blocks or its slice ends.

``infertop proxy`` asks for 0.1 ms: on the 2-core development machine a forwarded read
otherwise waited for the waker to finish its own work, ~0.1–0.2 ms, per token and on
the request's way in (docs/proxy.md#what-it-costs). It takes no more CPU (the work is
the same, done sooner); what it changes is who waits. Threads and child processes made
afterwards inherit the slice, so it is asked for once, early.

On other kernels and systems nothing changes and :func:`request_slice` says why.
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform
import struct
import sys
from collections.abc import Callable
from dataclasses import dataclass
from errno import EINVAL

SLICE_MIN_NS = 100_000  # the kernel clamps a custom slice to [0.1 ms, 100 ms]
SLICE_MAX_NS = 100_000_000
PROXY_SLICE_NS = SLICE_MIN_NS

# sched_setattr / sched_getattr by machine (arch/*/entry/syscalls; the generic table's
# numbers for arm64 and riscv64)
SYSCALLS = {"x86_64": (314, 315), "aarch64": (274, 275), "riscv64": (274, 275)}
# struct sched_attr, SCHED_ATTR_SIZE_VER1: size, policy, flags, nice, priority, runtime,
# deadline, period, util_min, util_max
ATTR = struct.Struct("IIQiIQQQII")
FAIR_POLICIES = {0: "SCHED_OTHER", 3: "SCHED_BATCH"}
RESET_ON_FORK = 0x01


@dataclass(frozen=True)
class SliceResult:
    """What the kernel did with a slice request."""

    asked_ns: int
    granted_ns: int | None  # the slice now in force when it is the one asked for, else None
    why: str  # a short phrase: what was done, or why nothing was

    @property
    def granted(self) -> bool:
        return self.granted_ns is not None

    def describe(self) -> str:
        if self.granted_ns is not None:
            return f"{self.granted_ns / 1e6:g} ms, {self.why}"
        return f"the kernel's default: {self.why}"


@functools.cache  # the C library loaded once: a request reads, sets and reads again
def _libc_syscall() -> tuple[Callable[..., int], int, int] | str:
    if not sys.platform.startswith("linux"):
        return f"custom slices are Linux's; this is {sys.platform}"
    numbers = SYSCALLS.get(platform.machine())
    if numbers is None:
        return f"sched_setattr's number is not known here for {platform.machine()}"
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError as e:
        return f"no C library to call through: {e}"
    return libc.syscall, numbers[0], numbers[1]


def get_attr(tid: int = 0) -> tuple[int, ...] | str:
    """``sched_getattr`` of thread ``tid`` (0: the calling one) as ATTR's fields, or why not."""
    found = _libc_syscall()
    if isinstance(found, str):
        return found
    syscall, _set, get = found
    buf = ctypes.create_string_buffer(ATTR.size)
    if syscall(get, ctypes.c_long(tid), buf, ctypes.c_uint(ATTR.size), ctypes.c_uint(0)) != 0:
        return f"sched_getattr failed: {os.strerror(ctypes.get_errno())}"
    return ATTR.unpack(buf.raw)


def request_slice(ns: int, tid: int = 0) -> SliceResult:
    """Ask for an ``ns`` slice for thread ``tid`` (0: the calling one), keeping its policy,
    nice value and reset-on-fork flag; ``ns`` 0 asks for the kernel's default back. Never
    raises: the result says what happened."""
    ns = 0 if ns <= 0 else min(max(ns, SLICE_MIN_NS), SLICE_MAX_NS)
    found = _libc_syscall()
    if isinstance(found, str):
        return SliceResult(ns, None, found)
    syscall, set_nr, _get = found
    now = get_attr(tid)
    if isinstance(now, str):
        return SliceResult(ns, None, now)
    _size, policy, flags, nice, priority = now[:5]
    if policy not in FAIR_POLICIES:
        return SliceResult(ns, None, f"the thread runs under scheduling policy {policy}")
    attr = ATTR.pack(ATTR.size, policy, flags & RESET_ON_FORK, nice, priority, ns, 0, 0, 0, 0)
    buf = ctypes.create_string_buffer(attr)
    if syscall(set_nr, ctypes.c_long(tid), buf, ctypes.c_uint(0)) != 0:
        errno = ctypes.get_errno()
        why = f"sched_setattr refused: {os.strerror(errno)}"
        if errno == EINVAL:  # an older kernel that checks the field
            why += f" (kernel {platform.release()}; custom slices need 6.12+)"
        return SliceResult(ns, None, why)
    if ns == 0:
        return SliceResult(0, None, "as asked")
    after = get_attr(tid)
    if isinstance(after, str) or after[5] != ns:
        release = platform.release()
        return SliceResult(
            ns, None, f"kernel {release} does not keep one: custom slices need 6.12+"
        )
    return SliceResult(ns, ns, f"asked for with sched_setattr ({FAIR_POLICIES[policy]})")
