"""Prometheus text exposition: parse a scrape, then compare two scrapes.

Parsing uses prometheus_client's own parser. Engine gauges can be instantaneous or even
reset on scrape (llama-server's), so rates and windowed percentiles are computed from
*differences* between two scrapes of monotonic counters and histogram buckets:

- counter rate = (c2 − c1) / (t2 − t1); a negative difference (the server restarted)
  gives no rate.
- windowed histogram: per bucket, count2(le) − count1(le), summed over every label set
  other than ``le``; ``count`` and ``sum`` the same way. Its quantile q is found like
  PromQL's histogram_quantile: the first bucket whose cumulative count reaches q·count,
  linearly interpolated between that bucket's lower and upper bound (a quantile in the
  +Inf bucket returns the largest finite bound).
"""

from __future__ import annotations

import io
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TextIO, cast

from prometheus_client.parser import text_fd_to_metric_families

from tui.transport.access import HttpAccess

Labels = tuple[tuple[str, str], ...]


class ScrapeError(Exception):
    """A scrape failed or returned something unparseable (one-line message)."""


@dataclass
class Scrape:
    """Every sample of one scrape: sample name -> {labels: value}; ``t`` monotonic s."""

    samples: dict[str, dict[Labels, float]] = field(default_factory=dict)
    t: float = 0.0

    def has(self, name: str) -> bool:
        return name in self.samples

    def total(self, name: str, **match: str) -> float | None:
        """Sum of ``name`` over label sets that contain ``match``; None if absent."""
        series = self.samples.get(name)
        if series is None:
            return None
        vals = [v for lab, v in series.items() if _matches(lab, match)]
        return sum(vals) if vals else None

    def buckets(self, name: str, **match: str) -> dict[float, float]:
        """Cumulative bucket counts of histogram ``name`` (le -> count), label sets summed."""
        out: dict[float, float] = {}
        for lab, v in self.samples.get(name + "_bucket", {}).items():
            if not _matches(lab, match):
                continue
            try:
                le = float(dict(lab).get("le", "inf"))
            except ValueError:  # le="abc": not a bucket bound
                continue
            if le == le:  # NaN is no bound either
                out[le] = out.get(le, 0.0) + v
        return out


def _matches(labels: Labels, match: dict[str, str]) -> bool:
    d = dict(labels)
    return all(d.get(k) == v for k, v in match.items())


def parse(text: str, t: float | None = None) -> Scrape:
    """Parse Prometheus text format; ScrapeError naming the bad line (or sample) if it is
    not that format."""
    s = Scrape(t=time.monotonic() if t is None else t)
    lines = _CountedLines(text)
    try:
        for family in text_fd_to_metric_families(cast(TextIO, lines)):
            for sample in family.samples:
                labels = tuple(sorted(sample.labels.items()))
                try:
                    value = float(sample.value)
                except OverflowError:  # an integer past float's range
                    where = sample.name + (str(dict(labels)) if labels else "")
                    raise ScrapeError(
                        f"not Prometheus text: sample {where}: "
                        f"value {str(sample.value)[:40]}... is too large"
                    ) from None
                s.samples.setdefault(sample.name, {})[labels] = value
    except (ValueError, TypeError, IndexError, OverflowError) as e:
        reason = " ".join(str(e).split())[:120]
        raise ScrapeError(
            f"not Prometheus text: line {lines.number}: {lines.line[:80]!r}"
            + (f" ({reason})" if reason else "")
        ) from None
    return s


class _CountedLines:
    """The lines of a scrape, counted as the parser reads them (for its error message)."""

    def __init__(self, text: str) -> None:
        self._text = text
        self.number = 0
        self.line = ""

    def __iter__(self) -> Iterator[str]:
        for line in io.StringIO(self._text):
            self.number += 1
            self.line = line.rstrip("\n")
            yield line


def counter_rate(a: Scrape, b: Scrape, name: str, **match: str) -> float | None:
    """Per-second rate of counter ``name`` between scrapes a (earlier) and b."""
    va, vb = a.total(name, **match), b.total(name, **match)
    dt = b.t - a.t
    if va is None or vb is None or dt <= 0 or vb < va:
        return None
    return (vb - va) / dt


def counter_delta(a: Scrape, b: Scrape, name: str, **match: str) -> float | None:
    va, vb = a.total(name, **match), b.total(name, **match)
    if va is None or vb is None or vb < va:
        return None
    return vb - va


@dataclass
class HistogramWindow:
    """Observations of one histogram between two scrapes."""

    buckets: list[tuple[float, float]]  # (upper bound, cumulative count), sorted
    count: float
    sum: float

    @property
    def mean(self) -> float | None:
        return self.sum / self.count if self.count > 0 else None

    def quantile(self, q: float) -> float | None:
        """The q-quantile (0..1) by bucket interpolation; None with no observations."""
        if self.count <= 0 or not self.buckets:
            return None
        rank = q * self.count
        lower, prev = 0.0, 0.0
        for upper, cum in self.buckets:
            if cum >= rank and cum > prev:
                if math.isinf(upper):
                    return lower
                return lower + (upper - lower) * (rank - prev) / (cum - prev)
            lower, prev = (upper if not math.isinf(upper) else lower), cum
        return lower

    def percentiles(self, qs: tuple[float, ...] = (50, 90, 99)) -> dict[str, float | None]:
        return {f"p{q:g}": self.quantile(q / 100) for q in qs}


def histogram_window(a: Scrape | None, b: Scrape, name: str, **match: str) -> HistogramWindow:
    """Observations of histogram ``name`` after scrape ``a`` up to ``b`` (a=None: all)."""
    cur = b.buckets(name, **match)
    prev = a.buckets(name, **match) if a is not None else {}
    deltas = sorted((le, cur[le] - prev.get(le, 0.0)) for le in cur)
    count_b = b.total(name + "_count", **match) or 0.0
    sum_b = b.total(name + "_sum", **match) or 0.0
    count_a = (a.total(name + "_count", **match) or 0.0) if a is not None else 0.0
    sum_a = (a.total(name + "_sum", **match) or 0.0) if a is not None else 0.0
    if any(d < 0 for _, d in deltas) or count_b < count_a:  # the server restarted
        deltas = sorted(cur.items())
        count_a = sum_a = 0.0
    return HistogramWindow(deltas, count_b - count_a, sum_b - sum_a)


def get_text(url: str, timeout_s: float = 2.0, access: HttpAccess | None = None) -> str:
    """GET ``url`` (blocking; call from a sampler thread) with the server's access
    (headers, API key, TLS verification): the whole answer within ``timeout_s`` seconds
    and SCRAPE_LIMIT bytes (a dripping or endless endpoint ends then); ScrapeError on
    any failure."""
    import httpx

    from tui.transport.whole import SCRAPE_LIMIT, deadline_client, get_whole

    access = access or HttpAccess()
    try:
        with deadline_client(headers=access.headers, verify=access.verify_tls) as client:
            r = get_whole(client, url, limit=SCRAPE_LIMIT, deadline_s=timeout_s)
    except httpx.HTTPError as e:
        raise ScrapeError(f"{url}: {type(e).__name__}: {e}") from None
    if r.status_code != 200:
        raise ScrapeError(f"{url}: HTTP {r.status_code} {' '.join(r.text.split())[:120]}")
    return r.text


def fetch(url: str, timeout_s: float = 2.0, access: HttpAccess | None = None) -> Scrape:
    """Scrape a /metrics URL now."""
    return parse(get_text(url, timeout_s, access))
