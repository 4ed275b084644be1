"""What every fuzz test shares: hypothesis settings, the case count, split points.

A *case* is one input run through the parser: one document, or one stream fed in one
particular set of pieces. Hypothesis draws a seed per example and the test builds
several cases from ``random.Random(seed)``: hypothesis' own per-draw machinery (its
``st.randoms()`` included) costs milliseconds per example, which 10,000 cases on two cores
cannot afford. The seed is in every failure report, and the assertions print the input.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

MIN_CASES = 10_000

FUZZ = settings(
    deadline=None,
    database=None,  # no .hypothesis/ folder in the repository; failures print a repro
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

SEEDS = st.integers(min_value=0, max_value=2**64 - 1)


@dataclass
class CaseCount:
    """Cases run by one test (asserted against MIN_CASES when the test ends)."""

    n: int = 0

    def add(self, k: int = 1) -> None:
        self.n += k


def pieces(data: bytes, rng: random.Random, most: int = 8) -> list[bytes]:
    """``data`` cut at random points, half of them where parsers keep state: right after
    a CR (before its LF) or inside a multi-byte UTF-8 character; empty pieces are fed
    too; now and then one byte at a time."""
    if data and rng.random() < 0.05:
        return [data[i : i + 1] for i in range(len(data))]
    tricky = [i + 1 for i, b in enumerate(data) if b == 0x0D or b >= 0x80]
    cuts = sorted(
        rng.choice(tricky) if tricky and rng.random() < 0.5 else rng.randint(0, len(data))
        for _ in range(rng.randint(1, most))
    )
    if rng.random() < 0.3:  # a read that brought nothing, at a cut
        cuts.insert(rng.randrange(len(cuts)), cuts[rng.randrange(len(cuts))])
        cuts.sort()
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
