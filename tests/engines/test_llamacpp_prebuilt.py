"""The two llama.cpp builds side by side: the prebuilt one (PyPI's xllamacpp, its server in
the engine's worker) and the one built for this CPU (llama-cpp-python) report the same
way — the engine's own account (prefill, decode), the KV line's token count, the build's
label — and a crash of either ends the answer, never infertop. Real engines on the
embedded model, one thread each (docs/testing.md)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from tui.core.events import ContextFill, Failed, Finished, TextChunk
from tui.core.metrics import compute_metrics
from tui.core.timeline import RequestTimeline
from tui.engines.base import EngineError, EngineSpec, GenerationRequest
from tui.engines.inprocess import llama_builds, probe
from tui.engines.inprocess.llama_builds import (
    PREBUILT_KIND,
    TUNED_KIND,
    TUNED_LABEL,
    embedded_engines,
    kind_label,
    prebuilt_label,
)
from tui.engines.inprocess.llamacpp_prebuilt import context_tokens
from tui.engines.inprocess.worker import WorkerEngine
from tui.engines.registry import create_engine

LABELS = {TUNED_KIND: TUNED_LABEL, PREBUILT_KIND: "llama.cpp prebuilt (generic x86-64 AVX2)"}
PROMPT = "Tell me about the sea in three sentences."


def engine(kind: str, **options: object) -> WorkerEngine:
    made = create_engine(
        EngineSpec(name=kind, kind=kind, model="default", n_threads=1, options=dict(options))
    )
    assert isinstance(made, WorkerEngine)
    return made


async def answer(e: WorkerEngine, **kw: object) -> tuple[RequestTimeline, list[object]]:
    tl, events = RequestTimeline(), []
    async for event in e.stream(GenerationRequest.from_prompt(PROMPT, **kw)):  # type: ignore[arg-type]
        tl.add(event)
        events.append(event)
    return tl, events


@pytest.mark.engine
@pytest.mark.parametrize("kind", [TUNED_KIND, PREBUILT_KIND])
async def test_both_builds_report_alike(kind: str, model_path: Path) -> None:
    e = engine(kind)
    await e.load()
    try:
        info = e.info()
        assert info.kind == kind and info.build == LABELS[kind] == kind_label(kind)
        assert info.model == "SmolLM2-135M-Instruct" and info.quantisation == "Q4_1"
        assert info.pid == e.pid and info.pid != os.getpid()  # in its worker process
        assert info.parameters["kv_layout"] is not None, info.parameters["kv_layout_unknown"]
        assert info.parameters["model_bytes"] == model_path.stat().st_size
        tl, events = await answer(e, max_tokens=24, temperature=0.0, cache_prompt=False)
        assert isinstance(events[-1], Finished), events[-1]
        m = compute_metrics(tl)
        # the engine's own account: prefill and decode as llama.cpp timed them
        truth = tl.truth
        assert truth is not None and truth.prompt_ms and truth.decode_ms, truth
        assert truth.prompt_tokens == m.prompt_tokens and truth.prompt_eval_tokens
        assert m.prefill_tps_source == "engine" and m.engine_decode_tps is not None
        assert m.output_tokens == 24
        # each chunk's tokens as the engine counts them: the ITL is per token, not a guess
        assert not m.itl_token_estimated and not m.output_tokens_estimated
        # the KV line: the engine's own count of the tokens in its context, as it grows
        fills = [ev for ev in events if isinstance(ev, ContextFill)]
        assert len(fills) >= 3 and fills[0].tokens >= truth.prompt_tokens - 1
        assert [f.tokens for f in fills] == sorted(f.tokens for f in fills)
        assert fills[-1].tokens == truth.prompt_tokens + 24 - 1 and fills[-1].n_ctx == 2048
        # the model the answer named: the prebuilt's own llama.cpp server names its GGUF;
        # the tuned build (llama.cpp's C API) gives no answer to name one in
        if kind == PREBUILT_KIND:
            assert tl.response_model == str(model_path)
        else:
            assert tl.response_model is None
        # stamped in the worker, as the tokens came
        assert tl.stamp_source is not None and "engine worker process" in tl.stamp_source
        assert len([ev for ev in events if isinstance(ev, TextChunk)]) >= 20
        # the fairness controls are applied, and said how
        asked = GenerationRequest.from_prompt("x", cache_prompt=False, ignore_eos=True)
        controls = e.request_controls(asked)
        assert not any(v.startswith("not enforced") for v in controls.values()), controls
    finally:
        await e.close()


@pytest.mark.engine
@pytest.mark.parametrize("kind", [TUNED_KIND, PREBUILT_KIND])
async def test_a_crash_of_either_build_ends_the_answer_not_infertop(
    kind: str, model_path: Path
) -> None:
    e = engine(kind)
    await e.load()
    pid = e.pid
    assert pid is not None
    try:
        tl, events = RequestTimeline(), []
        request = GenerationRequest.from_prompt(PROMPT, max_tokens=400, ignore_eos=True)
        killed = False
        async for event in e.stream(request):
            tl.add(event)
            events.append(event)
            if len(tl.chunk_ns) >= 6 and not killed:
                os.kill(pid, signal.SIGSEGV)
                killed = True
        last = events[-1]
        assert isinstance(last, Failed) and "engine process died: SIGSEGV" in last.message
        assert len(tl.chunk_ns) >= 6 and tl.text  # what streamed before is kept
        await e.load()  # a new worker, the same engine
        tl, events = await answer(e, max_tokens=4)
        assert isinstance(events[-1], Finished) and e.pid != pid
    finally:
        await e.close()


NO_AVX2 = frozenset({"sse4_2", "pni", "ssse3", "avx"})


def test_a_cpu_without_avx2_gets_a_message_not_sigill(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    problem = llama_builds.prebuilt_cpu_problem(NO_AVX2)
    assert problem is not None
    assert "lacks AVX2, F16C, FMA, BMI2" in problem and "SIGILL" in problem
    assert "INFERTOP_BUILD=now" in problem
    monkeypatch.setattr(llama_builds, "cpu_flags", lambda: NO_AVX2)
    if llama_builds.prebuilt_problem(NO_AVX2) is None:
        pytest.skip("not x86-64 Linux: the AVX2 wheel is not the one used here")
    result = probe.run_probe(build="prebuilt")  # no child started: the CPU says no first
    assert not result.ok and result.error == problem and not result.stages


async def test_the_prebuilt_engine_checks_the_cpu_before_loading(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(llama_builds, "cpu_flags", lambda: NO_AVX2)
    if llama_builds.prebuilt_problem(NO_AVX2) is None:
        pytest.skip("not x86-64 Linux")
    e = create_engine(
        EngineSpec(name="p", kind=PREBUILT_KIND, model="default", options={"isolate": False})
    )
    with pytest.raises(EngineError, match="lacks AVX2"):
        await e.load()


def test_other_platforms_are_named_plainly() -> None:
    assert llama_builds.prebuilt_problem([], "aarch64", "Linux") is not None
    assert llama_builds.prebuilt_problem([], "arm64", "Darwin") is None
    assert prebuilt_label("arm64", "Darwin") == "llama.cpp prebuilt (generic macOS arm64)"
    assert prebuilt_label("x86_64", "Linux") == "llama.cpp prebuilt (generic x86-64 AVX2)"


def test_the_built_in_engines_follow_what_is_installed() -> None:
    both = embedded_engines(frozenset({"tuned", "prebuilt"}))
    assert {n: s.kind for n, s in both.items()} == {"local": TUNED_KIND, "prebuilt": PREBUILT_KIND}
    only_prebuilt = embedded_engines(frozenset({"prebuilt"}))
    assert list(only_prebuilt) == ["prebuilt"]
    assert list(embedded_engines(frozenset())) == ["local"]  # its load says what is missing


def test_kv_fill_from_timings_is_bounded_and_exact() -> None:
    assert context_tokens({"cache_n": 3, "prompt_n": 30, "predicted_n": 1}) == (33, 1)
    assert context_tokens({"cache_n": 0, "prompt_n": 30, "predicted_n": 8}) == (37, 8)
    for bad in (None, [], {"cache_n": -1, "prompt_n": 1, "predicted_n": 1}, {"prompt_n": 1}):
        assert context_tokens(bad) is None
    assert context_tokens({"cache_n": 0, "prompt_n": 2**40, "predicted_n": 1}) is None
    assert context_tokens({"cache_n": 0.5, "prompt_n": 1, "predicted_n": 1}) is None


def test_a_tuned_load_before_its_build_says_why(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from tui.engines.files import build_state
    from tui.engines.inprocess import llamacpp

    monkeypatch.setattr(build_state, "venv_state_dir", lambda: tmp_path)
    missing = ImportError("No module named 'llama_cpp'")
    why = llamacpp.tuned_missing(missing)
    assert TUNED_LABEL in why and "llamacpp-prebuilt" in why and "failed" not in why
    build_state.write_build_state(
        tmp_path,
        build_state.BuildState(
            "failed", 1, "llama-cpp-python 0.3.36", "/v/build.log", 1, 2, 3, error="while x: y"
        ),
    )
    why = llamacpp.tuned_missing(missing)
    assert "building llama.cpp for this CPU failed" in why and "/v/build.log" in why
