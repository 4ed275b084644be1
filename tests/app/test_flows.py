"""Key flows through the whole app, built by the CLI's factory, with the real llama.cpp
engine on the embedded SmolLM2 model (small max_tokens). The synthetic engine appears
only as the second engine where a flow needs two engines or exact control of a fault."""

from __future__ import annotations

import json

import pytest

from tests.app.app_support import LOCAL, SIZE, SYNTH, gen, submit, summary, turns
from tui.app.format import ms, tps
from tui.app.widgets.ab_table import ABTable
from tui.app.widgets.compact_metrics import CompactMetrics
from tui.app.widgets.engine_bar import EngineBar
from tui.app.widgets.metrics_panel import MetricsPanel
from tui.app.widgets.prompt import PromptInput

pytestmark = pytest.mark.engine


def bar(app) -> str:  # type: ignore[no-untyped-def]
    return app.chat.query_one(EngineBar).plain()


async def test_submit_streams_answer_with_metrics_and_session_log(
    make_config, build_app, wait_for, tmp_path
):
    app = build_app(make_config(gen(12) + LOCAL))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: "ready" in bar(app))
        assert "llamacpp" in bar(app) and "SmolLM2" in bar(app)
        await submit(pilot, "Name a colour.")
        await wait_for(pilot, lambda: turns(app) and turns(app)[0].finished)
        turn = turns(app)[0]
        assert turn.text.strip(), "no text streamed"
        line = summary(turn)
        assert "TTFT" in line and "tok/s" in line and "ERROR" not in line
        # the Markdown pane holds what streamed (via the stream API)
        assert turn.source.strip() == turn.text.strip()
        panel = app.chat.query_one(MetricsPanel)
        assert panel.row("ttft").values_text.strip() not in ("", "–")
        assert "prefill" in str(panel.query_one(".phase").render())
        assert "engine decode" in str(panel.query_one(".truth").render())
        # prompt cleared and remembered in history
        assert app.chat.query_one(PromptInput).text == ""
        assert app.chat.query_one(PromptInput).prompt_history == ["Name a colour."]
    rec = json.loads((tmp_path / "session.jsonl").read_text().splitlines()[0])
    assert rec["engine"] == "local" and rec["prompt"] == "Name a colour."
    assert rec["params"]["max_tokens"] == 12
    assert rec["text"] == turn.text
    assert len(rec["timeline"]["chunks"]) >= 1
    assert rec["metrics"]["ttft_ms"] > 0 and rec["engine_truth"]["source"]
    assert rec["timeline"]["stamp_source"].startswith("llama.cpp's generation thread")


async def test_multi_turn_sends_previous_exchange(make_config, build_app, wait_for, tmp_path):
    app = build_app(make_config(gen(6) + LOCAL))
    async with app.run_test(size=SIZE) as pilot:
        await submit(pilot, "Say hello.")
        await wait_for(pilot, lambda: len(turns(app)) == 1 and turns(app)[0].finished)
        await submit(pilot, "Again.")
        await wait_for(pilot, lambda: len(turns(app)) == 2 and turns(app)[1].finished)
    recs = [json.loads(x) for x in (tmp_path / "session.jsonl").read_text().splitlines()]
    assert [m["role"] for m in recs[1]["messages"]] == ["user", "assistant", "user"]
    assert recs[1]["messages"][1]["content"] == recs[0]["text"]


async def test_cancel_keeps_partial_answer(make_config, build_app, wait_for, tmp_path):
    app = build_app(make_config(gen(400) + LOCAL))
    async with app.run_test(size=SIZE) as pilot:
        await submit(pilot, "Write a long story about a lighthouse keeper.")
        await wait_for(pilot, lambda: turns(app) and len(turns(app)[0].text) > 20)
        await pilot.press("escape")
        await wait_for(pilot, lambda: turns(app)[0].finished)
        turn = turns(app)[0]
        assert "CANCELLED" in summary(turn)
        assert "cancelled — partial answer kept" in turn.source
        assert turn.text and turn.text in turn.source
        assert not app.chat.busy
    rec = json.loads((tmp_path / "session.jsonl").read_text().splitlines()[0])
    assert rec["metrics"]["finish_reason"] == "cancelled"
    assert rec["metrics"]["output_tokens"] < 400


async def test_switch_engine_updates_bar_and_is_remembered(
    make_config, build_app, wait_for, tmp_path
):
    cfg = make_config(gen(8) + LOCAL + SYNTH)
    app = build_app(cfg)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: "local" in bar(app) and "ready" in bar(app))
        await pilot.press("ctrl+n")
        await wait_for(pilot, lambda: "synth" in bar(app) and "ready" in bar(app))
        assert "synthetic" in bar(app) and "local" not in bar(app)
        await submit(pilot, "hi")
        await wait_for(pilot, lambda: turns(app) and turns(app)[0].finished)
        assert turns(app)[0].engine == "synth"
    assert 'engine = "synth"' in (tmp_path / "state.toml").read_text()
    # a new app (same factory) starts on the remembered engine
    app2 = build_app(cfg)
    async with app2.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: "synth" in bar(app2))


