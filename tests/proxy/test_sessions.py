"""Agent sessions (tui/proxy/sessions.py): requests that continue one conversation are one
session, by hashes of their leading messages — per client, API and model, no text kept —
and the watch client reads the proxy's verdicts, inside and sessions as untrusted."""

from __future__ import annotations

import json
from typing import Any

from tui.core.events import EngineTruth
from tui.core.metrics import RequestMetrics
from tui.core.verdict import judge
from tui.proxy.sessions import SESSIONS_KEPT, Arrival, SessionBook, chain, messages_of
from tui.proxy.watch import ProxyWatch


def body(messages: list[dict[str, Any]], **extra: Any) -> bytes:
    return json.dumps({"model": "m", "messages": messages, **extra}).encode()


def arrival(
    rid: str,
    b: bytes,
    dialect: str = "openai-chat",
    client: str = "10.0.0.1:5000",
    t: int = 0,
    cached: int | None = None,
    prompt: int = 100,
) -> Arrival:
    msgs = messages_of(b, dialect)
    m = RequestMetrics(
        ttft_ms=50.0,
        ttfr_ms=50.0,
        e2e_ms=500.0,
        prompt_tokens=prompt,
        output_tokens=10,
        decode_ms=450.0,
    )
    truth = EngineTruth(
        prompt_tokens=prompt,
        prompt_eval_tokens=None if cached is None else prompt - cached,
        prompt_ms=40,
        decode_ms=450,
        cached_tokens=cached,
    )
    return Arrival(
        rid, client, dialect, "m", chain(msgs) if msgs else [], t, t + 500_000_000, judge(m, truth)
    )


def test_growing_turns_are_one_session_and_others_are_not() -> None:
    book = SessionBook()
    convo: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]
    for turn in range(4):
        s = book.add(
            arrival(
                f"r{turn}",
                body(convo),
                t=turn * 2_000_000_000,
                cached=turn * 40,
                prompt=100 + 50 * turn,
            )
        )
        assert s is not None and s.turn_count == turn + 1
        convo += [
            {"role": "assistant", "content": f"a{turn}"},
            {"role": "tool", "content": f"t{turn}"},
        ]
    (only,) = book.sessions.values()
    assert [t.growth for t in only.turns] == [None, 50, 50, 50]
    assert [t.cached_tokens for t in only.turns] == [0, 40, 80, 120]
    assert [t.client_ms for t in only.turns] == [None, 1500.0, 1500.0, 1500.0]
    # the same conversation from another address, another model or API: other sessions
    assert book.add(arrival("x1", body(convo[:1]), client="10.0.0.2:6000")) is not only
    assert book.add(arrival("x2", body(convo[:1]), dialect="anthropic")) is not only
    # an edited history (the first message changed) does not continue it
    edited = [{"role": "user", "content": "HI"}, *convo[1:]]
    assert book.add(arrival("x3", body(edited))) is not only
    assert only.turn_count == 4
    # a new connection (another port) of the same client continues it
    assert book.add(arrival("r4", body(convo), client="10.0.0.1:7777")) is only


def test_no_text_is_kept_and_the_book_is_bounded() -> None:
    secret = "my password is hunter2"
    book = SessionBook()
    s = book.add(arrival("a", body([{"role": "user", "content": secret}])))
    assert s is not None
    assert secret not in repr(s.to_dict()) and secret.encode() not in s.last_hash
    for i in range(SESSIONS_KEPT + 50):
        book.add(arrival(f"n{i}", body([{"role": "user", "content": f"q{i}"}])))
    assert len(book.sessions) == SESSIONS_KEPT


def test_what_is_a_conversation() -> None:
    assert messages_of(b"not json", "openai-chat") is None
    assert messages_of(b'{"prompt": "x"}', "openai-completions") is None
    msgs = messages_of(body([{"role": "user", "content": "q"}], system="be brief"), "anthropic")
    assert msgs is not None and msgs[0] == {"role": "system", "content": "be brief"}
    resp = messages_of(
        json.dumps({"input": "hello", "instructions": "x"}).encode(), "openai-responses"
    )
    assert resp == [{"role": "system", "content": "x"}, {"role": "user", "content": "hello"}]
    # the same message, keys in another order: the same hash
    assert chain([{"a": 1, "b": 2}]) == chain([{"b": 2, "a": 1}])


def test_the_watch_reads_verdicts_inside_and_sessions_as_untrusted() -> None:
    w = ProxyWatch("http://127.0.0.1:1")
    row = {
        "id": "r1",
        "client": "c",
        "method": "POST",
        "route": "/v1/chat/completions",
        "model": None,
        "stream": True,
        "state": "done",
    }
    v = judge(
        RequestMetrics(
            ttft_ms=2000.0, ttfr_ms=1.0, e2e_ms=3000.0, output_tokens=5, decode_ms=1000.0
        ),
        EngineTruth(prompt_ms=100, decode_ms=900, raw={"queue_ms": 1800.0}),
    )
    w.take_line(json.dumps({"event": "end", "row": row, "metrics": {}, "verdict": v.to_dict()}))
    inside = {"kind": "vllm", "t": 1.0, "running": 2, "waiting": 1}
    sessions = [
        {"id": "msg-1", "client": "c\x1b]0;x", "turns": 6, "cached_tokens": 500, "x": "y"},
        "bad",
        {"id": 5},
    ]
    w.take_line(json.dumps({"event": "tick", "rows": [], "inside": inside, "sessions": sessions}))
    w.take_line(
        json.dumps(
            {"event": "end", "row": {**row, "id": "r2"}, "verdict": {"kind": "pwned", "text": "x"}}
        )
    )
    snap = w.snapshot()
    assert snap.bad_lines == 0
    assert snap.verdicts["r1"].text.startswith("queued 1.8 s") and "r2" not in snap.verdicts
    assert snap.inside is not None and (snap.inside.running, snap.inside.waiting) == (2.0, 1.0)
    assert [s["id"] for s in snap.sessions] == ["msg-1"] and "x" not in snap.sessions[0]
    assert snap.sessions[0]["turns"] == 6.0
