"""A child-process target for clock tests (a module of its own, so a spawned child can
import it whichever way pytest imported the test)."""

from __future__ import annotations

import time
from multiprocessing.connection import Connection


def send_stamp(conn: Connection) -> None:
    """Send this process's ``perf_counter_ns()`` and close."""
    conn.send(time.perf_counter_ns())
    conn.close()
