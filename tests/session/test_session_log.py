"""The JSONL session log: one record per request, append-only, flushed per request."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from tui.core.events import Failed, Finished, RequestSent, TextChunk, Usage
from tui.core.session import SessionRecorder, read_session, session_record
from tui.core.timeline import RequestTimeline


def timeline(fail: bool = False) -> RequestTimeline:
    tl = RequestTimeline()
    for ev in [
        RequestSent(1_000_000_000),
        TextChunk(1_100_000_000, "Hel", 1),
        TextChunk(1_110_000_000, "lo", 1),
        Usage(1_111_000_000, 5, 2),
        Failed(1_120_000_000, "server went away", "connect")
        if fail
        else Finished(1_120_000_000, "stop"),
    ]:
        tl.add(ev)
    return tl


def test_record_has_every_field_and_round_trips(tmp_path):
    rec = session_record(
        engine="local",
        kind="llamacpp",
        model="SmolLM2",
        messages=[{"role": "user", "content": "hi"}],
        params={"max_tokens": 2},
        timeline=timeline(),
        request_id="r1",
    )
    path = tmp_path / "s.jsonl"
    rec_ = SessionRecorder(path)
    rec_.append(rec)
    rec_.append(
        session_record(
            engine="local",
            kind="llamacpp",
            model="m",
            messages=[{"role": "user", "content": "again"}],
            params={},
            timeline=timeline(fail=True),
        )
    )
    got = read_session(path)
    assert got.bad_lines == [] and len(got.records) == 2
    r0, r1 = got.records
    assert r0["prompt"] == "hi" and r0["text"] == "Hello" and r0["engine"] == "local"
    assert r0["timeline"]["chunks"] == [[100_000_000, "Hel", 1], [110_000_000, "lo", 1]]
    assert r0["t_sent_ns"] == 1_000_000_000  # the clock reading the chunk times are relative to
    assert r0["metrics"]["ttft_ms"] == 100.0 and r0["metrics"]["output_tokens"] == 2
    assert r0["error"] is None and r0["params"] == {"max_tokens": 2}
    assert r1["error"] == "server went away" and r1["text"] == "Hello"
    assert path.read_text().count("\n") == 2


def test_a_crash_loses_at_most_the_request_in_flight(tmp_path):
    """A process that appends one record then dies hard leaves a complete first line."""
    path = tmp_path / "s.jsonl"
    code = textwrap.dedent(f"""
        import os
        from tui.core.session import SessionRecorder
        r = SessionRecorder({str(path)!r})
        r.append({{"timeline": {{}}, "prompt": "done"}})
        f = open({str(path)!r}, "a"); f.write('{{"timeline": {{"chunks": [[1, "x"'); f.flush()
        os._exit(9)  # dies mid-write of the second request
    """)
    proc = subprocess.run([sys.executable, "-c", code], cwd=".", env=None)
    assert proc.returncode == 9
    got = read_session(path)
    assert [r["prompt"] for r in got.records] == ["done"]
    assert got.bad_lines == [2]
    json.loads(path.read_text().splitlines()[0])


def test_a_record_appended_after_a_torn_line_starts_a_new_line(tmp_path):
    """A file whose writer was killed mid-record, appended to again: the torn line stays
    one bad line, and the new record is whole (it was glued onto the torn one)."""
    path = tmp_path / "s.jsonl"
    SessionRecorder(path).append({"timeline": {}, "prompt": "first"})
    with path.open("a", encoding="utf-8") as f:
        f.write('{"timeline": {"chunks": [[1, "x"')  # torn: no closing brace, no newline
    SessionRecorder(path).append({"timeline": {}, "prompt": "after"})
    got = read_session(path)
    assert [r["prompt"] for r in got.records] == ["first", "after"]
    assert got.bad_lines == [2]
