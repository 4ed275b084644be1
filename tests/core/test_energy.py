"""Energy per token (tui/core/energy.py): counters interpolated to the window, wraparound,
resets, power integrated by trapezoids, and what is said when a side has no reading."""

from __future__ import annotations

import pytest

from tui.core.energy import (
    COUNTER,
    INTEGRATED,
    EnergyPoint,
    EnergyReading,
    counter_energy,
    domain_energy,
    integrated_energy,
    window_energy,
)


def test_counter_is_interpolated_to_the_window() -> None:
    # 100 W exactly: the counter gains 50 J every 0.5 s
    pts = [EnergyPoint(t, joules=1000.0 + 100.0 * t) for t in (0.0, 0.5, 1.0, 1.5, 2.0)]
    j, used, why = counter_energy(pts, 0.3, 1.7)
    assert why is None and j == pytest.approx(140.0)
    assert [p.t for p in used] == [0.0, 0.5, 1.0, 1.5, 2.0]


def test_counter_wraps_by_its_range() -> None:
    # RAPL-like: range 1000 J, 10 J per step, wrapping between t=2 and t=3
    pts = [
        EnergyPoint(0.0, 970.0),
        EnergyPoint(1.0, 980.0),
        EnergyPoint(2.0, 990.0),
        EnergyPoint(3.0, 0.0),
        EnergyPoint(4.0, 10.0),
    ]
    j, _, why = counter_energy(pts, 0.0, 4.0, wrap_j=1000.0)
    assert why is None and j == pytest.approx(40.0)


def test_counter_going_backwards_without_a_range_is_a_reset_not_energy() -> None:
    pts = [EnergyPoint(0.0, 500.0), EnergyPoint(1.0, 10.0), EnergyPoint(2.0, 20.0)]
    j, _, why = counter_energy(pts, 0.0, 2.0)
    assert j is None and "reset" in (why or "")


def test_power_is_integrated_with_trapezoids_clipped_to_the_window() -> None:
    # P rises linearly 0 → 200 W over 2 s: ∫ over [0.5, 1.5] = mean(50, 150) × 1 = 100 J
    pts = [EnergyPoint(t, watts=100.0 * t) for t in (0.0, 1.0, 2.0)]
    j, used, why = integrated_energy(pts, 0.5, 1.5)
    assert why is None and j == pytest.approx(100.0) and len(used) == 3


@pytest.mark.parametrize(
    "t0, t1, says",
    [(-1.0, 1.0, "before the window's start"), (0.5, 9.0, "after the window's end")],
)
def test_a_window_without_readings_on_both_sides_is_unknown(t0, t1, says) -> None:
    pts = [EnergyPoint(0.0, 1.0, 10.0), EnergyPoint(2.0, 21.0, 10.0)]
    d = domain_energy("GPU0", pts, t0, t1, "NVML total-energy counter", "NVML power")
    assert d.joules is None and says in (d.reason or "")


def test_counter_wins_over_power_and_power_is_the_fallback() -> None:
    both = [EnergyPoint(t, joules=50.0 * t, watts=999.0) for t in (0.0, 1.0, 2.0)]
    d = domain_energy("GPU0", both, 0.0, 2.0, "NVML total-energy counter", "NVML power")
    assert (d.method, d.joules, d.source) == (COUNTER, 100.0, "NVML total-energy counter")
    power_only = [EnergyPoint(t, watts=30.0) for t in (0.0, 0.5, 1.0, 1.5, 2.0)]
    d = domain_energy("GPU0", power_only, 0.0, 2.0, None, "amdgpu hwmon power1_average")
    assert d.method == INTEGRATED and d.joules == pytest.approx(60.0)
    assert d.sample_hz == pytest.approx(2.0)
    assert "integrated from amdgpu hwmon power1_average at 2.0 Hz (est.)" == d.label()


def test_per_token_sums_the_measured_domains_and_names_them() -> None:
    gpu = EnergyReading("GPU0 NVIDIA H200", counter_source="NVML total-energy counter")
    cpu = EnergyReading("CPU package 0", counter_source="RAPL energy_uj (powercap)")
    absent = EnergyReading("GPU1 AMD GPU", power_source="amdgpu hwmon power1_average")
    series = [
        (gpu, [EnergyPoint(0.0, joules=0.0), EnergyPoint(1.0, joules=300.0)]),
        (cpu, [EnergyPoint(0.0, joules=10.0), EnergyPoint(1.0, joules=30.0)]),
        (absent, []),
    ]
    use = window_energy(series, 0.0, 1.0, output_tokens=80)
    assert use.joules == pytest.approx(320.0)
    assert use.j_per_token == pytest.approx(4.0) and use.tokens_per_j == pytest.approx(0.25)
    assert not use.estimated
    text = use.describe()
    assert "4 J/token" in text and "NVML total-energy counter" in text
    assert "GPU1 AMD GPU: unknown" in text
    assert use.short() == "4 J/tok (GPU0+CPU counter)"
    d = use.to_dict()
    assert d["j_per_token"] == pytest.approx(4.0) and len(d["domains"]) == 3


def test_no_tokens_no_per_token_figure() -> None:
    r = EnergyReading("GPU0 x", counter_source="c")
    use = window_energy([(r, [EnergyPoint(0.0, 0.0), EnergyPoint(1.0, 5.0)])], 0.0, 1.0, 0)
    assert use.joules == 5.0 and use.j_per_token is None and use.short() == ""
