"""Endpoints read directly over HTTP (fixture servers with known numbers)."""

from __future__ import annotations

import time

import pytest

from tests.support import fleet_fixture as ff
from tests.support.prometheus_server import free_port
from tui.engines.base import EngineSpec
from tui.fleet.poller import Fleet, fleet_endpoints


def _by_url(rows):  # type: ignore[no-untyped-def]
    return {r.url: r for r in rows}


# wall clock, with a margin: the whole call (a 0.3 s gap and two refreshes of five
# loopback endpoints: 0.4 s idle, about 2 s with both cores busy) within 10 s; a poll that
# hung would be waited for up to its deadline (8 requests × the 2 s timeout, + 1 s)
@pytest.mark.timing
def test_once_scrapes_twice_and_fills_every_column(fixture_fleet) -> None:
    down = f"http://127.0.0.1:{free_port()}"
    fleet = Fleet(fleet_endpoints(fixture_fleet.urls[:4] + [down], {}))
    try:
        t0 = time.monotonic()
        snap = fleet.once(gap_s=0.3)
        took = time.monotonic() - t0
    finally:
        fleet.close()
    rows = _by_url(snap.rows)
    assert [r.url for r in snap.rows] == fixture_fleet.urls[:4] + [down]  # the order given
    for i, url in enumerate(fixture_fleet.urls[:3]):
        r, want = rows[url], ff.expected_vllm(i)
        assert (r.kind, r.model, r.up, r.error, r.source) == (
            "vllm",
            "fixture-model",
            True,
            None,
            "scrape",
        )
        for key in ("ttft_p50_ms", "ttft_p90_ms", "itl_p50_ms", "prefix_cache_hit_pct"):
            assert getattr(r, key) == pytest.approx(want[key]), key
        assert r.running == want["running"] and r.kv_cache_pct == pytest.approx(
            want["kv_cache_pct"]
        )
        # one scrape's step over the measured gap (>= 0.3 s, inside the call)
        assert r.window_s is not None and 0.3 <= r.window_s < took
        assert r.gen_tps == pytest.approx(want["gen_per_scrape"] / r.window_s)
        assert r.gpus is None  # no hardware source for this host: null, not zeros
    llama = rows[fixture_fleet.urls[3]]
    assert (llama.kind, llama.model, llama.up) == ("llama-server", "fixture-model", True)
    assert llama.gen_tps == pytest.approx((40 + 3) / llama.window_s)  # profile 3: 43 a scrape
    gone = rows[down]
    assert not gone.up and gone.kind is None and "connection refused" in gone.error
    assert all(gone.to_json()[k] is None for k in ("running", "gen_tps", "ttft_p50_ms"))
    assert took < 10.0, took


# wall clock, with a margin: each refresh (0.2 s idle, the first one 1.4 s seen with both
# cores busy) within the 5 s timeout, which a refresh that waited on the down one would take
@pytest.mark.timing
def test_a_down_endpoint_leaves_the_rest_updating(fixture_fleet) -> None:
    down = f"http://127.0.0.1:{free_port()}"
    fleet = Fleet(fleet_endpoints([down, *fixture_fleet.urls[:2]], {}), timeout_s=5.0)
    try:
        snaps = [fleet.refresh() for _ in range(3)]
    finally:
        fleet.close()
    for snap in snaps:
        rows = _by_url(snap.rows)
        assert not rows[down].up and "connection refused" in rows[down].error
        assert all(rows[u].up for u in fixture_fleet.urls[:2])
        assert snap.took_s < 5.0 and snap.scrapes == 3
    assert snaps[0].rows[1].gen_tps is None  # the first refresh has no window yet
    assert all(s.rows[1].gen_tps and s.rows[2].gen_tps for s in snaps[1:])


def test_an_endpoint_that_dies_says_so_and_keeps_its_kind() -> None:
    fixture = ff.FixtureFleet([ff.Profile("vllm", 0)]).start()
    fleet = Fleet(fleet_endpoints(fixture.urls, {}), timeout_s=1.0)
    try:
        fleet.refresh()
        assert fleet.refresh().rows[0].gen_tps is not None
        fixture.stop()
        row = fleet.refresh().rows[0]
    finally:
        fleet.close()
    assert not row.up and row.kind == "vllm" and row.gen_tps is None
    assert "connection refused" in row.error or "broke" in row.error


def test_a_missing_api_key_is_the_rows_error(fixture_fleet, monkeypatch) -> None:
    monkeypatch.delenv("INFERTOP_TEST_NO_SUCH_KEY", raising=False)
    spec = EngineSpec(
        "keyed", "vllm", url=fixture_fleet.urls[0], api_key_env="INFERTOP_TEST_NO_SUCH_KEY"
    )
    fleet = Fleet([spec])
    try:
        row = fleet.refresh().rows[0]
    finally:
        fleet.close()
    assert row.name == "keyed" and not row.up and "INFERTOP_TEST_NO_SUCH_KEY" in row.error
