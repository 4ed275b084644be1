"""More flows: command palette, concurrent A/B, loading without freezing, NVML failing
inside the app. The synthetic engine is used where the flow needs exact
timing (a slow load, overlapping streams); the default flows use the real engine."""

from __future__ import annotations

import os

import pytest

from tests.app.app_support import LOCAL, SIZE, SYNTH, gen
from tui.app.widgets.conversation import Conversation, Turn
from tui.app.widgets.engine_bar import EngineBar
from tui.app.widgets.hardware_panel import HardwarePanel
from tui.app.widgets.prompt import PromptInput
from tui.telemetry.devices import apple
from tui.telemetry.devices.nvml import NvmlProbe

pytestmark = pytest.mark.engine


def bar(app) -> str:  # type: ignore[no-untyped-def]
    return app.chat.query_one(EngineBar).plain()


async def test_command_palette_picks_engine(make_config, build_app, wait_for):
    app = build_app(make_config(gen(5) + LOCAL + SYNTH))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: "A ● local" in bar(app) and "ready" in bar(app))
        await pilot.press("ctrl+p")
        await pilot.pause(0.2)
        await pilot.press(*"Engine A: synth")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await wait_for(pilot, lambda: "A ● synth" in bar(app) and "ready" in bar(app))


async def test_ab_concurrent_runs_both_at_once(make_config, build_app, wait_for, tmp_path):
    """Needs exact timing: two synthetic engines at 50 tok/s, 25 tokens (0.5 s each)."""
    import json

    cfg = make_config(
        'default_engine = "s1"\n[ui]\nab_concurrent = true\n'
        + gen(25)
        + '[engines.s1]\nkind = "synthetic"\noptions = { tokens_per_s = 50 }\n'
        + '[engines.s2]\nkind = "synthetic"\noptions = { tokens_per_s = 50 }\n'
    )
    app = build_app(cfg)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+o")
        await wait_for(pilot, lambda: bar(app).count("ready") == 2)
        await app.chat.submit_text("go")
        await wait_for(pilot, lambda: not app.chat.busy)
    recs = [json.loads(x) for x in (tmp_path / "session.jsonl").read_text().splitlines()]
    assert {r["engine"] for r in recs} == {"s1", "s2"}
    # concurrent: the two requests' wall-clock intervals overlap
    from datetime import datetime

    ends = [datetime.fromisoformat(r["time"]).timestamp() for r in recs]
    starts = [e - r["metrics"]["e2e_ms"] / 1000 for e, r in zip(ends, recs, strict=True)]
    assert max(starts) < min(ends), (starts, ends)


async def test_ab_on_one_machine_runs_in_turn_alternating_who_goes_first(
    make_config, build_app, wait_for, tmp_path
):
    """Two in-process engines share this machine: with the default schedule ("auto") each
    A/B turn runs one engine after the other, A first on odd turns and B first on even."""
    import json

    cfg = make_config(
        'default_engine = "s1"\n'
        + gen(10)
        + '[engines.s1]\nkind = "synthetic"\noptions = { tokens_per_s = 200 }\n'
        + '[engines.s2]\nkind = "synthetic"\noptions = { tokens_per_s = 200 }\n'
    )
    app = build_app(cfg)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+o")
        await wait_for(pilot, lambda: bar(app).count("ready") == 2)
        for prompt in ("one", "two"):
            await app.chat.submit_text(prompt)
            await wait_for(pilot, lambda: not app.chat.busy)
        assert "B/A (seq)" in str(app.chat.query_one("#ratios").render())
    recs = [json.loads(x) for x in (tmp_path / "session.jsonl").read_text().splitlines()]
    # the records are written as each request ends: the order is who ran first
    assert [(r["prompt"], r["slot"]) for r in recs] == [
        ("one", "A"),
        ("one", "B"),
        ("two", "B"),
        ("two", "A"),
    ]
    for first, second in (recs[0:2], recs[2:4]):  # never both at once
        end_first = first["t_sent_ns"] + first["metrics"]["e2e_ms"] * 1e6
        assert second["t_sent_ns"] >= end_first


async def test_loading_engine_does_not_freeze_ui(make_config, build_app, wait_for):
    """Needs a slow load on demand: the synthetic engine sleeps 2 s in load()."""
    cfg = make_config(
        'default_engine = "slow"\n'
        + gen(5)
        + '[engines.slow]\nkind = "synthetic"\noptions = { load_ms = 2000 }\n'
    )
    app = build_app(cfg)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: "loading" in bar(app), 5)
        prompt = app.chat.query_one(PromptInput)
        prompt.focus()
        await pilot.press(*"typing while it loads")
        assert prompt.text == "typing while it loads"
        assert "loading" in bar(app)  # the keys were handled during the load
        await wait_for(pilot, lambda: "ready" in bar(app), 10)


