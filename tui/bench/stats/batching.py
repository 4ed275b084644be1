"""The batching model: T_total(N) = N·T_single / (1 + α·N), fitted to a concurrency sweep.

Exact definitions (per engine, over the "concurrency" levels of a bench):

- a request's *client latency* L = bench call → its stream ended (e2e + pre_send_wait:
  a queue inside the engine before it stamps the request sent is included, so a serial
  engine is not mistaken for a batching one).
- T_total(N) = mean L over the ok requests of the level holding N requests in flight.
  With N calls always outstanding, Little's law makes this the wall time the engine takes
  per N completed requests (the first N start together, so a short level reads a little
  low on an engine that serves them one at a time).
- T_single = T_total(1), measured at the c=1 level: the anchor, not fitted. (The
  model itself gives T_single/(1 + α) at N=1, so N=1 is not a point of the fit.)
- α: least squares over the levels N ≥ 2, Σ_N (T_total(N) − N·T_single/(1 + α·N))²,
  minimised over α > −1/N_max by a grid then golden-section search. With one level
  besides c=1 the fit is exact (residual 0); residuals say something from two on.
  α = 0: no gain from concurrency (N requests take N times as long); perfect batching
  (N requests take as long as one) gives α = (N − 1)/N at each N, i.e. approaches 1.
- speedup(N) = N·T_single / T_total(N) (the model says 1 + α·N); η beside it is the
  token-throughput ratio of tui.bench.stats.aggregate (equal to the speedup when every answer
  has the same length and the level is long).
- residual(N) = T_total(N) − fitted(N), in ms and as % of the measurement.
- the 95 % interval of α: percentile bootstrap; each resample redraws every level's
  requests with replacement (T_single too) and refits.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tui.core.stats import percentile

if TYPE_CHECKING:
    from tui.bench.run.records import LevelRun, RequestRecord

ALPHA_MAX = 50.0  # far beyond any real engine (perfect batching stays below 1)
GRID = 64
GOLDEN_STEPS = 60
INV_PHI = (math.sqrt(5) - 1) / 2


def model_t_total(n: int, t_single: float, alpha: float) -> float:
    """N·T_single / (1 + α·N)."""
    return n * t_single / (1 + alpha * n)


def sse(alpha: float, levels: Sequence[int], t_total: Sequence[float], t_single: float) -> float:
    return sum(
        (t - model_t_total(n, t_single, alpha)) ** 2 for n, t in zip(levels, t_total, strict=True)
    )


def fit_alpha(levels: Sequence[int], t_total: Sequence[float], t_single: float) -> float:
    """The least-squares α for measured T_total at concurrency ``levels`` (N ≥ 2; see
    the module doc). ValueError when it cannot be fitted.
    """
    if not levels or len(levels) != len(t_total) or min(levels) < 2:
        raise ValueError("the batching fit needs T_total at one or more levels N >= 2")
    if not (t_single > 0 and math.isfinite(t_single)):
        raise ValueError(f"T_single must be a positive time (got {t_single})")
    lo = -1 / max(levels) + 1e-9
    hi = ALPHA_MAX
    # α enters through 1/(1 + αN): a grid even in log(1 + α·N_max) covers both the
    # negative side (slower than serial) and large α densely enough to bracket the minimum
    n_max = max(levels)
    u_lo, u_hi = math.log(1 + lo * n_max), math.log(1 + hi * n_max)
    grid = [(math.exp(u_lo + (u_hi - u_lo) * k / GRID) - 1) / n_max for k in range(GRID + 1)]
    grid[0] = lo
    errs = [sse(a, levels, t_total, t_single) for a in grid]
    k = min(range(len(grid)), key=errs.__getitem__)
    a, b = grid[max(k - 1, 0)], grid[min(k + 1, GRID)]
    c, d = b - INV_PHI * (b - a), a + INV_PHI * (b - a)
    fc, fd = sse(c, levels, t_total, t_single), sse(d, levels, t_total, t_single)
    for _ in range(GOLDEN_STEPS):
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - INV_PHI * (b - a)
            fc = sse(c, levels, t_total, t_single)
        else:
            a, c, fc = c, d, fd
            d = a + INV_PHI * (b - a)
            fd = sse(d, levels, t_total, t_single)
    best = (a + b) / 2
    return best if sse(best, levels, t_total, t_single) <= errs[k] else grid[k]


def fit_with_interval(
    samples: dict[int, list[float]], n_boot: int = 2000, level: float = 0.95, seed: int = 0
) -> dict[str, Any]:
    """Fit α to per-request client latencies (ms) by concurrency level, with a bootstrap.

    ``samples[N]`` holds the client latencies of level N; N=1 must be present. Returns the
    fit (α, its interval, T_single, per-level measured/fitted/residual/speedup).
    """
    if 1 not in samples or not samples[1]:
        raise ValueError("the batching fit needs a c=1 level (T_single)")
    levels = sorted(n for n, xs in samples.items() if xs)
    if len(levels) < 2:
        raise ValueError("the batching fit needs a level with N >= 2 besides c=1")
    means = [sum(samples[n]) / len(samples[n]) for n in levels]
    t_single = means[0]
    fitted_levels, fitted_means = levels[1:], means[1:]
    alpha = fit_alpha(fitted_levels, fitted_means, t_single)
    rng = random.Random(seed)
    boots: list[float] = []
    for _ in range(n_boot):
        m = [
            sum(xs) / len(xs) for xs in (rng.choices(samples[n], k=len(samples[n])) for n in levels)
        ]
        boots.append(fit_alpha(fitted_levels, m[1:], m[0]))
    tail = (1 - level) / 2 * 100
    rows: list[dict[str, Any]] = []
    for n, t in zip(levels, means, strict=True):
        fitted = model_t_total(n, t_single, alpha) if n > 1 else None
        rows.append(
            {
                "concurrency": n,
                "requests": len(samples[n]),
                "t_total_ms": t,
                "fitted_ms": fitted,
                "residual_ms": None if fitted is None else t - fitted,
                "residual_pct": None if fitted is None or not t else (t - fitted) / t * 100,
                "speedup": n * t_single / t if t else None,
                "speedup_fitted": 1 + alpha * n if n > 1 else None,
            }
        )
    fitted_rows = [r for r in rows if r["residual_ms"] is not None]
    rmse = math.sqrt(sum(r["residual_ms"] ** 2 for r in fitted_rows) / len(fitted_rows))
    return {
        "alpha": {
            "estimate": alpha,
            "low": percentile(boots, tail) if boots else None,
            "high": percentile(boots, 100 - tail) if boots else None,
            "n_boot": n_boot,
        },
        "t_single_ms": t_single,
        "rmse_ms": rmse,
        "levels": rows,
    }


def client_latency_ms(record: RequestRecord) -> float | None:
    """Bench call → end of stream, ms (e2e + the wait before the engine stamped it sent)."""
    e2e = record.metrics.e2e_ms
    if e2e is None:
        return None
    return e2e + (record.pre_send_wait_ms or 0.0)


def fit_batching(
    levels: list[LevelRun], etas: dict[int, float | None], n_boot: int
) -> dict[str, Any]:
    """The batching section of an engine's summary: the fit, or why there is none.

    ``levels``: the engine's load levels (only complete "concurrency" ones are used);
    ``etas``: η per concurrency level, shown beside the speedup.
    """
    samples: dict[int, list[float]] = {}
    for lv in levels:
        if lv.kind != "concurrency" or lv.concurrency is None or not lv.complete:
            continue
        xs = [x for r in lv.records if r.ok and (x := client_latency_ms(r)) is not None]
        if xs:
            samples[lv.concurrency] = xs
    try:
        fit = fit_with_interval(samples, n_boot=n_boot)
    except ValueError as e:
        return {"alpha": None, "reason": str(e)}
    for row in fit["levels"]:
        row["eta"] = etas.get(row["concurrency"])
    fit["reason"] = None
    fit["model"] = "T_total(N) = N·T_single / (1 + α·N)"
    return fit
