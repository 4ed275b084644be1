"""Speculative-decoding counts, the counter window (restarts), the engine-inside model's
JSON both ways (read as untrusted), and the panel's words."""

from __future__ import annotations

import math

from tui.core.counter_window import CounterWindow
from tui.core.inside import EngineInside, LoadedModelState, SlotState, inside_from_dict
from tui.core.inside_text import full_lines, short_line
from tui.core.spec import SpecCounts, count, from_timings, total


def test_spec_definitions() -> None:
    c = SpecCounts(drafted=59, accepted=59, drafts=20, per_position=(20, 20, 19))
    assert c.acceptance == 1.0
    assert c.mean_length == 1 + 59 / 20
    assert c.position_rates == (1.0, 1.0, 0.95)
    assert SpecCounts(0, 0).acceptance is None and SpecCounts(10, 3).mean_length is None


def test_spec_window_restarts_never_negative() -> None:
    before = SpecCounts(100, 80, 30, (30, 25, 20))
    after = SpecCounts(160, 120, 50, (50, 40, 30))
    assert after.since(before) == SpecCounts(60, 40, 20, (20, 15, 10))
    restarted = SpecCounts(6, 5, 2, (2, 2, 1))  # the engine restarted: counting from 0
    assert restarted.since(before) == restarted


def test_spec_from_timings_and_sums() -> None:
    assert from_timings({"draft_n": 44, "draft_n_accepted": 40}) == SpecCounts(44, 40)
    for bad in (
        {},
        {"draft_n": 0, "draft_n_accepted": 0},
        {"draft_n": -3, "draft_n_accepted": 1},
        {"draft_n": float("nan"), "draft_n_accepted": 1},
        {"draft_n": 5, "draft_n_accepted": 9},
        {"draft_n": True, "draft_n_accepted": 1},
        "timings",
    ):
        assert from_timings(bad) is None, bad
    assert total([SpecCounts(10, 5), SpecCounts(30, 25)]) == SpecCounts(40, 30)
    assert count(float("inf")) is None and count(-1) is None and count(3) == 3.0


def test_counter_window_rates_and_restart() -> None:
    w = CounterWindow(span_s=60)
    w.add(0.0, {"pre": 10.0, "all": 100.0, "hit": 40.0})
    w.add(30.0, {"pre": 13.0, "all": 300.0, "hit": 190.0})
    assert w.per_minute("pre") == 6.0 and w.ratio("hit", "all") == 0.75
    w.add(31.0, {"pre": 1.0, "all": 10.0, "hit": 0.0})  # went back: the engine restarted
    assert w.restarted and w.delta("pre") is None and w.per_minute("pre") is None
    w.add(41.0, {"pre": 2.0, "all": 20.0, "hit": 5.0})
    assert not w.restarted and w.per_minute("pre") == 6.0 and w.ratio("hit", "all") == 0.5
    for t in range(42, 500):  # bounded, and the oldest kept at most ~60 s old
        w.add(float(t), {"pre": 2.0})
    assert len(w.reads) <= 62 and w.seconds is not None and w.seconds <= 61


def inside() -> EngineInside:
    return EngineInside(
        kind="llama-server",
        t=5.0,
        running=1,
        waiting=1,
        slots_total=1,
        slots_busy=1,
        slots=(SlotState(0, 2048, True, 73, 24, 33, True),),
        ctx_high_water=1234,
        busy_per_decode=1.0,
        prefix_hit_rate=0.25,
        prefix_tokens=400,
        prefix_hit_rate_total=0.2,
        spec_window=SpecCounts(59, 59, 20, (20, 20, 19)),
        spec_total=SpecCounts(59, 59, 20, (20, 20, 19)),
        window_s=6,
    )


def test_inside_round_trip_and_words() -> None:
    ins = inside()
    assert inside_from_dict(ins.to_dict()) == ins
    assert short_line(ins) == "slots 1/1 · deferred 1 · ctx max 1,234 · draft 100 % ×4.0"
    lines = full_lines(ins)
    assert lines[0] == "llama-server · slots 1/1 busy · processing 1 · deferred 1"
    assert lines[1] == "slot 0  ctx 73/2,048 (4%) · decoded 33 · 24 from cache"
    assert any("per position 100 % 100 % 95 %" in x for x in lines)


def test_inside_from_hostile_dicts() -> None:
    assert inside_from_dict({"kind": "evil"}) is None and inside_from_dict([1]) is None
    d = inside().to_dict()
    d.update(
        running=float("nan"),
        waiting=-4,
        kv_usage=7.0,  # not a share
        slots=[[0, 1, True, 2, 3, 4, None]] * 100_000 + ["x"],
        models=[["m" * 10_000, 1, 1, None, None]] * 1000,
        notes=["n" * 10_000] * 100,
        spec_total={"drafted": "a"},
        waiting_by_reason=[["capacity", math.inf], ["x"], 5],
    )
    got = inside_from_dict(d)
    assert got is not None
    assert got.running is None and got.waiting is None and got.kv_usage is None
    assert len(got.slots) == 64 and len(got.models) == 16 and len(got.notes) == 8
    assert len(got.models[0].name) == 200 and got.spec_total is None
    assert got.waiting_by_reason == ()


def test_vllm_sglang_ollama_words() -> None:
    v = EngineInside(
        kind="vllm",
        t=1,
        running=4,
        waiting=2,
        waiting_by_reason=(("capacity", 2.0),),
        kv_usage=0.857,
        preemptions_per_min=3.0,
        preemptions_total=1,
        prefix_hit_rate=0.5,
        prefix_tokens=96,
        tokens_per_step=9.5,
        window_s=20,
    )
    assert short_line(v) == "run 4 wait 2 · KV 86% · preempt 3.0/min · hit 50 %"
    assert full_lines(v)[0] == "vLLM KV cache 85.7% · running 4 · waiting 2 (capacity 2)"
    assert "9.5 tok/step" in full_lines(v)[1]
    s = EngineInside(
        kind="sglang",
        t=1,
        running=2,
        waiting=3,
        kv_usage=0.4,
        prefix_hit_rate_total=0.45,
        spec_accept_length=2.31,
    )
    assert "queue 3" in full_lines(s)[0] and "acceptance length 2.31" in full_lines(s)[1]
    o = EngineInside(
        kind="ollama",
        t=1,
        models=(
            LoadedModelState("smollm2", 2 * 2**30, 2**30, 4096, "2099-01-01T00:00:00.123456789Z"),
        ),
    )
    assert short_line(o) == "smollm2 2.0 GiB 50% GPU"
    assert "ctx 4,096 · expires in" in full_lines(o, now=4070908800.0 - 252)[1]