async def test_nvml_failing_mid_run_is_shown_in_the_app(make_config, build_app, wait_for):
    """NVML cannot be made to fail for real here: a stand-in raises after it started."""

    class Flaky:
        NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0

        def __getattr__(self, name):  # type: ignore[no-untyped-def]
            if name in ("nvmlInit", "nvmlShutdown"):
                return lambda *a: None
            if name == "nvmlDeviceGetCount":
                return lambda: 1
            if name == "nvmlDeviceGetHandleByIndex":
                return lambda i: "h"
            if name == "nvmlDeviceGetName":
                return lambda h: "Fake GPU"
            if name in ("nvmlDeviceGetMemoryBusWidth", "nvmlDeviceGetMaxClockInfo"):
                return lambda *a: 1000
            raise RuntimeError("NVML: Unknown Error (GPU fell off the bus)")

    app = build_app(make_config("[telemetry]\ninterval_s = 0.2\n" + gen(5) + LOCAL), telemetry=True)
    app.hardware.sampler.source._gpus._nvml = NvmlProbe(Flaky())
    async with app.run_test(size=SIZE) as pilot:
        panel = app.chat.query_one(HardwarePanel)
        await wait_for(pilot, lambda: "NVML error" in panel.text, 10)
        assert "GPU fell off the bus" in panel.text and "RAM" in panel.text
        await app.chat.submit_text("Hi.")
        await wait_for(pilot, lambda: not app.chat.busy)
        turn = app.chat.query_one("#conv-A", Conversation).turns[0]
        assert turn.text and "ERROR" not in str(turn.query_one(".summary").render())


def test_apple_silicon_memory_is_labelled_unified(monkeypatch):
    monkeypatch.setattr(apple.platform, "system", lambda: "Darwin")
    monkeypatch.setattr(apple.platform, "machine", lambda: "arm64")
    assert apple.memory_label() == "unified memory (RAM)"
    assert "unified memory" in (apple.gpu_note() or "")
    monkeypatch.setattr(apple.platform, "system", lambda: "Linux")
    assert apple.memory_label() == "RAM" and apple.gpu_note() is None


async def test_in_process_llamacpp_gets_the_threads_chosen_for_the_ui(
    make_config, build_app, wait_for
):
    """Under the TUI an in-process llama.cpp without n_threads gets ui_threads(cores)
    (tui/engines/placement.py: every core up to 4, measured); a configured one is kept."""
    from tui.engines.placement import ui_threads

    cfg = make_config(
        gen(5)
        + '[engines.local]\nkind = "llamacpp"\nmodel = "default"\n'
        + '[engines.pinned]\nkind = "llamacpp"\nmodel = "default"\nn_threads = 1\n'
    )
    app = build_app(cfg)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: "ready" in bar(app))
        info = app.core.host("local").info()
        assert info.parameters["n_threads"] == ui_threads(os.cpu_count() or 1)
        assert app.core.host("pinned").spec.n_threads == 1
        assert cfg.engines["local"].n_threads is None  # the config itself is unchanged


async def test_a_long_prompt_keeps_its_box_until_the_answer_ends(
    make_config, build_app, wait_for, monkeypatch
):
    """A prompt of several lines keeps its input box's height while the answer streams,
    and the box shrinks at the answer's end: the pane above it keeps its height, so the
    answer's tail box is sized once. (A box that shrank at submit grew the pane just as the
    turn mounted: the tail box was sized for the old pane, then the new one, a second
    layout of the whole screen while the engine began to decode.) The turn, its prompt
    wrapped over several lines, fills the pane exactly: a line more made the pane's
    scrollbar appear, another layout."""
    sized: list[int] = []
    real = Turn._size_box

    def recorded(self: Turn, height: int) -> None:
        if height != self._tail_height:
            sized.append(height)
        real(self, height)

    monkeypatch.setattr(Turn, "_size_box", recorded)
    slow = SYNTH.replace("tokens_per_s = 200", "tokens_per_s = 40")  # streams for 1 s
    app = build_app(make_config('default_engine = "synth"\n' + gen(40) + slow))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: "ready" in bar(app))
        prompt = app.chat.query_one(PromptInput)
        prompt.load_text("a prompt long enough to wrap " * 8)
        prompt.focus()
        await pilot.pause()
        held = prompt.region.height
        assert held > 3  # more than its one line of text
        await pilot.press("enter")
        conv = app.chat.query_one("#conv-A", Conversation)
        await wait_for(pilot, lambda: bool(conv.turns) and conv.turns[0]._streaming)
        assert not conv.turns[0].finished
        assert prompt.text == "" and prompt.region.height == held
        assert conv.turns[0].query_one(".prompt").size.height > 1
        assert conv.virtual_size.height == conv.size.height
        assert not conv.vertical_scrollbar.display
        await wait_for(pilot, lambda: conv.turns[0].finished)
        await pilot.pause()
        assert prompt.region.height == 3
        assert len(sized) == 2 and sized[0] > 0 and sized[1] == 0
