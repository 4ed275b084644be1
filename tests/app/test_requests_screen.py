"""The requests view (``infertop --watch URL``): snapshots at 80×24 and 120×40 from fixed
rows, sorting, Enter → a request's timeline whose text shows only on ``t`` (and
terminal-safe), and the view live against a real proxy in front of the pace server."""

from __future__ import annotations

import asyncio
import copy
import re
import threading
from typing import Any

import httpx
import pytest

from tests.app.app_support import SYNTH, gen
from tests.app.screen_text import screen_text
from tests.support import pace_server
from tui.app.messages import TelemetrySampled
from tui.app.screens.request_timeline import HIDDEN, RequestTimelineScreen
from tui.app.screens.requests import RequestsScreen
from tui.app.widgets.requests_table import RequestsTable
from tui.proxy.rows import RequestRow
from tui.proxy.server import ProxyConfig, ProxyThread
from tui.proxy.watch import WatchSnapshot
from tui.telemetry.devices.nvml import GpuSample, NvmlSample
from tui.telemetry.sampler import TelemetrySample
from tui.telemetry.system import SystemSample

# the GPU box's hardware, as `--telemetry ssh://gpu-box` brings it (two H200s)
BOX = TelemetrySample(
    0.0,
    SystemSample(cpu_percent=41.0, per_core=[41.0], ram_used=96 * 2**30, ram_total=2**40,
                 rss_bytes=None, rss_pid=None),
    NvmlSample("ok", "", [
        GpuSample(i, "NVIDIA H200", util_percent=u, mem_used=m * 2**30, mem_total=141 * 2**30,
                  power_w=p)
        for i, (u, m, p) in enumerate(((97.0, 120, 612.0), (3.0, 1, 77.0)))
    ]),
    source="gpu-box via ssh",
)  # fmt: skip


def _row(i: int, state: str, **kw: Any) -> RequestRow:
    base: dict[str, Any] = dict(
        id=f"r-{i}",
        client=f"10.0.0.{i}:5{i:04d}",
        method="POST",
        route="/v1/chat/completions" if i % 3 else "/api/chat",
        model="smollm2:135m" if i % 2 else "SmolLM2-135M-Instruct.Q4_1.gguf",
        stream=True,
        state=state,
        status=200,
        age_ms=1000.0 * i + 250,
        prompt_tokens=30 + i,
        output_tokens=10 * i,
        ttft_ms=120.0 + i,
        tps=90.0 - i,
        itl_p50_ms=11.0 + i / 10,
    )
    base.update(kw)
    base.setdefault("ttfo_ms", base["ttft_ms"])  # TTFO is TTFT where nothing was reasoning
    return RequestRow(**base)


ROWS = [
    _row(1, "prefill", status=None, output_tokens=0, ttft_ms=None, tps=None, itl_p50_ms=None,
         prompt_tokens=None),
    _row(2, "decoding", output_estimated=True, prompt_tokens=None),
    _row(3, "decoding"),
    _row(4, "done", e2e_ms=900.0, ttfo_ms=377.0, reasoning_tokens=22),  # thought first
    _row(5, "failed", status=503, error="HTTP 503: the server is overloaded", output_tokens=0,
         ttft_ms=None, tps=None, itl_p50_ms=None),
    _row(6, "cancelled", error="the client disconnected: its upstream request was cancelled"),
    _row(7, "done", stream=False, ttft_ms=None, e2e_ms=2100.0),
    _row(8, "done", model="\x1b]52;c;cGF3bmVk\x07evil", e2e_ms=800.0),
]  # fmt: skip
SERIES = {
    "ttft": [120.0, 140.0, 118.0, 130.0, 125.0, 160.0],
    "itl": [11.0, 11.4, 12.0, 11.2, 11.8],
    "decode": [88.0, 91.0, 86.0, 90.0, 89.0],
    "prefill": [170.0, 180.0],
    "rate": [0.0, 90.0, 180.0, 270.0, 260.0, 175.0, 88.0],
}
DETAIL = {
    "row": ROWS[3].to_json(),
    "metrics": {
        "ttft_ms": 124.0, "ttfr_ms": 121.0, "e2e_ms": 900.0, "itl_token_estimated": False,
        "tpot_ms": 11.3, "decode_tps": 86.0, "prefill_tps": 175.0, "prefill_tps_source": "engine",
        "prompt_tokens": 34, "output_tokens": 40, "output_tokens_source": "usage",
        "content_chunks": 40, "prefill_ms": 118.0, "decode_ms": 455.0, "engine_prefill_ms": 118.0,
        "engine_decode_tps": 87.0, "ttft_minus_engine_prefill_ms": 6.0,
        "decode_tps_vs_engine": 0.989, "finish_reason": "stop", "error": None,
        "itl_ms_p50": 11.4, "itl_ms_p90": 12.9,
        "ttfo_ms": 377.0, "thinking_ms": 253.0, "reasoning_tokens": 22,
        "reasoning_tokens_source": "usage", "answer_tokens": 18, "answer_tokens_estimated": False,
        "reasoning_tps": 87.0, "answer_tps": 85.5,
    },
    "stamp_source": "kernel receive time (SO_TIMESTAMPNS)",
    "forward_delay_ms": 0.21,
    "truth_note": None,
    "note": None,
    "timeline_kept": True,
    # 22 reasoning chunks (the proxy adds a chunk's part where it is not answer text),
    # 16 of answer, a tool call of 2
    "chunks": [
        [124_000_000 + 11_500_000 * i, None]
        + (["reasoning"] if i < 22 else ["tool"] if i >= 38 else [])
        for i in range(40)
    ],
}  # fmt: skip
TEXT = {
    "kept": True,
    "request": "user: What is prefill?",
    "response": "Prefill reads the prompt\x1b[2J\x1b]0;owned\x07 in one pass.",
    "request_cut": False,
}