async def test_ab_mode_runs_both_engines_and_fills_delta_table(make_config, build_app, wait_for):
    app = build_app(make_config(gen(10) + LOCAL + SYNTH))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+o")
        assert app.chat.ab and app.chat.query_one("#conv-B").display
        await wait_for(pilot, lambda: bar(app).count("ready") == 2)
        assert "A ● local" in bar(app) and "B ● synth" in bar(app)
        await submit(pilot, "Count to three.")
        await wait_for(pilot, lambda: turns(app, "B") and turns(app, "B")[0].finished)
        assert turns(app, "A")[0].finished and turns(app, "A")[0].text
        assert turns(app, "B")[0].text
        table = app.chat.query_one(ABTable)
        assert table.row_count == 3
        rows = [table.get_row_at(i) for i in range(3)]
        assert [r[1].split(" ")[0] for r in rows] == ["TTFT", "decode", "prefill"]
        assert all(str(r[2]).endswith("×") for r in rows)
        # both engines run on this machine: the turn ran one after the other, and says so
        assert [r[5] for r in rows] == ["seq"] * 3
        await pilot.press("ctrl+o")
        assert not app.chat.query_one("#conv-B").display


async def test_engine_error_mid_stream_keeps_text(make_config, build_app, wait_for):
    """Fault injection needs exact control: the synthetic engine fails after 5 tokens."""
    cfg = make_config(
        'default_engine = "flaky"\n'
        + gen(50)
        + '[engines.flaky]\nkind = "synthetic"\noptions = { fail_after = 5 }\n'
    )
    app = build_app(cfg)
    async with app.run_test(size=SIZE) as pilot:
        await submit(pilot, "go")
        await wait_for(pilot, lambda: turns(app) and turns(app)[0].finished)
        turn = turns(app)[0]
        assert len(turn.text.split()) == 5
        assert "ERROR: synthetic engine fault" in summary(turn)
        assert turn.has_class("-error") or turn.query_one(".summary").has_class("-error")
        await submit(pilot, "again")  # the app is still usable
        await wait_for(pilot, lambda: len(turns(app)) == 2 and turns(app)[1].finished)


async def test_model_that_fails_to_load(make_config, build_app, wait_for, tmp_path, notes):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"not a model at all" * 10)
    engine = f'[engines.broken]\nkind = "llamacpp"\nmodel = "{bad}"\n'
    cfg = make_config('default_engine = "broken"\n' + gen(5) + engine)
    app = build_app(cfg)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: "error" in bar(app))
        assert "not a GGUF model" in bar(app)
        await wait_for(pilot, lambda: any("not a GGUF model" in n for n in notes(app)), 5)
        await submit(pilot, "hello")
        await wait_for(pilot, lambda: turns(app) and turns(app)[0].finished)
        assert "ERROR" in summary(turns(app)[0])


async def test_empty_prompt_is_refused_politely(make_config, build_app, wait_for, notes):
    app = build_app(make_config(gen(5) + LOCAL))
    async with app.run_test(size=SIZE) as pilot:
        await submit(pilot, "   \n ")
        await pilot.pause(0.1)
        assert turns(app) == []
        await wait_for(pilot, lambda: any("prompt is empty" in n for n in notes(app)), 5)


async def test_huge_paste_fails_cleanly(make_config, build_app, wait_for):
    """A 100 KB prompt exceeds the 2048-token context: a plain error, the app stays up."""
    app = build_app(make_config(gen(5) + LOCAL))
    async with app.run_test(size=SIZE) as pilot:
        await submit(pilot, "lorem ipsum " * 8534)  # ~100 KB
        await wait_for(pilot, lambda: turns(app) and turns(app)[0].finished, timeout=60)
        assert "ERROR" in summary(turns(app)[0])
        await submit(pilot, "Hi.")
        await wait_for(pilot, lambda: len(turns(app)) == 2 and turns(app)[1].finished)
        assert "ERROR" not in summary(turns(app)[1])


async def test_resize_to_40x12_while_streaming(make_config, build_app, wait_for):
    app = build_app(make_config(gen(60) + LOCAL))
    async with app.run_test(size=SIZE) as pilot:
        await submit(pilot, "Describe the sea.")
        await wait_for(pilot, lambda: turns(app) and len(turns(app)[0].text) > 5)
        await pilot.resize_terminal(40, 12)
        await wait_for(pilot, lambda: turns(app)[0].finished, timeout=30)
        assert app.chat.has_class("-narrow")
        assert turns(app)[0].text.strip()
        await pilot.resize_terminal(*SIZE)
        await pilot.pause(0.1)
        assert not app.chat.has_class("-narrow")


