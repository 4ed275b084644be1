"""A/B scheduling: which engines share a machine, and what the schedule says."""

from __future__ import annotations

import socket

import pytest

from tui.engines.base import EngineSpec
from tui.engines.placement import (
    CONCURRENT,
    SEQUENTIAL,
    THIS_MACHINE,
    ab_plan,
    engine_host,
    shared_hardware,
    turn_order,
)


def spec(name: str, url: str | None = None, kind: str = "openai", **kw) -> EngineSpec:  # type: ignore[no-untyped-def]
    return EngineSpec(name=name, kind=kind if url else "llamacpp", url=url, **kw)


@pytest.mark.parametrize(
    "url",
    [
        None,
        "http://127.0.0.1:8080/v1",
        "http://127.1.2.3:8000",
        "http://localhost:11434",
        "http://LOCALHOST:1",
        "http://[::1]:8000/v1",
        "http://api.localhost:9",
        f"http://{socket.gethostname()}:8080",
    ],
)
def test_this_machine(url):
    assert engine_host(spec("e", url)) == THIS_MACHINE


def test_other_hosts_are_named():
    assert engine_host(spec("e", "https://GPU-Box.example:8000/v1")) == "gpu-box.example"
    assert engine_host(spec("e", "http://10.0.0.7:8000")) == "10.0.0.7"


@pytest.mark.parametrize(
    ("a", "b", "why"),
    [
        (spec("a"), spec("b"), "shared machine"),  # two in-process engines
        (spec("a"), spec("b", "http://127.0.0.1:8080"), "shared machine"),  # + local server
        (spec("a", "http://box:1"), spec("b", "http://box:2"), "both on box"),
        (
            spec("a", "http://10.0.0.1:1", telemetry="ssh://gpu"),
            spec("b", "http://10.0.0.2:1", telemetry="ssh://gpu"),
            "same hardware source",
        ),
        (spec("a"), spec("b", "http://gpu-box:8000"), None),
        (spec("a", "http://box-1:8000"), spec("b", "http://box-2:8000"), None),
    ],
)
def test_shared_hardware(a, b, why):
    assert shared_hardware(a, b) == why


def test_auto_schedule_follows_the_hardware():
    local, other = spec("a"), spec("b", "http://gpu-box:8000")
    plan = ab_plan(local, spec("b"))
    assert plan.schedule == SEQUENTIAL and plan.label == "sequential (shared machine)"
    plan = ab_plan(local, other)
    assert plan.schedule == CONCURRENT and plan.label == "concurrent (different machines)"


def test_a_forced_schedule_is_kept_and_says_what_it_costs():
    a, b = spec("a"), spec("b")
    plan = ab_plan(a, b, CONCURRENT)
    assert plan.schedule == CONCURRENT
    assert plan.label == "concurrent (shared machine: engines compete)"
    assert ab_plan(a, spec("c", "http://gpu-box:1"), SEQUENTIAL).schedule == SEQUENTIAL


def test_turn_order_alternates():
    assert [turn_order(t) for t in (1, 2, 3, 4)] == [
        ["A", "B"],
        ["B", "A"],
        ["A", "B"],
        ["B", "A"],
    ]


def test_the_tui_gives_llamacpp_every_core_on_small_machines_and_leaves_one_on_big():
    from tui.engines.placement import ui_engine_spec

    local = EngineSpec(name="l", kind="llamacpp")
    assert [ui_engine_spec(local, n).n_threads for n in (1, 2, 4, 8, 16)] == [1, 2, 4, 7, 15]
    pinned = EngineSpec(name="l", kind="llamacpp", n_threads=3)
    assert ui_engine_spec(pinned, 16).n_threads == 3  # configured: kept
    server = EngineSpec(name="s", kind="openai", url="http://127.0.0.1:1")
    assert ui_engine_spec(server, 2) is server


def test_an_engine_shares_the_uis_cores_when_it_runs_here_on_few_of_them():
    from tui.engines.placement import shares_cores_with_ui

    here = [spec("l"), spec("s", "http://127.0.0.1:8080/v1"), spec("o", "http://localhost:11434")]
    there = spec("r", "https://gpu-box.example:8000/v1")
    for n in (1, 2, 4):
        assert all(shares_cores_with_ui(e, n) for e in here), n
        assert not shares_cores_with_ui(there, n)
    for n in (5, 16):  # the engine leaves the UI a core of its own
        assert not any(shares_cores_with_ui(e, n) for e in here), n