class FixedFeed:
    """Always the same rows; the detail as above (and its text only when asked)."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, bool]] = []
        self.started = self.stopped = False

    def start(self) -> None:
        self.started = True

    def stop(self) -> None:
        self.stopped = True

    def snapshot(self) -> WatchSnapshot:
        return WatchSnapshot(
            rows=copy.deepcopy(ROWS),
            status="attached",
            attached=True,
            info={
                "upstream": "http://127.0.0.1:8080",
                "kind": "llama-server",
                "listen": "http://127.0.0.1:8800",
            },  # fmt: skip
            totals={"started": 8, "ended": 5, "failed": 1, "cancelled": 1, "other": 12},
            series=copy.deepcopy(SERIES),
            version=1,
        )

    def detail(self, rid: str, with_text: bool = False) -> dict[str, Any]:
        self.asked.append((rid, with_text))
        d = copy.deepcopy(DETAIL)
        if with_text:
            d["text"] = dict(TEXT)
        return d


def _app(make_config, build_app, feed: Any):  # type: ignore[no-untyped-def]
    return build_app(make_config('default_engine = "synth"\n' + gen() + SYNTH), watch=feed)


async def _shown(pilot, wait_for) -> None:  # type: ignore[no-untyped-def]
    app = pilot.app
    await wait_for(
        pilot,
        lambda: isinstance(app.screen, RequestsScreen) and app.screen.table.row_count > 0,
    )
    await pilot.pause(0.1)


def _table(app) -> RequestsTable:  # type: ignore[no-untyped-def]
    return app.screen.query_one(RequestsTable)


def _ids(app) -> list[str]:  # type: ignore[no-untyped-def]
    return [r.id for r in _table(app).rows]


def test_requests_80x24(snap_compare, make_config, build_app, wait_for):
    app = _app(make_config, build_app, FixedFeed())
    assert snap_compare(app, terminal_size=(80, 24), run_before=lambda p: _shown(p, wait_for))


def test_requests_120x40(snap_compare, make_config, build_app, wait_for):
    app = _app(make_config, build_app, FixedFeed())

    async def run(pilot) -> None:  # type: ignore[no-untyped-def]
        await _shown(pilot, wait_for)
        app.screen.post_message(TelemetrySampled(BOX))  # --telemetry ssh://gpu-box
        await pilot.press("down", "down", "down")  # the line under the table follows
        await pilot.pause(0.1)

    assert snap_compare(app, terminal_size=(120, 40), run_before=run)


def test_timeline_120x40_text_hidden(snap_compare, make_config, build_app, wait_for):
    app = _app(make_config, build_app, FixedFeed())

    async def run(pilot) -> None:  # type: ignore[no-untyped-def]
        await _shown(pilot, wait_for)
        await pilot.press("down", "down", "down", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RequestTimelineScreen))
        await wait_for(pilot, lambda: app.screen.metrics is not None)
        await pilot.pause(0.1)

    assert snap_compare(app, terminal_size=(120, 40), run_before=run)


async def test_sorting_opening_and_the_text_only_on_request(make_config, build_app, wait_for):
    feed = FixedFeed()
    app = _app(make_config, build_app, feed)
    async with app.run_test(size=(120, 40)) as pilot:
        await _shown(pilot, wait_for)
        screen = app.screen
        assert feed.started and app.chat.host("A").state == "idle"  # no engine loaded
        assert _ids(app) == [f"r-{i}" for i in range(1, 9)]  # newest first
        while screen.sort_key != "tps":
            await pilot.press("s")
        tps = [r.tps for r in _table(app).rows]
        known = [v for v in tps if v is not None]
        assert known == sorted(known, reverse=True) and tps[-1] is None
        await pilot.press("r")
        assert [r.tps for r in _table(app).rows if r.tps is not None] == sorted(known)
        await pilot.press("f")
        assert screen.sort_key == "age_ms" and _ids(app)[0] == "r-1"
        app.screen.post_message(TelemetrySampled(BOX))
        await pilot.pause(0.1)
        text = screen_text(app)
        assert "in flight" in text and "llama-server http://127.0.0.1:8080" in text
        assert "hardware gpu-box: CPU 41% RAM 96.0G GPU0 97% 120/141G 612W GPU1 3%" in text
        assert "\x1b" not in text and "\x07" not in text  # a model named with OSC 52
        # Enter: the highlighted request's timeline; its text is not fetched
        await pilot.press("down", "down", "down", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RequestTimelineScreen))
        tl = app.screen
        await wait_for(pilot, lambda: tl.metrics is not None)
        assert feed.asked == [("r-4", False)]
        text = screen_text(app)
        assert "TTFT 124 ms" in text and "engine prefill 118 ms" in text
        assert "Text hidden" in text and "prefill?" not in text
        # t: now it is fetched and shown, made safe for the terminal
        await pilot.press("t")
        await wait_for(pilot, lambda: tl.text_shown)
        assert feed.asked[-1] == ("r-4", True)
        text = screen_text(app)
        assert "user: What is prefill?" in text and "␛[2J␛]0;owned␇" in text
        await pilot.press("escape")
        assert isinstance(app.screen, RequestsScreen)
    assert feed.stopped
    assert HIDDEN.startswith("Text hidden")


@pytest.fixture
def live_proxy():  # type: ignore[no-untyped-def]
    port, server, stop = pace_server.start_in_thread(
        pace_server.PaceConfig(interval_ms=10, ttft_ms=20, tokens=16)
    )
    proxy = ProxyThread(ProxyConfig(upstream=f"http://127.0.0.1:{port}", listen_port=0))
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.stop()
        stop()


async def test_the_view_live_in_front_of_a_real_proxy(
    live_proxy, make_config, build_app, wait_for
) -> None:
    """Other clients' requests appear, stream and end in the table; Enter on one shows
    its timeline fetched from the proxy."""
    app = _app(make_config, build_app, live_proxy.url)

    def clients() -> None:
        body = {"model": "pace", "stream": True, "max_tokens": 150, "messages": []}
        ts = [
            threading.Thread(
                target=httpx.post, args=(live_proxy.url + "/v1/chat/completions",),
                kwargs={"json": body, "timeout": 30},
            )
            for _ in range(3)
        ]  # fmt: skip
        for t in ts:
            t.start()
        for t in ts:
            t.join()

    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.screen
        assert isinstance(screen, RequestsScreen)
        await wait_for(pilot, lambda: screen.snapshot is not None and screen.snapshot.attached, 30)
        worker = threading.Thread(target=clients)
        worker.start()
        await wait_for(pilot, lambda: sum(r.state == "decoding" for r in screen.rows) == 3, 30)
        assert "decoding" in screen_text(app)
        await wait_for(pilot, lambda: sum(r.state == "done" for r in screen.rows) == 3, 30)
        worker.join()
        assert all(r.output_tokens == 150 for r in screen.rows)
        assert screen.snapshot.series["decode"] and "3 done" in screen_text(app)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RequestTimelineScreen))
        await wait_for(pilot, lambda: app.screen.metrics is not None, 30)
        assert app.screen.metrics.output_tokens == 150


class PlainFeed(FixedFeed):
    """The same rows, none of them a reasoning model's (TTFO is TTFT in every one)."""

    def snapshot(self) -> WatchSnapshot:
        snap = super().snapshot()
        for r in snap.rows:
            r.ttfo_ms, r.reasoning_tokens = r.ttft_ms, None
        return snap