async def test_narrow_layout_sparklines_with_the_answer_and_panels_key(
    make_config, build_app, wait_for
):
    """80x24 on the real model: while the first answer streams, the sparkline block above
    it already moves (ITL gaps of this request, its TTFT and tok/s so far); afterwards it
    holds the request's numbers; F2 swaps chat and panels and back."""
    # 240 tokens: a 60-token answer streamed in ~0.5 s on a quiet machine (~110 tok/s) and
    # once ended before a poll saw it streaming with numbers
    app = build_app(make_config(gen(240) + LOCAL))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: "ready" in bar(app))
        assert not app.chat.query_one("#side").display
        assert app.chat.query_one("#compact").display
        await submit(pilot, "Describe the sea in detail.")
        block = app.chat.query_one(CompactMetrics).slot("A")
        seen: list[tuple[str, str]] = []

        def streaming_with_numbers() -> bool:
            t = turns(app)
            if not t or t[0].finished or not t[0].text.strip():
                return False
            itl = block.row("itl")
            seen.append((itl.values_text, t[0].text))
            return bool(itl.data) and itl.values_text.strip() != "–"

        await wait_for(pilot, streaming_with_numbers, 60)
        assert block.row("ttft").values_text.strip() != "–"  # the running request's TTFT
        await wait_for(pilot, lambda: turns(app)[0].finished, 60)
        await pilot.pause(0.2)
        m = app.core.last_metrics["A"]
        assert m is not None and m.ttft_ms is not None and m.decode_tps is not None
        assert block.row("ttft").values_text.split("p50")[0].strip() == ms(m.ttft_ms)
        assert block.row("decode").values_text.split("p50")[0].strip() == tps(m.decode_tps)
        strip = str(app.chat.query_one("#strip").render())
        assert "F2 panels" in strip
        await pilot.press("f2")
        assert app.chat.query_one("#side").display
        assert not app.chat.query_one("#chat-col").display
        assert not app.chat.query_one("#compact").display  # the full panels say it all
        await pilot.press("f2")
        assert app.chat.query_one("#chat-col").display


async def test_keys_remapped_from_config(make_config, build_app, wait_for):
    cfg = make_config(gen(5) + '[ui.keys]\nnext_engine = "f5"\n' + LOCAL + SYNTH)
    app = build_app(cfg)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: "ready" in bar(app))
        await pilot.press("ctrl+n")  # no longer bound
        await pilot.pause(0.1)
        assert "A ● local" in bar(app)
        await pilot.press("f5")
        await wait_for(pilot, lambda: "A ● synth" in bar(app))


async def test_bench_key_opens_the_bench_screen(make_config, build_app, wait_for):
    """``b`` from the conversation opens the bench screen (it is part of the package: the
    app's ImportError fallback is for a broken install, not a state a test can reach)."""
    app = build_app(make_config(gen(5) + LOCAL))
    async with app.run_test(size=SIZE) as pilot:
        app.chat.query_one("#conv-A").focus()
        await pilot.press("b")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "BenchScreen", 5)


@pytest.mark.parametrize("sig", ["SIGSEGV", "SIGKILL"])
async def test_engine_process_killed_mid_answer_keeps_app_and_answer(
    make_config, build_app, wait_for, tmp_path, notes, sig
):
    """The llama.cpp engine runs in a worker process: kill it mid-answer. The app stays
    up, the partial answer and its metrics stay on screen and in the session log, and
    the next prompt starts a fresh worker that answers."""
    import os
    import signal

    app = build_app(make_config(gen(400) + LOCAL))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: "ready" in bar(app))
        pid = app.core.hosts["local"].info().pid
        assert pid is not None and pid != os.getpid()
        await submit(pilot, "Write a long story about a lighthouse keeper.")
        await wait_for(pilot, lambda: turns(app) and len(turns(app)[0].text) > 20)
        os.kill(pid, getattr(signal, sig))
        await wait_for(pilot, lambda: turns(app)[0].finished)
        turn = turns(app)[0]
        assert len(turn.text) > 20 and turn.text in turn.source  # the partial answer
        line = summary(turn)
        assert f"engine process died: {sig}" in line and "TTFT" in line
        assert "error" in bar(app) and sig in bar(app)
        assert any(sig in n for n in notes(app))
        assert not app.chat.busy
        await submit(pilot, "Say hello.")  # a fresh worker answers
        await wait_for(pilot, lambda: len(turns(app)) == 2 and turns(app)[1].finished)
        assert "ERROR" not in summary(turns(app)[1]) and turns(app)[1].text.strip()
        new_pid = app.core.hosts["local"].info().pid
        assert new_pid not in (None, pid)
    recs = [json.loads(x) for x in (tmp_path / "session.jsonl").read_text().splitlines()]
    assert sig in recs[0]["metrics"]["error"]
    assert recs[0]["text"] == turn.text and recs[0]["metrics"]["output_tokens"] >= 5
    assert recs[0]["metrics"]["ttft_ms"] > 0
    assert recs[1]["metrics"]["error"] is None
