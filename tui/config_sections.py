"""The config's sections as dataclasses: ``[generation]``, ``[ui]``, ``[telemetry]``,
``[fleet]``, ``[discovery]``, ``[ledger]``, ``[otel]``, and :class:`Config` that holds them
with the engines, clients and alert rules. Their defaults are the built-in ones; loading
and checking a file is tui/config.py's and tui/config_checks.py's job."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tui.alerts.rules import AlertingSettings, AlertRule
from tui.config_keys import ConfigError
from tui.engines.base import EngineSpec
from tui.engines.placement import AbSchedule


@dataclass
class GenerationDefaults:
    max_tokens: int = 256
    temperature: float = 0.7
    top_p: float = 0.95
    seed: int | None = None


@dataclass
class UISettings:
    theme: str = "infertop-dark"
    refresh_hz: float = 10.0
    # A/B: "auto" (one after the other when A and B share a machine, else at once),
    # "sequential" or "concurrent" (tui/engines/placement.py)
    ab_schedule: AbSchedule = "auto"  # checked against AB_SCHEDULES when loaded
    ab_concurrent: bool | None = None  # older key: true = "concurrent", false = "sequential"
    keys: dict[str, str] = field(default_factory=dict)


@dataclass
class TelemetrySettings:
    interval_s: float = 0.5
    gpu: bool = True
    peak_bandwidth_gbs: float | None = None


@dataclass
class FleetSettings:
    """``[fleet]``: the endpoints ``infertop fleet`` shows (see tui/fleet)."""

    urls: list[str] = field(default_factory=list)  # empty: every engine with a url
    prometheus: str | None = None  # read every endpoint from this Prometheus server
    interval_s: float = 2.0  # refresh period
    window_s: float = 60.0  # Prometheus: the PromQL range rates and quantiles cover
    timeout_s: float = 2.0  # per request to an endpoint


@dataclass
class DiscoverySettings:
    """``[discovery]``: local servers probed at start, GGUF folders scanned
    (tui/engines/servers/discovery.py, tui/engines/files/gguf_scan.py)."""

    enabled: bool = True  # probe the ports at start (in the background)
    ports: list[int] | None = None  # None: DEFAULT_PORTS (tui/engines/servers/discovery.py)
    timeout_s: float = 1.0  # per request of a probe
    gguf_dirs: list[str] | None = None  # None: the usual folders (default_gguf_roots)

    def port_list(self) -> list[int]:
        from tui.engines.servers.discovery import default_ports

        return list(self.ports) if self.ports is not None else default_ports()

    def gguf_roots(self) -> list[Path]:
        from tui.engines.files.gguf_scan import default_gguf_roots

        if self.gguf_dirs is None:
            return default_gguf_roots()
        return [Path(d).expanduser() for d in self.gguf_dirs]


@dataclass
class LedgerSettings:
    """``[ledger]``: the request ledger (tui/ledger; docs/ledger.md)."""

    enabled: bool = True  # keep every finished request (proxy, run, bench, the TUI)
    path: str | None = None  # None: the data folder's ledger.sqlite3
    keep_days: float = 90.0  # requests older than this are deleted
    max_mb: float = 1024.0  # past this, the oldest requests are deleted
    queue: int = 4096  # requests waiting to be written before new ones are dropped
    fingerprints: bool = True  # the proxy takes API keys' fingerprints (never the keys)
    processes: bool = True  # the proxy looks up a local client's process
    top_clients: int = 10  # clients /infertop/metrics names apart (the rest: "other")


@dataclass
class OtelSettings:
    """``[otel]``: OpenTelemetry export (docs/otel.md); off unless ``endpoint`` is set."""

    endpoint: str | None = None  # a collector's OTLP/HTTP base URL, or "env"
    capture_content: bool = False  # the user's own chat: prompt and answer on its spans
    trace_propagation: bool = False  # send traceparent with each request (the proxy too)
    metric_interval_s: float = 10.0  # how often metrics are exported
    timeout_s: float = 5.0  # each export's time limit


@dataclass
class Config:
    default_engine: str = "local"
    session_dir: str | None = None
    engines: dict[str, EngineSpec] = field(default_factory=dict)
    generation: GenerationDefaults = field(default_factory=GenerationDefaults)
    ui: UISettings = field(default_factory=UISettings)
    telemetry: TelemetrySettings = field(default_factory=TelemetrySettings)
    fleet: FleetSettings = field(default_factory=FleetSettings)
    discovery: DiscoverySettings = field(default_factory=DiscoverySettings)
    ledger: LedgerSettings = field(default_factory=LedgerSettings)
    clients: dict[str, str] = field(default_factory=dict)  # key fingerprint -> name
    otel: OtelSettings = field(default_factory=OtelSettings)
    alerts: list[AlertRule] = field(default_factory=list)  # [[alerts]] (tui/alerts/rules.py)
    alerting: AlertingSettings = field(default_factory=AlertingSettings)
    path: Path | None = None  # where it was read from (None: built-in defaults)
    notices: list[str] = field(default_factory=list)  # for the user (an ignored local file)

    def engine(self, name: str) -> EngineSpec:
        try:
            return self.engines[name]
        except KeyError:
            known = ", ".join(self.engines) or "none"
            raise ConfigError(f"unknown engine {name!r} (configured engines: {known})") from None