async def test_the_ttfo_column_shows_only_when_a_row_reasoned(make_config, build_app, wait_for):
    for feed, shown in ((PlainFeed(), False), (FixedFeed(), True)):
        app = _app(make_config, build_app, feed)
        async with app.run_test(size=(120, 40)) as pilot:
            await _shown(pilot, wait_for)
            keys = [c.key for c, _ in _table(app).columns]
            assert ("ttfo_ms" in keys) == shown and "ttft_ms" in keys
            if shown:
                row = next(i for i, r in enumerate(_table(app).rows) if r.reasoning_tokens)
                assert _table(app).cell_text(row, "ttfo_ms") == "377ms"


class ThinkingUpstream:
    """An OpenAI chat server whose answer streams ``reasoning_content`` first (as vLLM
    with a reasoning parser and llama-server send it), then content, then a tool call:
    a stand-in for a reasoning model, which does not run here (the embedded SmolLM2 does
    not think). Built on the pace server's HTTP helpers; one request per connection."""

    FRAMES = (
        [{"role": "assistant", "content": ""}]
        + [{"reasoning_content": w} for w in ("Prefill ", "is ", "one ", "pass; ", "decode ")]
        + [{"content": w} for w in ("Decode ", "is ", "memory-bound.")]
        + [
            {"tool_calls": [{"index": 0, "id": "c1", "type": "function",
                             "function": {"name": "lookup", "arguments": ""}}]},
            {"tool_calls": [{"index": 0, "function": {"arguments": '{"q": 1}'}}]},
        ]
    )  # fmt: skip

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        started = threading.Event()
        ports: list[int] = []

        async def serve() -> None:
            server = await asyncio.start_server(self._conn, "127.0.0.1", 0)
            ports.append(server.sockets[0].getsockname()[1])
            started.set()

        self.thread = threading.Thread(
            target=lambda: (self.loop.run_until_complete(serve()), self.loop.run_forever()),
            daemon=True,
        )
        self.thread.start()
        assert started.wait(10)
        self.port = ports[0]

    async def _conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        req = await pace_server.read_request(reader)
        if req is not None:
            writer.write(pace_server.response_head("200 OK", "text/event-stream", None, False))
            for i, delta in enumerate(self.FRAMES):
                finish = "tool_calls" if i == len(self.FRAMES) - 1 else None
                choice = {"index": 0, "delta": delta, "finish_reason": finish}
                frame = {"id": "t1", "object": "chat.completion.chunk", "choices": [choice]}
                writer.write(pace_server.chunk(pace_server.sse(frame)))
                await writer.drain()
                await asyncio.sleep(0.005)
            writer.write(pace_server.chunk(b"data: [DONE]\n\n") + pace_server.chunk(b""))
            await writer.drain()
        writer.close()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


