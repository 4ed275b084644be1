"""The shape of a bench report (report.json), as types: what ``build_report`` writes and
every reader of it (report.md's sections, the CSV, the plots, ``compare``, the TUI's bench
screen) reads.

A report is a JSON document, so its parts are ``TypedDict``s: a built report is the
dictionary itself (nothing converts it), and mypy checks each key read against the key
written. Leaves that are themselves small JSON tables of numbers (an interval, a
percentile summary, the engine's own account of a level) stay ``dict[str, Any]``; a
request record is ``RequestRecord.to_dict``'s.

A key that only some levels or engines carry is in the ``total=False`` half of its type
(Python 3.10 has no ``NotRequired``): read it with ``.get``.
"""

from __future__ import annotations

from typing import Any, TypedDict

from tui.bench.run.records import LevelKind

Table = dict[str, Any]  # a small JSON table of numbers (an interval, percentiles, ...)


class _LevelRequired(TypedDict):
    label: str
    kind: LevelKind
    concurrency: int | None
    rate: float | None
    complete: bool
    requests: int
    ok: int
    failed: int
    cancelled: int
    wall_s: float | None
    paused_s: float
    engine_truth: Table | None
    extra_requests: dict[str, int]
    output_tokens: int
    total_tps: float | None
    request_rate: float | None
    eta: float | None
    eta_per_slot: float | None
    percentiles: dict[str, Table]
    medians: dict[str, Table]
    prompt_tokens_median: float | None
    pre_send_wait_ms: Table
    short_outputs: int
    workload: Table
    output_tokens_estimated: bool
    prefill_estimated: bool
    reasoning: Table | None
    cut: int


class LevelSummary(_LevelRequired, total=False):
    """One level of one engine (tui/bench/stats/aggregate.py: ``summarize_level``)."""

    load_ms: Table | None  # cold starts: time to ready
    goodput: Table  # with an SLO
    arrivals: Table  # open-loop levels
    stop_reason: str | None
    energy: Table | None  # with an energy track


class Failure(TypedDict):
    """One failed request, as the report lists it."""

    level: str
    index: int
    request_id: str
    kind: str | None
    message: str | None


class _EngineRequired(TypedDict):
    name: str
    kind: str
    error: str | None
    load_ms: float | None
    capacity: int | None
    capacity_source: str | None
    capacity_note: str
    prompt: Table | None
    cold_method: str | None
    cold_note: str | None
    headline: str | None
    single_request_tps: float | None
    levels: list[LevelSummary]
    cold: LevelSummary | None
    requests: int
    ok: int
    failed: int
    cancelled: int
    failures: list[Failure]
    warnings: list[str]
    setup_requests: dict[str, int]
    capacity_search: Table | None
    all_failed: bool
    depth: list[Table]  # one row per measured context depth (tui/bench/stats/depth.py)
    batching: Table


class EngineSummary(_EngineRequired, total=False):
    """One engine's results (``summarize_engine``)."""


class Comparison(TypedDict):
    """An engine's headline median ÷ the first engine's, with its interval."""

    metric: str
    engine: str
    baseline: str
    level: str
    ratio: float
    low: float
    high: float
    n: list[int]


class Summary(TypedDict):
    """report.json's "summary" (``summarize_result``)."""

    engines: list[EngineSummary]
    comparisons: list[Comparison]
    bootstrap_resamples: int
    fairness: list[str]


class _EntryRequired(TypedDict):
    name: str
    kind: str
    spec: Table
    info: Table | None
    model_file: Table | None
    request_controls: dict[str, str]
    records: list[Table]  # RequestRecord.to_dict, each with its "verdict" (tui/core/verdict.py)


class EngineEntry(_EntryRequired, total=False):
    """One engine as report.json's "engines" lists it: what ran, and every request."""

    speculation: list[Table]  # per warm level, where it drafted (tui/bench/stats/why.py)


class _ReportRequired(TypedDict):
    schema: str
    partial: bool
    partial_reason: str | None
    started_at: str
    finished_at: str | None
    plan: Table  # BenchPlan.to_dict()
    environment: Table  # tui/bench/run/environment.py, and each engine's stamp sources
    energy_source: Table | None  # the energy track: where its joules came from
    own_cpu: Table | None
    engines: list[EngineEntry]
    summary: Summary


class BenchReport(_ReportRequired, total=False):
    """A whole report (tui/bench/report/files.py: ``build_report``)."""

    sweep: Table  # an engine-parameter sweep's study (tui/bench/sweep)
