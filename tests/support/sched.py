"""What the tests expect of this machine's scheduler, from the kernel's version alone (not
from tui/core/sched_slice.py, whose answers they check)."""

from __future__ import annotations

import platform
import re
import sys


def kernel_keeps_slices() -> bool:
    """Linux 6.12 and later: EEVDF custom slices (``sched_attr.sched_runtime``)."""
    m = re.match(r"(\d+)\.(\d+)", platform.release())
    return (
        sys.platform.startswith("linux") and m is not None and ((int(m[1]), int(m[2])) >= (6, 12))
    )
