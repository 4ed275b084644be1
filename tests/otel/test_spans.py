"""A finished request as a GenAI span and metric points (tui/otel/spans.py, measures.py):
the request's own stamps, the engine's counts only as usage, estimates labelled, no
text, bounded attributes."""

from __future__ import annotations

from dataclasses import replace

from tests.support.made_outcomes import metrics, outcome
from tui.core.trace_context import continue_or_start
from tui.otel import conventions as C
from tui.otel.measures import MAX_MODELS, AttributeSets, points_of
from tui.otel.spans import server_of, span_of


def test_a_streamed_chat_request() -> None:
    ctx = continue_or_start("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
    o = outcome(trace_id=ctx.trace_id, span_id=ctx.span_id, parent_span_id=ctx.parent_id)
    s = span_of(o)
    assert s.name == "chat smollm2" and s.kind == "client" and s.status == "unset"
    assert (s.trace_id, s.span_id, s.parent_id) == (ctx.trace_id, ctx.span_id, ctx.parent_id)
    # the request's own stamps: t0 on the wall clock, and exactly e2e after it
    assert s.start_ns == round(o.t0_wall * 1e9) and s.end_ns - s.start_ns == 1_000_000_000
    a = s.attributes
    assert a[C.GEN_AI_OPERATION_NAME] == "chat" and a[C.GEN_AI_PROVIDER_NAME] == "llama.cpp"
    assert a[C.GEN_AI_REQUEST_MODEL] == "smollm2" and a[C.GEN_AI_REQUEST_STREAM] is True
    assert a[C.GEN_AI_RESPONSE_FINISH_REASONS] == ["stop"]
    assert (a[C.GEN_AI_USAGE_INPUT_TOKENS], a[C.GEN_AI_USAGE_OUTPUT_TOKENS]) == (12, 30)
    assert a[C.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] == 4
    assert a[C.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] == 0.25 == a[C.INFERTOP_TTFT]
    assert (a[C.SERVER_ADDRESS], a[C.SERVER_PORT]) == ("127.0.0.1", 8080)
    assert a[C.INFERTOP_TTFO] == 0.3 and a[C.INFERTOP_DECODE_TPS] == 80.0
    assert a["infertop.engine.prompt_ms"] == 20.0
    assert C.ERROR_TYPE not in a and C.GEN_AI_INPUT_MESSAGES not in a


def test_estimates_are_never_usage() -> None:
    m = metrics(
        output_tokens=7,
        output_tokens_source="chunk-count-estimate",
        reasoning_tokens=3,
        reasoning_tokens_source="chunk-count-estimate",
        prompt_tokens=None,
    )
    a = span_of(outcome(metrics=m, truth=None)).attributes
    assert C.GEN_AI_USAGE_OUTPUT_TOKENS not in a and C.GEN_AI_USAGE_INPUT_TOKENS not in a
    assert C.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS not in a
    assert (
        a[C.INFERTOP_OUTPUT_TOKENS_ESTIMATE] == 7 and a[C.INFERTOP_REASONING_TOKENS_ESTIMATE] == 3
    )
    kinds = {
        (p[0].name, p[2].get(C.GEN_AI_TOKEN_TYPE))
        for p in points_of(outcome(metrics=m), AttributeSets())
    }
    assert ("gen_ai.client.token.usage", "output") not in kinds


def test_failed_cancelled_not_streamed_and_in_process() -> None:
    failed = span_of(
        outcome(
            state="failed",
            error_kind="http",
            metrics=metrics(error="HTTP 500", finish_reason="error"),
        )
    )
    assert failed.status == "error" and failed.attributes[C.ERROR_TYPE] == "http"
    assert C.GEN_AI_RESPONSE_FINISH_REASONS not in failed.attributes
    cancelled = span_of(outcome(state="cancelled"))
    assert cancelled.status == "unset" and C.ERROR_TYPE not in cancelled.attributes
    whole = span_of(outcome(streamed=False, route="/v1/embeddings", api="embeddings", model=None))
    assert (
        whole.name == "embeddings" and C.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK not in whole.attributes
    )
    local = span_of(
        outcome(
            source="chat", upstream="in-process", kind="llamacpp", route="llamacpp", api="llamacpp"
        )
    )
    assert (
        C.SERVER_ADDRESS not in local.attributes
        and local.attributes[C.GEN_AI_OPERATION_NAME] == "chat"
    )
    assert server_of("http://[::1]:8000/v1") == ("::1", 8000) and server_of("https://h") == (
        "h",
        443,
    )
    assert server_of("http://h:99999") == (None, None)


def test_operations_by_route_and_dialect() -> None:
    for route, api, op in [
        ("/v1/responses", "openai-responses", "chat"),
        ("/v1/messages", "anthropic", "chat"),
        ("/v1/completions", "openai-completions", "text_completion"),
        ("/completion", "llama", "text_completion"),
        ("/api/generate", "ollama", "text_completion"),
        ("/api/chat", "ollama", "chat"),
        ("/v1/rerank", "rerank", "rerank"),
    ]:
        assert C.operation_of(route, api) == op


def test_metric_points() -> None:
    pts = points_of(outcome(), AttributeSets())
    by = {}
    for p in pts:
        by.setdefault((p.spec.name, p.attributes.get(C.GEN_AI_TOKEN_TYPE)), []).extend(p.scaled())
    assert by[("gen_ai.client.operation.duration", None)] == [1.0]
    assert by[("gen_ai.client.token.usage", "input")] == [12.0]
    assert by[("gen_ai.client.token.usage", "output")] == [30.0]
    assert by[("gen_ai.client.operation.time_to_first_chunk", None)] == [0.25]
    assert by[("gen_ai.client.operation.time_per_output_chunk", None)] == [0.01, 0.012, 0.014]
    assert by[("gen_ai.server.time_to_first_token", None)] == [0.25]
    assert by[("gen_ai.server.time_per_output_token", None)] == [0.025]
    chat = {p.spec.name for p in points_of(outcome(source="chat"), AttributeSets())}
    assert not chat & {"gen_ai.server.time_to_first_token", "gen_ai.server.time_per_output_token"}
    failed = points_of(outcome(state="failed", error_kind="timeout"), AttributeSets())
    assert failed[0][2][C.ERROR_TYPE] == "timeout"


def test_client_chosen_models_stay_bounded() -> None:
    models = AttributeSets()
    labels = {
        points_of(replace(outcome(), model=f"m{i}" + "x" * 500), models)[0][2][
            C.GEN_AI_REQUEST_MODEL
        ]
        for i in range(200)
    }
    assert len(labels) == MAX_MODELS + 1 and "_OTHER" in labels
    assert max(len(x) for x in labels) == 64
