"""Configuration: find, load, validate strictly, save.

Lookup order: ``--config PATH``, ``$INFERTOP_CONFIG``, ``./infertop.toml`` (only once the
user has trusted that file with ``infertop trust``: see tui/config_trust.py; an untrusted
one is skipped with a notice in ``Config.notices``), then the platform config dir
(``platformdirs.user_config_dir("infertop")/config.toml``). With no
file, built-in defaults apply: one engine, ``local``, llama.cpp on the embedded model.
Every key is documented in config.example.toml; an unknown key or a wrong type is a
:class:`ConfigError` naming the file, the key and (where found) the line.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tui.alerts.rules import (
    AlertingSettings,
    AlertRule,
    RuleError,
    parse_alerting,
    parse_rules,
)
from tui.config_keys import NUM as _NUM
from tui.config_keys import ConfigError as ConfigError  # (its public home stays here)
from tui.config_keys import KeyPath, Validator
from tui.config_trust import trust_state, trusted_local
from tui.engines.base import EngineSpec
from tui.engines.placement import AbSchedule

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ENV_CONFIG = "INFERTOP_CONFIG"
LOCAL_CONFIG = "infertop.toml"  # in the current folder: used only once trusted


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


def builtin_engines() -> dict[str, EngineSpec]:
    return {"local": EngineSpec(name="local", kind="llamacpp", model="default")}


# --- schema: key -> (accepted types, description). Nested tables are validated apart.
TOP_KEYS: dict[str, tuple[tuple[type, ...], str]] = {
    "default_engine": ((str,), "name of the [engines.NAME] table used at start"),
    "session_dir": ((str,), "folder for JSONL session logs"),
}
GENERATION_KEYS: dict[str, tuple[tuple[type, ...], str]] = {
    "max_tokens": ((int,), "tokens to generate at most"),
    "temperature": (_NUM, "sampling temperature"),
    "top_p": (_NUM, "nucleus sampling"),
    "seed": ((int,), "sampling seed"),
}
UI_KEYS: dict[str, tuple[tuple[type, ...], str]] = {
    "theme": ((str,), "theme name"),
    "refresh_hz": (_NUM, "metrics panel refresh rate"),
    "ab_schedule": ((str,), "A/B: auto, sequential or concurrent"),
    "ab_concurrent": ((bool,), "A/B: run both engines at once (older form of ab_schedule)"),
    "keys": ((dict,), "binding id -> key"),
}
TELEMETRY_KEYS: dict[str, tuple[tuple[type, ...], str]] = {
    "interval_s": (_NUM, "hardware sampling interval"),
    "gpu": ((bool,), "sample NVIDIA GPUs via NVML"),
    "peak_bandwidth_gbs": (_NUM, "device peak memory bandwidth for the roofline line"),
}
FLEET_KEYS: dict[str, tuple[tuple[type, ...], str]] = {
    "urls": ((list,), "endpoint URLs (default: every engine with a url)"),
    "prometheus": ((str,), "a Prometheus server that scrapes the endpoints"),
    "interval_s": (_NUM, "refresh period"),
    "window_s": (_NUM, "Prometheus: range the rates and quantiles cover"),
    "timeout_s": (_NUM, "timeout of each request to an endpoint"),
}
DISCOVERY_KEYS: dict[str, tuple[tuple[type, ...], str]] = {
    "enabled": ((bool,), "probe local servers' default ports at start"),
    "ports": ((list,), "loopback ports to probe (default: the engines' default ports)"),
    "timeout_s": (_NUM, "timeout of each probe request"),
    "gguf_dirs": ((list,), "folders scanned for GGUF files (default: the usual ones)"),
}
LEDGER_KEYS: dict[str, tuple[tuple[type, ...], str]] = {
    "enabled": ((bool,), "keep every finished request in the ledger"),
    "path": ((str,), "the ledger file (default: the data folder's ledger.sqlite3)"),
    "keep_days": (_NUM, "delete requests older than this many days"),
    "max_mb": (_NUM, "delete the oldest requests past this many MiB"),
    "queue": ((int,), "requests waiting to be written before new ones are dropped"),
    "fingerprints": ((bool,), "proxy: keep API keys' fingerprints (never the keys)"),
    "processes": ((bool,), "proxy: look up the local process of a client on this host"),
    "top_clients": ((int,), "proxy: clients /infertop/metrics names apart (the rest: other)"),
}
FINGERPRINT_CHARS = 14  # "k:" and 12 hex digits (tui/proxy/identity.py)
CLIENT_NAME_CHARS = 200
OTEL_KEYS: dict[str, tuple[tuple[type, ...], str]] = {
    "endpoint": ((str,), "OTLP/HTTP collector base URL, or 'env' (OTEL_EXPORTER_OTLP_*)"),
    "capture_content": ((bool,), "the user's own chat: prompt and answer on its spans"),
    "trace_propagation": ((bool,), "send a W3C traceparent with each request"),
    "metric_interval_s": (_NUM, "how often metrics are exported"),
    "timeout_s": (_NUM, "each export's time limit"),
}
ENGINE_KEYS: dict[str, tuple[tuple[type, ...], str]] = {
    "kind": ((str,), "engine kind"),
    "model": ((str,), "GGUF path, 'default', or model name on a server"),
    "url": ((str,), "server base URL"),
    "n_ctx": ((int,), "context size"),
    "n_threads": ((int,), "CPU threads"),
    "n_gpu_layers": ((int,), "layers offloaded to the GPU"),
    "api_key_env": ((str,), "environment variable holding the API key"),
    "headers": ((dict,), "extra HTTP headers"),
    "verify_tls": ((bool,), "verify TLS certificates"),
    "connect_timeout_s": (_NUM, "connect timeout"),
    "read_timeout_s": (_NUM, "HTTP: wait for the response to start (queue + prefill)"),
    "stall_timeout_s": (_NUM, "HTTP: longest gap between streamed bytes (default: read)"),
    "endpoint": ((str,), "'chat', 'completions' or 'responses' (the OpenAI API's)"),
    "options": ((dict,), "engine-specific options passed through"),
    "telemetry": (
        (str,),
        "whose hardware the panel shows with this engine: 'local', ssh://[user@]host[:port] "
        "or an exporter URL",
    ),
}


def find_config(
    explicit: str | os.PathLike[str] | None = None, notices: list[str] | None = None
) -> Path | None:
    """The config file to use, by the lookup order; None when there is none. A
    ``./infertop.toml`` the user has not trusted is skipped, and why is appended to
    ``notices``."""
    if explicit:
        p = Path(explicit).expanduser()
        if not p.is_file():
            raise ConfigError(f"{p}: config file not found")
        return p
    env = os.environ.get(ENV_CONFIG)
    if env:
        p = Path(env).expanduser()
        if not p.is_file():
            raise ConfigError(f"{p}: config file not found (from ${ENV_CONFIG})")
        return p
    local = trusted_local(Path(LOCAL_CONFIG), notices)
    if local is not None:
        return local
    user = user_config_path()
    return user if user.is_file() else None


def user_config_path() -> Path:
    import platformdirs

    return Path(platformdirs.user_config_dir("infertop")) / "config.toml"


def load_config(explicit: str | os.PathLike[str] | None = None) -> Config:
    """Find and load the config; built-in defaults when no file exists. What the user
    should know (a local config skipped as untrusted) is in ``notices``."""
    notices: list[str] = []
    path = find_config(explicit, notices)
    if path is None:
        return Config(engines=builtin_engines(), notices=notices)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise ConfigError(f"{path}: cannot read the config file: {e.strerror or e}") from None
    from_cwd = not explicit and not os.environ.get(ENV_CONFIG) and path == Path(LOCAL_CONFIG)
    if from_cwd and trust_state(path, raw) != "trusted":
        raise ConfigError(f"{path}: changed while it was read; check it and trust it again")
    cfg = parse_config(raw.decode("utf-8", errors="replace"), path)
    cfg.notices = notices
    return cfg


def parse_config(text: str, path: Path) -> Config:
    """Validate and build a Config from TOML text (``path`` is for messages)."""
    try:
        data = tomllib.loads(text)
    except ValueError as e:  # TOMLDecodeError, or an integer of over 4300 digits
        raise ConfigError(f"{path}: invalid TOML: {e}") from None
    except RecursionError:
        raise ConfigError(
            f"{path}: invalid TOML: arrays or inline tables nested too deeply"
        ) from None
    v = Validator(text, path)
    v.walk(data)
    cfg = Config(path=path)
    for key, value in data.items():
        if key in TOP_KEYS:
            v.check((key,), value, TOP_KEYS[key][0])
            setattr(cfg, key, value)
        elif key == "generation":
            cfg.generation = GenerationDefaults(**v.table(("generation",), value, GENERATION_KEYS))
        elif key == "ui":
            cfg.ui = UISettings(**v.table(("ui",), value, UI_KEYS))
            if "ab_concurrent" in value and "ab_schedule" in value:
                raise v.error(("ui", "ab_concurrent"), "set ab_schedule or ab_concurrent, not both")
            for k, key_value in cfg.ui.keys.items():
                v.check(("ui", "keys", k), key_value, (str,))
        elif key == "telemetry":
            cfg.telemetry = TelemetrySettings(**v.table(("telemetry",), value, TELEMETRY_KEYS))
        elif key == "fleet":
            cfg.fleet = FleetSettings(**v.table(("fleet",), value, FLEET_KEYS))
            for i, url in enumerate(cfg.fleet.urls):
                v.url(("fleet", "urls"), url, f"item {i + 1}: ")
            if cfg.fleet.prometheus is not None:
                v.url(("fleet", "prometheus"), cfg.fleet.prometheus)
        elif key == "discovery":
            cfg.discovery = DiscoverySettings(**v.table(("discovery",), value, DISCOVERY_KEYS))
            for port in cfg.discovery.ports or []:
                v.check(("discovery", "ports"), port, (int,))
                if not 0 < port < 65536:
                    raise v.error(("discovery", "ports"), f"not a TCP port: {port}")
            for d in cfg.discovery.gguf_dirs or []:
                v.check(("discovery", "gguf_dirs"), d, (str,))
        elif key == "ledger":
            cfg.ledger = LedgerSettings(**v.table(("ledger",), value, LEDGER_KEYS))
        elif key == "clients":
            v.check(("clients",), value, (dict,))
            for fingerprint, name in value.items():
                _check_client(v, fingerprint, name)
                cfg.clients[fingerprint] = name
        elif key == "otel":
            cfg.otel = OtelSettings(**v.table(("otel",), value, OTEL_KEYS))
            if cfg.otel.endpoint is not None and cfg.otel.endpoint != "env":
                v.url(("otel", "endpoint"), cfg.otel.endpoint)
        elif key == "alerts":
            try:
                cfg.alerts = parse_rules(value, path)
            except RuleError as e:
                raise ConfigError(str(e)) from None
        elif key == "alerting":
            try:
                cfg.alerting = parse_alerting(value, path)
            except RuleError as e:
                raise ConfigError(str(e)) from None
        elif key == "engines":
            v.check(("engines",), value, (dict,))
            for name, table in value.items():
                fields = v.table(("engines", name), table, ENGINE_KEYS)
                if "kind" not in fields:
                    raise v.error(("engines", name), "missing required key 'kind'")
                for header, header_value in fields.get("headers", {}).items():
                    v.header(("engines", name, "headers", header), header, header_value)
                cfg.engines[name] = EngineSpec(name=name, **fields)
        else:
            raise v.error((key,), "unknown key")
    if not cfg.engines:
        cfg.engines = builtin_engines()
    if cfg.default_engine not in cfg.engines:
        raise v.error(("default_engine",), f"names no engine table ({cfg.default_engine!r})")
    _check_values(cfg, v)
    return cfg


# (dotted key pattern, lowest, highest, lowest allowed itself?) for numbers with a range
RANGES: tuple[tuple[str, float, float, bool], ...] = (
    ("generation.max_tokens", 1, 10_000_000, True),
    ("generation.temperature", 0, 100, True),
    ("generation.top_p", 0, 1, False),
    ("generation.seed", 0, 2**63 - 1, True),
    ("ui.refresh_hz", 0, 1000, False),
    ("telemetry.interval_s", 0, 3600, False),
    ("telemetry.peak_bandwidth_gbs", 0, 1e6, False),
    ("fleet.interval_s", 0, 3600, False),
    ("fleet.window_s", 1, 86_400, True),
    ("fleet.timeout_s", 0, 600, False),
    ("discovery.timeout_s", 0, 60, False),
    ("ledger.keep_days", 0, 36_500, False),
    ("ledger.max_mb", 0, 1_048_576, False),
    ("ledger.queue", 1, 10_000_000, True),
    ("ledger.top_clients", 0, 1000, True),
    ("otel.metric_interval_s", 0.1, 3600, True),
    ("otel.timeout_s", 0, 120, False),
)
ENGINE_RANGES: tuple[tuple[str, float, float, bool], ...] = (
    ("n_ctx", 1, 100_000_000, True),
    ("n_threads", 1, 4096, True),
    ("n_gpu_layers", -1, 1_000_000, True),
    ("connect_timeout_s", 0, 86_400, False),
    ("read_timeout_s", 0, 86_400, False),
    ("stall_timeout_s", 0, 86_400, False),
)


def _in_range(v: Validator, key: KeyPath, value: float | None, rule: tuple) -> None:  # type: ignore[type-arg]
    if value is None:
        return
    _, low, high, low_ok = rule
    if value > high or value < low or (value == low and not low_ok):
        lower = f">= {_num(low)}" if low_ok else f"> {_num(low)}"
        raise v.error(key, f"must be {lower} and <= {_num(high)} (got {value!r})")


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _check_values(cfg: Config, v: Validator) -> None:
    from tui.engines.kinds import find_kind, kind_names

    sections = {
        "generation": cfg.generation,
        "ui": cfg.ui,
        "telemetry": cfg.telemetry,
        "fleet": cfg.fleet,
        "discovery": cfg.discovery,
        "ledger": cfg.ledger,
        "otel": cfg.otel,
    }
    for rule in RANGES:
        section, _, key = rule[0].partition(".")
        _in_range(v, (section, key), getattr(sections[section], key), rule)
    for name, spec in cfg.engines.items():
        if find_kind(spec.kind) is None:
            known = ", ".join(kind_names())
            raise v.error(("engines", name, "kind"), f"unknown kind {spec.kind!r} (known: {known})")
        if spec.endpoint not in ("chat", "completions", "responses"):
            raise v.error(
                ("engines", name, "endpoint"), "must be 'chat', 'completions' or 'responses'"
            )
        for rule in ENGINE_RANGES:
            _in_range(v, ("engines", name, rule[0]), getattr(spec, rule[0]), rule)
        _check_options(v, name, spec.kind, spec.options)
        if spec.telemetry is not None:
            _check_telemetry(v, name, spec.telemetry)
    _check_ab_schedule(cfg, v)


def _check_ab_schedule(cfg: Config, v: Validator) -> None:
    from tui.engines.placement import AB_SCHEDULES, CONCURRENT, SEQUENTIAL

    ui = cfg.ui
    if ui.ab_schedule not in AB_SCHEDULES:
        raise v.error(("ui", "ab_schedule"), f"must be one of {', '.join(AB_SCHEDULES)}")
    if ui.ab_concurrent is not None:  # the older key (never beside ab_schedule: see parse)
        ui.ab_schedule = CONCURRENT if ui.ab_concurrent else SEQUENTIAL


def _check_client(v: Validator, fingerprint: str, name: object) -> None:
    """``[clients]``: ``"k:" + 12 hex digits = "a name"`` (``infertop usage`` shows the
    fingerprints; ``infertop usage --fingerprint`` makes one from a key)."""
    key = ("clients", fingerprint)
    hexpart = fingerprint[2:]
    if (
        len(fingerprint) != FINGERPRINT_CHARS
        or not fingerprint.startswith("k:")
        or any(c not in "0123456789abcdef" for c in hexpart)
    ):
        raise v.error(key, "not a key fingerprint (k: and 12 hex digits, as `usage` shows)")
    v.check(key, name, (str,))
    assert isinstance(name, str)
    if not name.strip() or len(name) > CLIENT_NAME_CHARS:
        raise v.error(key, f"a name of 1 to {CLIENT_NAME_CHARS} characters")


def _check_telemetry(v: Validator, name: str, text: str) -> None:
    from tui.telemetry.sources import SourceError, parse_source

    try:
        parse_source(text)
    except SourceError as e:
        raise v.error(("engines", name, "telemetry"), str(e)) from None


def _check_options(v: Validator, name: str, kind: str, options: dict[str, Any]) -> None:
    from tui.engines.kinds import find_kind

    found = find_kind(kind)
    accepted = found.options if found is not None else {}
    for key, value in options.items():
        key_path = ("engines", name, "options", key)
        if key not in accepted:
            known = ", ".join(sorted(accepted)) or "none"
            raise v.error(key_path, f"unknown option for kind {kind!r} (it accepts: {known})")
        v.check(key_path, value, accepted[key])


def save_config(cfg_data: dict[str, Any], path: Path) -> None:
    """Write a config mapping as TOML (atomically)."""
    import tomli_w

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(tomli_w.dumps(cfg_data).encode())
    tmp.replace(path)
