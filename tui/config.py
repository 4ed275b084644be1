"""Configuration: find, load, validate strictly, save.

Its parts: the sections' dataclasses (tui/config_sections.py), the keys, types and ranges
a file may hold (tui/config_schema.py), the checks past the types (tui/config_checks.py),
the Validator that names file, key and line (tui/config_keys.py); their names are
importable from here too.

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
from pathlib import Path
from typing import Any

from tui.alerts.rules import RuleError, parse_alerting, parse_rules
from tui.config_checks import check_client, check_values
from tui.config_keys import ConfigError as ConfigError  # (its public home stays here)
from tui.config_keys import Validator
from tui.config_schema import CLIENT_NAME_CHARS as CLIENT_NAME_CHARS
from tui.config_schema import DISCOVERY_KEYS as DISCOVERY_KEYS
from tui.config_schema import ENGINE_KEYS as ENGINE_KEYS
from tui.config_schema import ENGINE_RANGES as ENGINE_RANGES
from tui.config_schema import FINGERPRINT_CHARS as FINGERPRINT_CHARS
from tui.config_schema import FLEET_KEYS as FLEET_KEYS
from tui.config_schema import GENERATION_KEYS as GENERATION_KEYS
from tui.config_schema import LEDGER_KEYS as LEDGER_KEYS
from tui.config_schema import OTEL_KEYS as OTEL_KEYS
from tui.config_schema import RANGES as RANGES
from tui.config_schema import TELEMETRY_KEYS as TELEMETRY_KEYS
from tui.config_schema import TOP_KEYS as TOP_KEYS
from tui.config_schema import UI_KEYS as UI_KEYS
from tui.config_sections import Config as Config
from tui.config_sections import DiscoverySettings as DiscoverySettings
from tui.config_sections import FleetSettings as FleetSettings
from tui.config_sections import GenerationDefaults as GenerationDefaults
from tui.config_sections import LedgerSettings as LedgerSettings
from tui.config_sections import OtelSettings as OtelSettings
from tui.config_sections import TelemetrySettings as TelemetrySettings
from tui.config_sections import UISettings as UISettings
from tui.config_trust import trust_state, trusted_local
from tui.engines.base import EngineSpec

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ENV_CONFIG = "INFERTOP_CONFIG"
LOCAL_CONFIG = "infertop.toml"  # in the current folder: used only once trusted


def builtin_engines() -> tuple[dict[str, EngineSpec], str]:
    """The engines when config names none, and the default: the llama.cpp builds
    installed (tui/engines/inprocess/llama_builds.py: ``embedded_engines``)."""
    from tui.engines.inprocess.llama_builds import embedded_default, embedded_engines

    engines = embedded_engines()
    return engines, embedded_default(engines)


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
        engines, default = builtin_engines()
        return Config(default_engine=default, engines=engines, notices=notices)
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
                check_client(v, fingerprint, name)
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
        cfg.engines, default = builtin_engines()
        cfg.default_engine = cfg.default_engine if "default_engine" in data else default
    if cfg.default_engine not in cfg.engines:
        raise v.error(("default_engine",), f"names no engine table ({cfg.default_engine!r})")
    check_values(cfg, v)
    return cfg


def save_config(cfg_data: dict[str, Any], path: Path) -> None:
    """Write a config mapping as TOML (atomically)."""
    import tomli_w

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(tomli_w.dumps(cfg_data).encode())
    tmp.replace(path)
