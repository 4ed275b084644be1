"""The linearity check (tests/support/cost.py) passes a linear loop and fails a quadratic
one early, on this machine's clock whatever its speed: it can fail, and fails fast."""

from __future__ import annotations

import pytest

from tests.support.cost import segment_costs, size_ratio


def test_a_linear_loop_passes() -> None:
    held: list[str] = []
    costs = segment_costs(60_000, lambda i: held.append(" " * 16))
    assert len(costs) == 6 and len(held) == 60_000


def test_a_quadratic_loop_fails_within_a_few_segments() -> None:
    """Each step re-joins all that came before (main's <think> splitter did so): the
    check stops it at the first segment past the bound, long before its end."""
    held: list[str] = []
    done: list[int] = []

    def rejoin(i: int) -> None:
        held.append(" " * 16)
        "".join(held).strip()
        done.append(i)

    with pytest.raises(AssertionError, match="not linear"):
        segment_costs(60_000, rejoin)
    assert len(done) < 40_000  # stopped within four of the six segments (here: in the third)


def test_size_ratio_tells_linear_from_quadratic() -> None:
    assert size_ratio(lambda n: sum(range(n)), 100_000) < 40
    assert size_ratio(lambda n: [x for x in range(n) for _ in range(n)], 300) > 40
