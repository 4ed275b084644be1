"""Alert rules: what each ``[[alerts]]`` table says, checked strictly.

A rule watches one live number over a sliding window and fires when it crosses a
threshold, then resolves only once it is back past a second level (hysteresis), and
fires again no sooner than ``cooldown_s`` after resolving. The numbers (:data:`METRICS`,
units as infertop shows them everywhere):

===================  =============================================  ==============
metric               what, over the window                           unit
===================  =============================================  ==============
``ttft``             TTFT of the requests answered in it            ms
``ttfo``             TTFO (first answer token)                      ms
``itl``              per-token ITL, every gap of those requests     ms
``e2e``              request sent → stream's end                    ms
``decode_tps``       decode tok/s of each request                   tok/s
``error_rate``       failed ÷ (done + failed); cancelled left out   0–1
``requests_waiting`` the engine's queue (vLLM ``num_requests_waiting``,
                     llama-server ``requests_deferred``)            requests
``kv_cache``         the engine's KV cache use                      %
``gpu_temp``         the hottest GPU's temperature                  °C
``gpu_memory``       the fullest GPU's memory use                   %
===================  =============================================  ==============

``stat`` reduces the window's values: ``p50``, ``p90``, ``p95``, ``p99``, ``mean``,
``min``, ``max`` or ``last`` (default ``p95`` for the latencies, ``p50`` for decode
tok/s, ``mean`` for the engine's and hardware's numbers; ``error_rate`` is one ratio).

Errors name the file, the rule and the key in one line: ``alerts.toml: rule 'slow'
(alerts[2]): key 'above': must be a number``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal, get_args
from urllib.parse import urlsplit

Metric = Literal[
    "ttft",
    "ttfo",
    "itl",
    "e2e",
    "decode_tps",
    "error_rate",
    "requests_waiting",
    "kv_cache",
    "gpu_temp",
    "gpu_memory",
]
Stat = Literal["p50", "p90", "p95", "p99", "mean", "min", "max", "last"]
Direction = Literal["above", "below"]
METRICS: Final[tuple[Metric, ...]] = get_args(Metric)
STATS: Final[tuple[Stat, ...]] = get_args(Stat)
OUTCOME_METRICS: Final = frozenset({"ttft", "ttfo", "itl", "e2e", "decode_tps", "error_rate"})
ENGINE_METRICS: Final = frozenset({"requests_waiting", "kv_cache"})
HARDWARE_METRICS: Final = frozenset({"gpu_temp", "gpu_memory"})
UNITS: Final[dict[str, str]] = {
    "ttft": "ms",
    "ttfo": "ms",
    "itl": "ms",
    "e2e": "ms",
    "decode_tps": "tok/s",
    "error_rate": "",
    "requests_waiting": "",
    "kv_cache": "%",
    "gpu_temp": "°C",
    "gpu_memory": "%",
}
DEFAULT_STAT: Final[dict[str, Stat]] = {
    "ttft": "p95",
    "ttfo": "p95",
    "itl": "p95",
    "e2e": "p95",
    "decode_tps": "p50",
}
MAX_RULES: Final = 100
NAME_CHARS: Final = 64


class RuleError(ValueError):
    """A rules file or table that cannot be used; the message is one line naming the
    file, the rule and the key."""


@dataclass(frozen=True)
class AlertRule:
    """One rule (see the module docstring). ``threshold`` is crossed in ``direction``
    (above it, or below it for a floor) to fire; ``resolve`` is the level the value must
    be back past to resolve (equal to ``threshold`` without hysteresis)."""

    name: str
    metric: Metric
    stat: Stat
    direction: Direction
    threshold: float
    resolve: float
    window_s: float = 60.0
    cooldown_s: float = 300.0
    min_samples: int = 1
    upstream: str | None = None  # only requests to this upstream (outcome metrics)

    def crossed(self, value: float) -> bool:
        """The value is past the firing threshold."""
        return value > self.threshold if self.direction == "above" else value < self.threshold

    def recovered(self, value: float) -> bool:
        """The value is back past the resolving level."""
        return value < self.resolve if self.direction == "above" else value > self.resolve


@dataclass(frozen=True)
class AlertingSettings:
    """``[alerting]``: where alert events go besides the screen."""

    webhook: str | None = None  # POSTed JSON on every fire and resolve
    webhook_timeout_s: float = 5.0
    webhook_retries: int = 2
    log: str | None = None  # a JSONL file of events (0600)
    bell: bool = False  # the terminal bell with the TUI's line


RULE_KEYS: Final = {
    "name": "the rule's name (shown, and sent as `rule`)",
    "metric": "the number watched: " + ", ".join(METRICS),
    "stat": "how the window's values are reduced: " + ", ".join(STATS),
    "above": "fire when the value goes above this",
    "resolve_below": "resolve when it is back below this (default: above)",
    "below": "fire when the value drops below this (a floor)",
    "resolve_above": "resolve when it is back above this (default: below)",
    "window_s": "the sliding window, seconds (default 60)",
    "cooldown_s": "after resolving, no new fire for this long, seconds (default 300)",
    "min_samples": "values the window needs before the rule may fire (default 1)",
    "upstream": "only requests to this upstream URL (default: every request)",
}
ALERTING_KEYS: Final = {
    "webhook": "URL POSTed a JSON object on every fire and resolve",
    "webhook_timeout_s": "each POST's time limit, seconds (default 5)",
    "webhook_retries": "tries after a failed POST (default 2)",
    "log": "JSONL file of alert events (0600)",
    "bell": "ring the terminal bell with the TUI's alert line (default false)",
}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    f = float(value)
    return f if math.isfinite(f) else None


class _Where:
    def __init__(self, path: Path | str, index: int, name: str | None) -> None:
        self.path, self.index, self.name = path, index, name

    def error(self, key: str | None, what: str) -> RuleError:
        rule = f"rule {self.name!r} " if self.name else "rule "
        at = f"{self.path}: {rule}(alerts[{self.index}])"
        return RuleError(f"{at}: key '{key}': {what}" if key else f"{at}: {what}")


def parse_rule(table: Any, path: Path | str, index: int) -> AlertRule:
    """One ``[[alerts]]`` table (``index`` counts from 1); RuleError naming the rule."""
    if not isinstance(table, dict):
        raise _Where(path, index, None).error(None, "must be a table ([[alerts]])")
    raw_name = table.get("name")
    where = _Where(path, index, raw_name if isinstance(raw_name, str) else None)
    for key in table:
        if key not in RULE_KEYS:
            raise where.error(key, f"unknown key (known: {', '.join(RULE_KEYS)})")
    if not isinstance(raw_name, str) or not raw_name.strip():
        raise where.error("name", "missing or empty: every rule needs a name")
    name = raw_name.strip()
    if len(name) > NAME_CHARS or not name.isprintable():
        raise where.error("name", f"at most {NAME_CHARS} printable characters")
    metric = table.get("metric")
    if metric not in METRICS:
        raise where.error("metric", f"must be one of {', '.join(METRICS)} (got {metric!r})")
    stat = table.get("stat", DEFAULT_STAT.get(metric, "mean"))
    if stat not in STATS:
        raise where.error("stat", f"must be one of {', '.join(STATS)} (got {stat!r})")
    numbers: dict[str, float] = {}
    for key in ("above", "resolve_below", "below", "resolve_above", "window_s", "cooldown_s"):
        if key in table:
            value = _number(table[key])
            if value is None:
                raise where.error(key, f"must be a finite number (got {table[key]!r})")
            numbers[key] = value
    if ("above" in numbers) == ("below" in numbers):
        raise where.error("above", "set exactly one of 'above' (a ceiling) or 'below' (a floor)")
    if "above" in numbers:
        direction: Direction = "above"
        threshold = numbers["above"]
        if "resolve_above" in numbers:
            raise where.error("resolve_above", "goes with 'below'; with 'above' use resolve_below")
        resolve = numbers.get("resolve_below", threshold)
        if resolve > threshold:
            raise where.error("resolve_below", f"must be at most above ({threshold:g})")
    else:
        direction = "below"
        threshold = numbers["below"]
        if "resolve_below" in numbers:
            raise where.error("resolve_below", "goes with 'above'; with 'below' use resolve_above")
        resolve = numbers.get("resolve_above", threshold)
        if resolve < threshold:
            raise where.error("resolve_above", f"must be at least below ({threshold:g})")
    window = numbers.get("window_s", 60.0)
    if not 0 < window <= 86_400:
        raise where.error("window_s", f"must be > 0 and <= 86400 (got {window:g})")
    cooldown = numbers.get("cooldown_s", 300.0)
    if not 0 <= cooldown <= 86_400 * 7:
        raise where.error("cooldown_s", f"must be >= 0 and <= 604800 (got {cooldown:g})")
    min_samples = table.get("min_samples", 1)
    if isinstance(min_samples, bool) or not isinstance(min_samples, int) or min_samples < 1:
        raise where.error("min_samples", f"must be a whole number >= 1 (got {min_samples!r})")
    upstream = table.get("upstream")
    if upstream is not None:
        if not isinstance(upstream, str) or urlsplit(upstream).scheme not in ("http", "https"):
            raise where.error("upstream", f"must be an http(s) URL (got {upstream!r})")
        if metric not in OUTCOME_METRICS:
            raise where.error("upstream", f"applies to request numbers, not {metric!r}")
        upstream = upstream.rstrip("/")
    return AlertRule(
        name=name,
        metric=metric,
        stat=stat,
        direction=direction,
        threshold=threshold,
        resolve=resolve,
        window_s=window,
        cooldown_s=cooldown,
        min_samples=min_samples,
        upstream=upstream,
    )


def parse_rules(tables: Any, path: Path | str) -> list[AlertRule]:
    """Every ``[[alerts]]`` table of a file; names must differ."""
    if not isinstance(tables, list):
        raise RuleError(f"{path}: key 'alerts': must be an array of tables ([[alerts]])")
    if len(tables) > MAX_RULES:
        raise RuleError(f"{path}: key 'alerts': at most {MAX_RULES} rules")
    rules = [parse_rule(t, path, i) for i, t in enumerate(tables, 1)]
    seen: set[str] = set()
    for i, rule in enumerate(rules, 1):
        if rule.name in seen:
            raise _Where(path, i, rule.name).error("name", "another rule has this name")
        seen.add(rule.name)
    return rules


def parse_alerting(table: Any, path: Path | str) -> AlertingSettings:
    """The ``[alerting]`` table; RuleError naming the key."""
    if not isinstance(table, dict):
        raise RuleError(f"{path}: key 'alerting': must be a table")
    for key in table:
        if key not in ALERTING_KEYS:
            raise RuleError(f"{path}: key 'alerting.{key}': unknown key")
    webhook = table.get("webhook")
    if webhook is not None and (
        not isinstance(webhook, str) or urlsplit(webhook).scheme not in ("http", "https")
    ):
        raise RuleError(f"{path}: key 'alerting.webhook': must be an http(s) URL")
    timeout = _number(table.get("webhook_timeout_s", 5.0))
    if timeout is None or not 0 < timeout <= 120:
        raise RuleError(f"{path}: key 'alerting.webhook_timeout_s': must be > 0 and <= 120")
    retries = table.get("webhook_retries", 2)
    if isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= 10:
        raise RuleError(f"{path}: key 'alerting.webhook_retries': a whole number 0 to 10")
    log = table.get("log")
    if log is not None and (not isinstance(log, str) or not log.strip()):
        raise RuleError(f"{path}: key 'alerting.log': must be a file path")
    bell = table.get("bell", False)
    if not isinstance(bell, bool):
        raise RuleError(f"{path}: key 'alerting.bell': must be true or false")
    return AlertingSettings(webhook, timeout, retries, log, bell)


def load_rules_file(path: str | Path) -> tuple[list[AlertRule], AlertingSettings]:
    """A rules file (``infertop proxy --alerts FILE``): ``[alerting]`` and ``[[alerts]]``,
    nothing else; RuleError naming the file (and rule and key)."""
    import sys

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib

    p = Path(path).expanduser()
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise RuleError(f"{p}: cannot read the rules file: {e.strerror or e}") from None
    if len(raw) > 1024 * 1024:
        raise RuleError(f"{p}: a rules file over 1 MiB is no rules file")
    try:
        data = tomllib.loads(raw.decode("utf-8", errors="replace"))
    except (ValueError, RecursionError) as e:
        raise RuleError(f"{p}: invalid TOML: {' '.join(str(e).split())[:200]}") from None
    for key in data:
        if key not in ("alerts", "alerting"):
            raise RuleError(
                f"{p}: key '{key}': unknown key (a rules file has [alerting] and [[alerts]])"
            )
    rules = parse_rules(data.get("alerts", []), p)
    if not rules:
        raise RuleError(f"{p}: no [[alerts]] rule in it")
    return rules, parse_alerting(data.get("alerting", {}), p)
