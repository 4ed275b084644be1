"""A small load soak (32 streams × 5 s) of the bench client against the pace server.

The full one (256 × 60 s, figures printed) is benchmarks/soak.py; both run the harness
in tests/support/soak.py. Asserted here: every request is accounted for, the streams
really overlapped, no file descriptor outlives the engine, RSS stays flat after the
warm-up (a bound loose enough for a shared machine), and the client's ITL matches the
server's actual send gaps.
"""

from __future__ import annotations

from tests.support.soak import SoakConfig, run_soak

STREAMS = 32


async def test_soak_32_streams_for_5_seconds() -> None:
    res = await run_soak(SoakConfig(streams=STREAMS, duration_s=5.0))
    report = "\n".join(res.lines())
    print(report)  # shown with -s, and with the failure
    # accounting: every request started has a record, and nothing is left in flight
    assert res.driver_error is None, report
    assert res.started >= 3 * STREAMS, report  # ~1 s per request: several rounds
    assert res.ok + res.failed + res.cancelled == res.started, report
    assert res.in_flight_after == 0, report
    assert res.failed == 0 and res.cancelled == 0, report  # the pace server never fails
    assert res.server_requests == res.started, report
    # the workload happened as meant: all streams at once, not one after another
    assert res.server_max_active == STREAMS, report
    assert res.client_max_in_flight == STREAMS, report
    assert res.overlap_max == STREAMS and res.overlap_median >= 0.9 * STREAMS, report
    # nothing leaks
    assert res.fds_new == [] and res.fds_after == res.fds_before, report
    assert res.rss_growth_pct < 25.0, report
    # measurement stays honest under load
    assert res.itl_gaps > 1000, report
    assert res.itl_err_p50_ms is not None and res.itl_err_p50_ms <= 0.2, report
