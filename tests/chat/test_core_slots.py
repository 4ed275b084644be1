"""The chat core's slots and conversation without a screen: which engine each slot uses,
a model chosen for a slot, the engines a slot no longer uses, the context each request
carries, and the spec an engine runs with.
"""

from __future__ import annotations

import dataclasses

from tui.chat.core import HISTORY_MESSAGES
from tui.chat.host import IDLE, READY
from tui.core.events import ContextFill


def three(two: str) -> str:
    return two + '[engines.s3]\nkind = "synthetic"\noptions = { tokens_per_s = 400 }\n'


async def test_each_request_carries_the_slots_recent_messages_and_clear_forgets_them(chat, two):
    core, _ = chat()
    for i in range(6):
        await core.run_turn(core.start_turn(f"prompt {i}"))
    assert len(core.messages["A"]) == 12  # every exchange is kept ...
    messages = core.request("A", "next").messages
    assert len(messages) == HISTORY_MESSAGES + 1  # ... the last few are sent
    assert messages[0] == {"role": "user", "content": "prompt 2"}
    assert messages[-1] == {"role": "user", "content": "next"}
    core.clear()
    assert core.request("A", "fresh").messages == [{"role": "user", "content": "fresh"}]
    assert len(core.history["A"]["ttft"].snapshot()) == 6  # the numbers stay


async def test_another_engine_starts_the_slot_afresh(chat):
    core, _ = chat()
    await core.run_turn(core.start_turn("q"))
    assert core.messages["A"] and core.last_metrics["A"] is not None
    assert core.use_engine("A", "s2") == "s1"
    assert core.messages["A"] == [] and core.last_metrics["A"] is None
    assert core.history["A"]["ttft"].snapshot() == []
    released = core.release("s1")  # no slot uses it now: the caller closes it
    assert released is not None and released.state == READY
    released.close()
    assert released.state == IDLE and "s1" not in core.hosts
    assert core.release("s2") is None  # slot A's


async def test_next_engine_skips_the_one_b_uses(chat, two):
    core, _ = chat(three(two))
    assert core.next_engine() == "s2"
    core.toggle_ab()
    assert core.slot_engine == {"A": "s1", "B": "s2"}
    assert core.next_engine() == "s3"
    core.use_engine("A", "s3")
    assert core.next_engine() == "s1"  # round the list, past B's s2


async def test_a_model_for_a_slot_whose_engine_the_other_slot_uses_gets_an_engine_of_its_own(
    chat,
):
    core, _ = chat()
    await core.run_turn(core.start_turn("q"))
    core.toggle_ab()
    core.use_engine("B", "s1")  # both slots on s1
    name, stale = core.use_model("B", "s1", "other-model")
    assert (name, stale) == ("s1 › other-model", None)
    assert core.config.engines[name].model == "other-model"
    assert core.config.engines["s1"].model is None  # A's engine as it was
    assert core.slot_engine == {"A": "s1", "B": "s1 › other-model"}
    # a slot alone on its engine: the engine itself asks for the model from now on, and
    # its loaded host is handed back to close (the next request loads it afresh)
    core.use_engine("B", "s2")
    host = core.hosts["s1"]
    name, stale = core.use_model("A", "s1", "third")
    assert (name, stale) == ("s1", host) and core.config.engines["s1"].model == "third"
    assert "s1" not in core.hosts and core.messages["A"] == []
    stale.close()
    await core.run_turn(core.start_turn("q"))  # loads s1 again, with the new spec
    assert core.hosts["s1"].spec.model == "third"


async def test_the_host_spec_is_what_the_engine_runs_with_and_config_keeps_its_own(chat):
    def faster(spec):  # type: ignore[no-untyped-def]
        return dataclasses.replace(spec, options={**spec.options, "tokens_per_s": 1000})

    core, _ = chat(host_spec=faster)
    await core.run_turn(core.start_turn("q"))
    info = core.info("s1")
    assert info is not None and info.parameters["tokens_per_s"] == 1000
    assert core.config.engines["s1"].options["tokens_per_s"] == 400


async def test_kv_state_says_when_the_engine_gives_no_layout(chat):
    core, _ = chat()
    await core.run_turn(core.start_turn("q"))
    assert core.kv_layout("s1") == (None, "the engine does not say")
    state = core.kv_state("A", ContextFill(t_ns=1, tokens=100, n_ctx=2048))
    assert (state.tokens_in_context, state.n_ctx, state.t_ns) == (100, 2048, 1)
    assert state.kv_bytes is None and state.unknown_why == "the engine does not say"
