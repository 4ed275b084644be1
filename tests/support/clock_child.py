"""A child-process target for clock tests (a module of its own: a spawned child imports
``tests.support.clock_child`` by its name, the repository root on its path as on the parent's)."""

from __future__ import annotations

import time
from multiprocessing.connection import Connection


def send_stamp(conn: Connection) -> None:
    """Send this process's ``perf_counter_ns()`` and close."""
    conn.send(time.perf_counter_ns())
    conn.close()
