"""``infertop run``: the model the server's answer named reaches the request's span
(``gen_ai.response.model``, at an OTLP receiver), ``--json`` (``response_model``) and the
summary's head, from bytes a real llama-server sent; never the model asked for. A
server that names a megabyte of terminal controls as its model: kept bounded, and never
raw on screen."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.support.hostile_answers import HOSTILE_MODEL_HEAD, hostile_model
from tests.support.recorded_upstream import models_named, recorded, serving
from tui.core.events import MODEL_CHARS
from tui.otel import conventions as C

pytest.importorskip("opentelemetry.sdk", reason="the dev extra installs it")
from tests.support.otlp_sink import OtlpSink  # noqa: E402

ASKED = "asked-for"
CONTROLS = {chr(c) for c in (*range(0x00, 0x09), *range(0x0B, 0x20), 0x7F, *range(0x80, 0xA0))}


@pytest.fixture
def sink() -> Iterator[OtlpSink]:
    s = OtlpSink()
    yield s
    s.stop()


def infertop_run(env: dict[str, str], url: str, sink_url: str, *extra: str):  # type: ignore[no-untyped-def]
    return subprocess.run(
        [sys.executable, "-m", "tui", "run", "--url", url, "--model", ASKED, "--prompt", "hi",
         "--max-tokens", "8", "--otlp", sink_url, *extra],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip


def test_run_names_the_model_the_server_answered(cli_env, sink):
    body = recorded("llama-server_chat_reasoning.sse")
    (named,) = models_named(body)
    up = serving(body)
    try:
        proc = infertop_run(cli_env, up.url, sink.url, "--json")
        human = infertop_run(cli_env, up.url, sink.url)
    finally:
        up.stop()
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    assert out["model"] == ASKED and out["response_model"] == named != ASKED
    span = next(s for s in sink.spans if s["trace_id"] == out["trace_id"])
    assert span["attributes"][C.INFERTOP_SOURCE] == "run"
    assert span["attributes"][C.GEN_AI_REQUEST_MODEL] == ASKED
    assert span["attributes"][C.GEN_AI_RESPONSE_MODEL] == named
    assert human.returncode == 0, human.stderr[-2000:]
    assert f"{ASKED} · answered by {named} ──" in human.stdout


def test_a_hostile_model_name_arrives_bounded_and_never_raw(cli_env, sink):
    up = serving(b"".join(hostile_model(1 << 20)))
    try:
        proc = infertop_run(cli_env, up.url, sink.url, "--json")
        human = infertop_run(cli_env, up.url, sink.url)
    finally:
        up.stop()
    assert proc.returncode == 0, proc.stderr[-2000:]
    kept = HOSTILE_MODEL_HEAD + "M" * (MODEL_CHARS - len(HOSTILE_MODEL_HEAD))
    assert json.loads(proc.stdout)["response_model"] == kept  # bounded, escaped by JSON
    assert {s["attributes"].get(C.GEN_AI_RESPONSE_MODEL) for s in sink.spans} == {kept}
    assert human.returncode == 0, human.stderr[-2000:]
    for shown in (proc.stdout, proc.stderr, human.stdout, human.stderr):
        assert not CONTROLS & set(shown) and "M" * 200 not in shown
    (head,) = [ln for ln in human.stdout.splitlines() if "answered by" in ln]
    assert "answered by ␛]52;c;" in head and len(head) < 200
