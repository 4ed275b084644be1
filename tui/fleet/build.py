"""The one fleet builder: ``infertop fleet`` and the TUI's F3 both read a fleet made here.

Endpoints are the given URLs (each matched to a configured engine with that URL), else
every configured engine with a URL; a Prometheus server may stand for them all. Where an
endpoint names a ``telemetry`` source (or ``--telemetry`` gives one), its host's hardware
joins its row (tui/fleet/hardware.py).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tui.config import Config
from tui.engines.base import EngineSpec


class NoFleet(ValueError):
    """Nothing to show: no endpoint and no Prometheus server (a message for the user)."""


def build_fleet(
    config: Config,
    *,
    urls: list[str] | None = None,
    prometheus: str | None = None,
    telemetry: str | None = None,
    window_s: float | None = None,
    timeout_s: float | None = None,
    verify_tls: bool = True,
) -> Any:
    """A :class:`~tui.fleet.poller.Fleet` from config and overrides (the CLI's flags);
    NoFleet when there is nothing to show. ``telemetry`` was checked by the caller."""
    from tui.fleet.poller import Fleet, fleet_endpoints  # httpx: not on the start-up path

    settings = config.fleet
    prometheus = prometheus or settings.prometheus
    endpoints = fleet_endpoints(urls or settings.urls, config.engines, verify_tls)
    if not endpoints and not prometheus:
        raise NoFleet(
            "no endpoints: pass --url URL (repeatable) or --prometheus URL, or set [fleet] "
            "urls / prometheus in config (or give engines a url)"
        )
    hardware = None
    if telemetry is not None or any(e.telemetry for e in endpoints):
        from tui.fleet.hardware import FleetHardware

        hardware = FleetHardware(telemetry, config.telemetry.interval_s)
    return Fleet(
        endpoints,
        prometheus,
        window_s=window_s or settings.window_s,
        timeout_s=timeout_s or settings.timeout_s,
        verify_tls=verify_tls,
        hardware=hardware,
    )


def adopt_endpoint(config: Config, fleet: Any, row: Any) -> EngineSpec:
    """The engine spec that talks to fleet ``row``'s endpoint, added to ``config``'s
    engines (renamed "NAME (fleet)" when its name is another URL's engine)."""
    from tui.fleet.poller import spec_for_row

    spec_for = getattr(fleet, "engine_spec_for", None)
    spec: EngineSpec = spec_for(row) if spec_for is not None else spec_for_row(row)
    existing = config.engines.get(spec.name)
    if existing is not None and existing.url != spec.url:  # the name is another's
        spec = dataclasses.replace(spec, name=f"{spec.name} (fleet)")
        existing = config.engines.get(spec.name)
    if existing is None:
        config.engines[spec.name] = spec
    return config.engines[spec.name]
