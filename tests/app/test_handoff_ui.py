"""The TUI hands each answer on (tui/cli/handoff.py): with ``--otlp`` and
``--capture-content`` the user's own answer lands at an OTLP receiver as a GenAI span
with its prompt and answer, its trace context made by the chat core; an alert rule that
fires is a notification line, from the rules' thread, through a typed Message."""

from __future__ import annotations

import argparse

import pytest

from tests.app.app_support import SIZE, SYNTH, gen, submit, turns
from tests.support.otlp_sink import OtlpSink
from tui.cli.handoff import build_handoff
from tui.otel import conventions as C

pytest.importorskip("opentelemetry.sdk", reason="the dev extra installs it")

RULE = """
[[alerts]]
name = "any answer"
metric = "e2e"
above = 0.001
"""


async def test_an_answer_is_exported_and_an_alert_is_a_line(
    make_config, build_app, wait_for, notes
) -> None:
    sink = OtlpSink()
    config = make_config('default_engine = "synth"\n' + gen(6) + SYNTH + RULE)
    args = argparse.Namespace(
        otlp=sink.url, trace_propagation=False, capture_content=True, alerts=None
    )
    handoff = build_handoff(args, config, note=print)
    try:
        app = build_app(config, handoff=handoff)
        async with app.run_test(size=SIZE) as pilot:
            await submit(pilot, "Name a colour.")
            await wait_for(pilot, lambda: turns(app) and turns(app)[0].finished)
            await wait_for(
                pilot, lambda: any("alert firing any answer" in n for n in notes(app)), 20
            )
            answer = turns(app)[0].text.strip()
            assert handoff.exporter.flush(10)
        (span,) = sink.spans
        a = span["attributes"]
        assert a[C.INFERTOP_SOURCE] == "chat" and a[C.GEN_AI_PROVIDER_NAME] == "infertop.synthetic"
        assert "Name a colour." in a[C.GEN_AI_INPUT_MESSAGES]
        assert answer and answer[:20] in a[C.GEN_AI_OUTPUT_MESSAGES]
        assert len(span["trace_id"]) == 32 and span["parent_id"] is None
    finally:
        handoff.close()
        sink.stop()
