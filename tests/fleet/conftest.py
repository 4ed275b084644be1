"""Fleet tests: fixture endpoints served from this process, a real Prometheus when asked."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support import fleet_fixture


@pytest.fixture(scope="module")
def fixture_fleet() -> Iterator[fleet_fixture.FixtureFleet]:
    """Three vLLM-like endpoints, one llama-server-like, one DCGM exporter (2 GPUs, on a
    host named gpu-box-1), then a data-parallel vLLM (two engines, fixture 1's totals)."""
    profiles = [fleet_fixture.Profile("vllm", i) for i in range(3)]
    profiles += [
        fleet_fixture.Profile("llama-server", 3),
        fleet_fixture.Profile("dcgm", 0, host="gpu-box-1"),
        fleet_fixture.Profile("vllm", 1, engines=2),
    ]
    fleet = fleet_fixture.FixtureFleet(profiles).start()
    try:
        yield fleet
    finally:
        fleet.stop()
