"""Fairness checks before a bench measures an engine (tui/bench/run/runner.py calls
:func:`check_fairness` once per engine, after its load and before warm-up)."""

from __future__ import annotations

from collections.abc import Callable

from tui.bench.run import hooks
from tui.bench.run.loads import TOKENIZER, RequestDriver, prompt_counter
from tui.bench.run.plan import BenchPlan
from tui.bench.run.prompts import PromptShape, calibrate
from tui.bench.run.results import EngineRun
from tui.engines.base import Engine, GenerationRequest

PROBE_COUNTS = 4  # 1-token probe requests at most when the engine has no tokenizer hook
TOKENIZER_COUNTS = 10
# the runner's request for a prompt text (max_tokens: the plan's when None)
MakeRequest = Callable[..., GenerationRequest]


async def check_fairness(
    engine: Engine,
    run: EngineRun,
    driver: RequestDriver,
    plan: BenchPlan,
    make_request: MakeRequest,
    stopped: Callable[[], bool],
) -> None:
    """Before any measured request: how the engine applies the bench's controls, its
    parallel capacity against each concurrency level, whether a cold start can be forced,
    and the prompt calibrated to ``plan.prompt_tokens`` (each shortfall a warning in
    ``run``). ``stopped``: the bench was stopped (a stopped calibration says nothing)."""
    try:
        run.controls = engine.request_controls(make_request("x"))
    except Exception as e:  # noqa: BLE001 - a note, not a reason to stop
        run.controls = {}
        run.warnings.append(f"how {run.name} applies cache_prompt/ignore_eos is unknown: {e}")
    cap = await hooks.engine_capacity(engine)
    run.capacity, run.capacity_source, run.capacity_note = cap.slots, cap.source, cap.note
    for c in plan.concurrency:
        if c > 1 and cap.slots is not None and c > cap.slots:
            run.warnings.append(
                f"concurrency {c} exceeds {run.name}'s parallel capacity ({cap.slots}): "
                "this level measures queueing, not parallel decoding"
            )
        elif c > 1 and cap.slots is None:
            run.warnings.append(
                f"concurrency {c}: {run.name}'s parallel capacity is unknown, so this "
                "level may measure queueing"
            )
    run.cold_method = hooks.cold_start_method(engine)
    if plan.cold and run.cold_method is None:
        run.cold_note = hooks.cold_unavailable_note(engine)
    run.prompt = await _calibrate(engine, run, driver, plan, make_request)
    if stopped():
        return  # a stopped calibration says nothing about the engine
    if run.prompt.method == "estimate":
        run.warnings.append(
            f"{run.name} counts no prompt tokens: prompt length is an estimate "
            f"(~{run.prompt.target_tokens} tokens at 0.75 words per token)"
        )
    elif run.prompt.counted_tokens != plan.prompt_tokens:
        run.warnings.append(
            f"{run.name}: closest prompt length found is {run.prompt.counted_tokens} "
            f"tokens (asked for {plan.prompt_tokens})"
        )


async def _calibrate(
    engine: Engine,
    run: EngineRun,
    driver: RequestDriver,
    plan: BenchPlan,
    make_request: MakeRequest,
) -> PromptShape:
    count, method = await prompt_counter(engine, driver, run.calibration)
    most = TOKENIZER_COUNTS if method == TOKENIZER else PROBE_COUNTS
    return await calibrate(plan.prompt_tokens, make_request, count, method, most)
