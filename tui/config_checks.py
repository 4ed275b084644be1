"""The checks of a parsed config past each key's type: numbers in their ranges, known
engine kinds, endpoints and options, telemetry sources, ``[clients]`` fingerprints and
the A/B schedule. Each failure is a ConfigError naming the file and the key (raised by
the Validator, tui/config_keys.py)."""

from __future__ import annotations

from typing import Any

from tui.config_keys import KeyPath, Validator
from tui.config_schema import CLIENT_NAME_CHARS, ENGINE_RANGES, FINGERPRINT_CHARS, RANGES
from tui.config_sections import Config


def _in_range(v: Validator, key: KeyPath, value: float | None, rule: tuple) -> None:  # type: ignore[type-arg]
    if value is None:
        return
    _, low, high, low_ok = rule
    if value > high or value < low or (value == low and not low_ok):
        lower = f">= {_num(low)}" if low_ok else f"> {_num(low)}"
        raise v.error(key, f"must be {lower} and <= {_num(high)} (got {value!r})")


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def check_values(cfg: Config, v: Validator) -> None:
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


def check_client(v: Validator, fingerprint: str, name: object) -> None:
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
