"""What a bench will do: its parameters, presets, and the parsing of its inputs.

A bench runs, per engine, one after another: optional cold starts, warm-up requests, then
each load level. A *concurrency level* c keeps c requests in flight (c workers, each
sending ``runs`` requests back to back: c × runs requests). A *Poisson level* sends
``runs`` requests whose start times are a Poisson process of rate R per second (open
loop: a request starts on schedule whether or not the earlier ones finished).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any


class BenchError(Exception):
    """A bench that cannot run as asked; the message is one line meant for the user."""


COLD_RUNS_MAX = 5  # cold starts per engine: min(runs, this) — restarts can take minutes
SLO_KEYS = ("ttft_ms", "ttfo_ms", "tpot_ms", "itl_ms", "e2e_ms")


@dataclass
class BenchPlan:
    """Every parameter of a bench (all engines use the same ones)."""

    engines: list[str] = field(default_factory=list)
    runs: int = 10
    warmup: int = 1
    concurrency: list[int] = field(default_factory=lambda: [1])
    rate: float | None = None
    prompt_tokens: int = 128
    max_tokens: int = 128
    temperature: float = 0.7
    cold: bool = False
    preset: str | None = None
    n_ctx: int | None = None  # context size set on engines infertop starts (preset)
    slo: dict[str, float] = field(default_factory=dict)
    seed: int = 0
    # client processes for concurrency levels (tui/bench/workers.py); None: the default
    workers: int | None = None
    depths: list[int] = field(default_factory=list)  # prior-context tokens (tui.bench.run.depth)
    # the open-loop level's arrival process (tui/bench/run/arrivals.py): constant,
    # poisson or gamma (burstiness = the gamma shape), a ramp-up, and a duration limit
    # (then the level sends for that long instead of --runs requests; requests in flight
    # at the end get as long again to end, then are cut)
    arrival: str = "poisson"
    burstiness: float = 1.0
    ramp_s: float = 0.0
    duration_s: float | None = None
    # --find-capacity: the highest rate whose SLO attainment stays >= `attainment`
    # (tui/bench/run/capacity.py); each probe sends for probe_s seconds (at least
    # PROBE_MIN_REQUESTS requests); the whole search stops at capacity_budget_s
    find_capacity: bool = False
    attainment: float = 0.9
    probe_s: float = 20.0
    capacity_budget_s: float = 600.0
    capacity_by: str = "rate"  # or "concurrency": probes of c users for probe_s seconds
    # the workload (tui/bench/run/workload.py): length distributions ("fixed:N",
    # "uniform:A,B", "normal:MEAN,SD"), a dataset file of prompts, a system prompt of N
    # tokens shared by every request, and whether prefix caching is asked for
    input_len: str | None = None
    output_len: str | None = None
    dataset: str | None = None
    shared_prefix: int = 0
    prefix_cache: bool = False
    turns: int = 1  # > 1: concurrency levels hold conversations (tui/bench/run/sessions.py)

    @property
    def cold_runs(self) -> int:
        return min(self.runs, COLD_RUNS_MAX) if self.cold else 0

    def requests_per_engine(self) -> int:
        """Measured requests per engine (warm-up and cold starts included)."""
        n = self.warmup + self.cold_runs + sum(c * self.runs for c in self.concurrency)
        # depth 0 is the c=1 level when there is one (tui.bench.run.depth)
        depth_levels = len(self.depths) - (0 in self.depths and 1 in self.concurrency)
        rate_n = 0
        if self.rate:
            rate_n = round(self.rate * self.duration_s) if self.duration_s else self.runs
        return n + rate_n + depth_levels * self.runs

    def arrival_spec(self, rate: float, duration_s: float | None = None, seed: int = 0) -> Any:
        """The ArrivalSpec of an open-loop level at ``rate`` (a duration limit, when
        given or planned, replaces the --runs count)."""
        from tui.bench.run.arrivals import ArrivalSpec

        duration = duration_s if duration_s is not None else self.duration_s
        return ArrivalSpec(
            process=self.arrival,
            rate=rate,
            burstiness=self.burstiness,
            ramp_s=self.ramp_s,
            duration_s=duration,
            count=None if duration is not None else self.runs,
            seed=self.seed + seed,
        )

    def validate(self) -> None:
        """Raise BenchError on parameters no bench should run with."""
        if self.runs < 1:
            raise BenchError(f"--runs must be at least 1 (got {self.runs})")
        if self.warmup < 0:
            raise BenchError(f"--warmup must be 0 or more (got {self.warmup})")
        if any(c < 1 for c in self.concurrency):
            raise BenchError(f"concurrency levels must be at least 1 (got {self.concurrency})")
        if not self.concurrency and not (self.rate or self.find_capacity):
            raise BenchError(
                "--concurrency none needs an open-loop level (--rate or --find-capacity)"
            )
        if self.rate is not None and not (self.rate > 0 and math.isfinite(self.rate)):
            raise BenchError(f"--rate must be a positive number of requests/s (got {self.rate})")
        if self.prompt_tokens < 1:
            raise BenchError(f"--prompt-tokens must be at least 1 (got {self.prompt_tokens})")
        if self.max_tokens < 1:
            raise BenchError(f"--max-tokens must be at least 1 (got {self.max_tokens})")
        if not (self.temperature >= 0 and math.isfinite(self.temperature)):
            raise BenchError(f"--temperature must be >= 0 (got {self.temperature})")
        if self.n_ctx is not None and self.prompt_tokens + self.max_tokens > self.n_ctx:
            raise BenchError(
                f"prompt tokens + max tokens ({self.prompt_tokens} + {self.max_tokens}) "
                f"exceed the context size {self.n_ctx}"
            )
        if self.workers is not None and self.workers < 1:
            raise BenchError(f"--workers must be at least 1 (got {self.workers})")
        if any(d < 0 for d in self.depths):
            raise BenchError(f"--depth levels must be 0 or more (got {self.depths})")
        if self.n_ctx is not None and self.depths:
            check_fits(self.depths, self.prompt_tokens, self.max_tokens, self.n_ctx, "the preset")
        self._validate_open_loop()
        self._validate_workload()
        if not self.engines:
            raise BenchError("no engine to bench")

    def has_workload(self) -> bool:
        """True when requests differ from the default prompts (distinct, fixed lengths)."""
        return (
            bool(self.input_len or self.output_len or self.dataset or self.shared_prefix)
            or self.prefix_cache
            or self.turns > 1
        )

    def _validate_workload(self) -> None:
        from tui.bench.run.workload import WorkloadError, check_workload

        try:
            check_workload(self)
        except WorkloadError as e:
            raise BenchError(str(e)) from None
        if self.turns < 1:
            raise BenchError(f"--turns must be at least 1 (got {self.turns})")
        if self.turns > 1 and (self.rate or self.find_capacity or self.depths):
            raise BenchError(
                "--turns applies to concurrency levels only (not --rate, --find-capacity "
                "or --depth)"
            )
        if self.has_workload() and self.workers is not None and self.workers > 1:
            raise BenchError("--workers > 1 sends only the default prompts: not with a workload")

    def _validate_open_loop(self) -> None:
        from tui.bench.run.arrivals import ArrivalError

        if self.rate is not None or self.find_capacity:
            try:
                self.arrival_spec(self.rate or 1.0, self.duration_s or self.probe_s).validate()
            except ArrivalError as e:
                raise BenchError(str(e)) from None
        if self.find_capacity:
            if not self.slo:
                raise BenchError("--find-capacity needs --slo (the objectives to attain)")
            if self.capacity_by not in ("rate", "concurrency"):
                raise BenchError(f"--capacity-by: rate or concurrency (got {self.capacity_by!r})")
            if not 0 < self.attainment < 1:
                raise BenchError(f"--attainment must be between 0 and 1 (got {self.attainment})")
            if not (self.probe_s > 0 and math.isfinite(self.probe_s)):
                raise BenchError(f"--probe-s must be a positive number (got {self.probe_s})")
            if not (self.capacity_budget_s > 0 and math.isfinite(self.capacity_budget_s)):
                raise BenchError(
                    f"--capacity-budget must be a positive number (got {self.capacity_budget_s})"
                )

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["cold_runs"] = self.cold_runs
        return d


# A preset fills parameters the command line did not set explicitly.
PRESETS: dict[str, dict[str, Any]] = {
    # The common blog protocol: batch 1, context 2048, temperature 0.7, 500 tokens,
    # 50 runs, report the median.
    "seed-post": {
        "concurrency": [1],
        "n_ctx": 2048,
        "temperature": 0.7,
        "max_tokens": 500,
        "runs": 50,
    },
}

PRESET_HELP = {"seed-post": "batch 1, context 2048, temperature 0.7, max tokens 500, 50 runs"}


def preset_values(name: str) -> dict[str, Any]:
    try:
        return dict(PRESETS[name])
    except KeyError:
        known = ", ".join(sorted(PRESETS))
        raise BenchError(f"unknown preset {name!r} (known presets: {known})") from None


def parse_concurrency(text: str) -> list[int]:
    """ "1,8,16" -> [1, 8, 16]; sorted, duplicates removed; "none" -> [] (open-loop levels
    only); BenchError when it does not parse."""
    if text.strip() == "none":
        return []
    parts = [p.strip() for p in text.split(",")]
    levels: list[int] = []
    for p in parts:
        if not (p.isascii() and p.isdigit()):
            raise BenchError(
                f"--concurrency {text!r} does not parse: expected positive integers "
                "separated by commas, e.g. 1,8,16"
            )
        levels.append(int(p))
    if any(c < 1 for c in levels):
        raise BenchError(f"--concurrency {text!r}: every level must be at least 1")
    return sorted(set(levels))


def parse_slo(text: str) -> dict[str, float]:
    """ "ttft_ms=500,tpot_ms=50" -> {"ttft_ms": 500.0, "tpot_ms": 50.0}."""
    out: dict[str, float] = {}
    for part in (p.strip() for p in text.split(",")):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or key not in SLO_KEYS:
            raise BenchError(
                f"--slo {text!r} does not parse: expected KEY=MS pairs with KEY one of "
                + ", ".join(SLO_KEYS)
            )
        try:
            ms = float(value)
        except ValueError:
            raise BenchError(f"--slo {key}: {value!r} is not a number") from None
        if not (ms > 0 and math.isfinite(ms)):
            raise BenchError(f"--slo {key}: must be a positive number of ms")
        out[key] = ms
    return out


def check_fits(
    depths: list[int], prompt_tokens: int, max_tokens: int, n_ctx: int, who: str
) -> None:
    """BenchError naming n_ctx when the deepest depth + prompt + output exceeds it."""
    if not depths:
        return
    deepest = max(depths)
    need = deepest + prompt_tokens + max_tokens
    if need > n_ctx:
        room = n_ctx - prompt_tokens - max_tokens
        most = f"the deepest that fits is {room}" if room >= 0 else "no depth fits"
        raise BenchError(
            f"--depth {deepest} does not fit {who}'s context (n_ctx {n_ctx}): depth + "
            f"prompt tokens + max tokens = {deepest} + {prompt_tokens} + {max_tokens} = "
            f"{need} > {n_ctx}; {most}"
        )