async def test_a_reasoning_request_through_a_real_proxy(make_config, build_app, wait_for):
    """A client's streamed answer that thinks, then answers, then calls a tool, read by a
    real proxy: its row and timeline say TTFO, the reasoning tokens, and which chunks were
    reasoning and which the tool call."""
    upstream = ThinkingUpstream()
    proxy = ProxyThread(ProxyConfig(upstream=f"http://127.0.0.1:{upstream.port}", listen_port=0))
    proxy.start()
    try:
        app = _app(make_config, build_app, proxy.url)
        async with app.run_test(size=(120, 40)) as pilot:
            screen = app.screen
            assert isinstance(screen, RequestsScreen)
            await wait_for(pilot, lambda: screen.snapshot is not None and screen.snapshot.attached)
            body = {"model": "thinker", "stream": True, "messages": []}
            r = await asyncio.to_thread(
                httpx.post, proxy.url + "/v1/chat/completions", json=body, timeout=30
            )
            assert r.status_code == 200 and "reasoning_content" in r.text
            await wait_for(pilot, lambda: [x.state for x in screen.rows] == ["done"], 30)
            row = screen.rows[0]
            assert row.reasoning_tokens == 5 and row.ttfo_ms is not None
            assert row.ttft_ms is not None and row.ttfo_ms > row.ttft_ms
            assert "5 of them reasoning · TTFO" in screen_text(app)
            await pilot.press("enter")
            await wait_for(pilot, lambda: isinstance(app.screen, RequestTimelineScreen))
            await wait_for(pilot, lambda: app.screen.metrics is not None, 30)
            await pilot.pause(0.1)
            text = screen_text(app)
            assert re.search(r"chunks: 1–5 reasoning · 6–8 answer · 9(–\d+)? tool call", text)
            assert "TTFO " in text and " · reasoning 5 tok (" in text
    finally:
        proxy.stop()
        upstream.stop()
