"""What ``infertop compare`` resamples, read from a report.json: per engine and load level
(:class:`LevelSample`), the ok requests of the measured phases (cold and warm) as
:class:`RequestSample` values, and the level's measured total tok/s (Σ output tokens of ok
requests / the level's wall time, first request sent → last request ended). The ratios
(tui/bench/compare/ratios.py) and their bootstrap (tui/bench/compare/boot.py) both read
these; neither needs the other for them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tui.bench.report.shape import BenchReport
from tui.core.metrics import itl_weights_in

MEASURED_PHASES = ("cold", "warm")


@dataclass(frozen=True)
class RequestSample:
    """What one ok request contributes to the compared statistics."""

    decode_tps: float | None
    ttft_ms: float | None
    itl_token_ms: tuple[float, ...]  # sorted: pooled percentiles merge sorted runs fast
    output_tokens: int
    duration_s: float
    ttfo_ms: float | None = None
    itl_token_weights: tuple[int, ...] = ()  # the tokens each value stands for (in order)

    @property
    def itl_weights(self) -> tuple[int, ...]:
        """The tokens each ITL value stands for (one each where none were given)."""
        return self.itl_token_weights or (1,) * len(self.itl_token_ms)


@dataclass
class LevelSample:
    """The ok requests of one engine at one level, and the level's measured total tok/s."""

    engine: str
    label: str
    requests: list[RequestSample]
    total_tps: float | None
    has_ttfo: bool = False  # every ok record carries ttfo_ms (reports since TTFO)
    ttfo_differs: bool = False  # some request's TTFO is not its TTFT (it reasoned)

    def ttfo_compared_with(self, other: LevelSample) -> bool:
        """Both carry TTFO and one of them reasoned (tui/bench/compare/ratios.py)."""
        return self.has_ttfo and other.has_ttfo and (self.ttfo_differs or other.ttfo_differs)


def level_samples(report: BenchReport) -> dict[tuple[str, str], LevelSample]:
    """Per (engine, level label), from report.json's records (cold and warm phases)."""
    out: dict[tuple[str, str], LevelSample] = {}
    for eng in report.get("engines") or []:
        grouped: dict[str, list[dict[str, Any]]] = {}
        for rec in eng.get("records") or []:
            if rec.get("phase") in MEASURED_PHASES and rec.get("status") != "cancelled":
                grouped.setdefault(str(rec.get("level")), []).append(rec)
        for label, recs in grouped.items():
            ok = [r for r in recs if r.get("status") == "ok"]
            samples = [_request_sample(r) for r in ok]
            wall = max(r["t_end_s"] for r in recs) - min(r["t_start_s"] for r in recs)
            tokens = sum(s.output_tokens for s in samples)
            total = tokens / wall if (samples and wall > 0) else None
            level = LevelSample(eng["name"], label, samples, total)
            level.has_ttfo = bool(ok) and all("ttfo_ms" in (r.get("metrics") or {}) for r in ok)
            level.ttfo_differs = level.has_ttfo and any(s.ttfo_ms != s.ttft_ms for s in samples)
            out[(eng["name"], label)] = level
    return out


def _request_sample(rec: dict[str, Any]) -> RequestSample:
    m = rec.get("metrics") or {}
    pairs = sorted(
        (v, w) for v, w in zip(m.get("itl_token_ms") or [], itl_weights_in(m)) if v is not None
    )
    return RequestSample(
        decode_tps=m.get("decode_tps"),
        ttft_ms=m.get("ttft_ms"),
        itl_token_ms=tuple(v for v, _ in pairs),
        output_tokens=int(m.get("output_tokens") or 0),
        duration_s=float(rec["t_end_s"]) - float(rec["t_start_s"]),
        ttfo_ms=m.get("ttfo_ms"),
        itl_token_weights=tuple(w for _, w in pairs),
    )
