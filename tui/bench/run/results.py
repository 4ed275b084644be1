"""What a bench run measured: per engine (:class:`EngineRun`), the whole run
(:class:`BenchResult`), and the progress the runner reports (:class:`BenchUpdate`).

The runner (tui/bench/run/runner.py) fills them; the statistics (tui/bench/stats) and the
report files (tui/bench/report) read them.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from tui.bench.run.plan import BenchPlan
from tui.bench.run.prompts import PromptShape
from tui.bench.run.records import DepthContext, LevelRun, RequestRecord
from tui.engines.base import Engine, EngineSpec
from tui.transport.access import redact_url


@dataclass
class EngineRun:
    """Everything measured for one engine."""

    name: str
    kind: str
    spec: dict[str, Any]
    info: dict[str, Any] = field(default_factory=dict)
    load_ms: float | None = None
    capacity: int | None = None
    capacity_source: str = "unknown"
    capacity_note: str = ""
    prompt: PromptShape | None = None
    cold_method: str | None = None
    cold_note: str | None = None
    calibration: list[RequestRecord] = field(default_factory=list)
    warmup: list[RequestRecord] = field(default_factory=list)
    cold: LevelRun | None = None
    levels: list[LevelRun] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    error: str | None = None  # the engine could not be built or loaded
    # how the engine applied the bench's cache_prompt=false / ignore_eos=true (its words)
    controls: dict[str, str] = field(default_factory=dict)
    depth_levels: list[LevelRun] = field(default_factory=list)  # tui.bench.run.depth
    depth_contexts: list[DepthContext] = field(default_factory=list)
    capacity_search: dict[str, Any] | None = None  # --find-capacity (tui/bench/run/capacity)
    # requests made outside the levels that were not measured: the engine's small calls
    # ("GET /props": 1) and the generation requests of calibration and warm-up
    setup_requests: dict[str, int] = field(default_factory=dict)

    def records(self) -> list[RequestRecord]:
        out = list(self.calibration) + list(self.warmup)
        if self.cold is not None:
            out += self.cold.records
        for level in self.levels + self.depth_levels:
            out += level.records
        return out

    def measured(self) -> list[RequestRecord]:
        """Cold and warm requests (those that enter the statistics, when ok)."""
        return [r for r in self.records() if r.phase in ("cold", "warm")]


@dataclass
class BenchResult:
    plan: BenchPlan
    started_at: str
    engines: list[EngineRun] = field(default_factory=list)
    finished_at: str | None = None
    partial: bool = True
    partial_reason: str | None = "incomplete: written while the bench was still running"
    environment: dict[str, Any] = field(default_factory=dict)
    own_cpu: dict[str, Any] | None = None  # the bench's own CPU (ProcessCpu.to_dict())
    energy: Any = None  # an EnergyTrack sampled during the run (tui/bench/energy.py)
    energy_source: dict[str, Any] | None = None  # whose hardware, how often


@dataclass(frozen=True)
class BenchUpdate:
    """Progress: ``done`` of ``total`` planned requests; ``record`` = the one just done."""

    done: int
    total: int
    engine: str
    stage: str
    elapsed_s: float
    eta_s: float | None
    record: RequestRecord | None = None
    message: str | None = None


def utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def spec_for_report(spec: EngineSpec) -> dict[str, Any]:
    """The spec minus anything secret-bearing (headers may carry tokens)."""
    d = dict(spec.__dict__)
    d["headers"] = sorted(spec.headers)  # names only
    if spec.telemetry:
        d["telemetry"] = redact_url(spec.telemetry)  # an exporter URL's password
    return d


def setup_requests(engine: Engine, run: EngineRun) -> dict[str, int]:
    """What the bench sent an engine before its levels that was not measured: its small
    calls so far (load, capacity, prompt counting) and the generation requests of
    calibration and warm-up."""
    out = dict(getattr(engine, "calls", None) or {})
    if run.calibration:
        out["generation (calibration)"] = len(run.calibration)
    if run.warmup:
        out["generation (warm-up)"] = len(run.warmup)
    return dict(sorted(out.items()))
