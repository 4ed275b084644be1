"""BenchScreen: run a bench with live progress and charts, and open past reports.

The bench runs in a Textual thread worker on its own asyncio loop (never the UI's loop,
so a slow frame cannot change a measurement). The runner's callbacks post typed
messages; widgets are only touched in the handlers. Reports go to
``reports_dir/<UTC timestamp>/`` (default: the platform data dir, ``infertop/bench``);
every folder there holding a report.json is listed as a past report.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import (
    Button,
    Checkbox,
    DataTable,
    Input,
    Label,
    Markdown,
    ProgressBar,
    Sparkline,
    Static,
)

from tui.bench.report.format import last_request_line
from tui.bench.report.shape import Summary
from tui.bench.run.plan import BenchError, BenchPlan, parse_concurrency
from tui.bench.run.results import BenchResult, BenchUpdate
from tui.bench.run.runner import BenchRunner
from tui.config import Config, ConfigError
from tui.core.safe_text import terminal_label, terminal_safe

SPARK_POINTS = 120


def default_reports_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_data_dir("infertop")) / "bench"


class BenchProgress(Message):
    """A request finished or the bench moved to a new stage (from the bench thread)."""

    def __init__(self, update: BenchUpdate) -> None:
        super().__init__()
        self.update = update


class BenchDone(Message):
    """The bench ended (finished or stopped); its report is in ``out`` unless ``error``."""

    def __init__(
        self, summary: Summary | None, out: Path, partial: bool, error: str | None = None
    ) -> None:
        super().__init__()
        self.summary, self.out, self.partial, self.error = summary, out, partial, error


class BenchScreen(Screen[None]):
    CSS_PATH = "bench.tcss"

    BINDINGS = [
        Binding("escape", "close", "Back", id="bench_close"),
        Binding("ctrl+s", "start", "Start", id="bench_start"),
        Binding("ctrl+x", "stop", "Stop", id="bench_stop"),
        Binding("c", "compare", "Compare with opened", id="bench_compare"),
    ]

    def __init__(self, config: Config | None = None, reports_dir: Path | None = None) -> None:
        """``config``: the engines it offers (the app passes its own; None: the config
        file infertop would load)."""
        super().__init__(id="bench")
        self._config = config
        self.reports_dir = reports_dir
        self.runner: BenchRunner | None = None
        self.ttfts: list[float] = []
        self.rates: list[float] = []
        self.last_out: Path | None = None
        self.opened_report: Path | None = None  # A for the compare key

    @property
    def config(self) -> Config:
        if self._config is None:
            from tui.config import load_config

            self._config = load_config()
        return self._config

    def compose(self) -> ComposeResult:
        cfg = self.config
        with Horizontal(id="form"):
            yield Label("engines", classes="lbl")
            yield Input(cfg.default_engine, id="engines", placeholder="name,name")
            yield Label("runs", classes="lbl")
            yield Input("5", id="runs", type="integer")
            yield Label("max tokens", classes="lbl")
            yield Input(str(min(cfg.generation.max_tokens, 64)), id="max_tokens", type="integer")
            yield Label("concurrency", classes="lbl")
            yield Input("1", id="concurrency")
            yield Checkbox("cold", id="cold")
        with Horizontal(id="buttons"):
            yield Button("Start", id="start", variant="primary")
            yield Button("Stop", id="stop", variant="error", disabled=True)
            yield Button("Back", id="back")
        yield ProgressBar(id="progress", show_eta=False)
        # the status quotes servers and engines (errors): no markup read in it
        yield Static("Set the parameters and press Start.", id="status", markup=False)
        yield Label("TTFT ms per request", classes="lbl")
        yield Sparkline([], id="ttft_spark")
        yield Label("decode tok/s per request", classes="lbl")
        yield Sparkline([], id="tps_spark")
        yield DataTable(id="levels", cursor_type="none")
        with Horizontal(id="bottom"):
            yield DataTable(id="past", cursor_type="row")
            with VerticalScroll(id="viewer"):
                yield Markdown("", id="report_md")

    def on_mount(self) -> None:
        levels = self.query_one("#levels", DataTable)
        levels.add_columns(
            "engine", "level", "ok", "failed", "total tok/s", "η", "TTFT p50 ms", "decode tok/s p50"
        )
        past = self.query_one("#past", DataTable)
        past.add_columns("past reports", "status")
        self.refresh_past()

    # --- past reports ---------------------------------------------------------------
    def reports_root(self) -> Path:
        return self.reports_dir or default_reports_dir()

    def refresh_past(self) -> None:
        past = self.query_one("#past", DataTable)
        past.clear()
        root = self.reports_root()
        found = sorted(root.glob("*/report.json"), reverse=True) if root.is_dir() else []
        for path in found:
            status = "ok"
            try:
                from tui.bench.report.files import load_report

                status = "partial" if load_report(path)["partial"] else "complete"
            except ValueError:
                status = "unreadable"
            # a folder's name is anyone's (a report copied from elsewhere): Text, never
            # read as Rich markup
            past.add_row(_cell(path.parent.name), status, key=str(path.parent))

    @on(DataTable.RowSelected, "#past")
    def open_selected(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is not None:
            self.open_report(Path(event.row_key.value))

    def open_report(self, folder: Path) -> None:
        md = folder / "report.md"
        try:
            text = md.read_text(encoding="utf-8")
        except OSError as e:
            self.notify(f"cannot open {md}: {e.strerror or e}", severity="error")
            return
        # a report names the models and errors servers sent: terminal-safe
        self.query_one("#report_md", Markdown).update(terminal_safe(text))
        self.opened_report = folder

    def action_compare(self) -> None:
        """The opened past report (A) beside the highlighted one (B): CompareScreen."""
        from tui.app.screens.compare import CompareScreen
        from tui.bench.report.files import load_report

        past = self.query_one("#past", DataTable)
        a = self.opened_report
        if a is None or past.row_count == 0:
            self.notify("open a past report (Enter), highlight another, then press c")
            return
        b = Path(str(past.coordinate_to_cell_key(past.cursor_coordinate).row_key.value))
        try:
            self.app.push_screen(CompareScreen((a, load_report(a)), (b, load_report(b))))
        except ValueError as e:
            self.notify(str(e), severity="error")

    # --- running ----------------------------------------------------------------------
    def build_plan(self) -> tuple[BenchPlan, list[Any]]:
        names = [n.strip() for n in self.query_one("#engines", Input).value.split(",") if n.strip()]
        try:
            specs = [self.config.engine(n) for n in names]
        except ConfigError as e:
            raise BenchError(str(e)) from None

        def integer(widget_id: str, what: str) -> int:
            raw = self.query_one(f"#{widget_id}", Input).value.strip()
            if not (raw.isascii() and raw.lstrip("-").isdigit()):
                raise BenchError(f"{what}: {raw!r} is not a whole number")
            return int(raw)

        plan = BenchPlan(
            engines=names,
            runs=integer("runs", "runs"),
            max_tokens=integer("max_tokens", "max tokens"),
            concurrency=parse_concurrency(self.query_one("#concurrency", Input).value),
            cold=self.query_one("#cold", Checkbox).value,
            temperature=self.config.generation.temperature,
            prompt_tokens=64,
        )
        plan.validate()
        return plan, specs

    def action_start(self) -> None:
        if self.runner is not None:
            return
        try:
            plan, specs = self.build_plan()
            from tui.bench.report.atomic import prepare_out_dir

            stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
            out = prepare_out_dir(self.reports_root() / stamp)
        except BenchError as e:
            self.query_one("#status", Static).update(_bold_then("error:", str(e)))
            self.notify(str(e), severity="error")
            return
        from tui.bench.run.environment import environment

        self.ttfts.clear()
        self.rates.clear()
        self.query_one("#levels", DataTable).clear()
        self.runner = BenchRunner(
            plan,
            specs,
            on_update=lambda u: self.post_message(BenchProgress(u)),
            environment=environment(),
        )
        sink = getattr(getattr(self.app, "ledger", None), "sink", None)
        if sink is not None:  # every request the bench sends, in the ledger too
            self.runner.outcomes.add(sink)
        self.query_one("#start", Button).disabled = True
        self.query_one("#stop", Button).disabled = False
        self.query_one("#status", Static).update("starting…")
        runner = self.runner
        self.run_worker(
            lambda: self._bench_thread(runner, out),
            thread=True,
            exclusive=True,
            group="bench",
            exit_on_error=False,
            description="bench",
        )

    def _bench_thread(self, runner: BenchRunner, out: Path) -> None:
        """In the worker thread: its own event loop; results come back as messages."""
        from tui.bench.report.files import (
            CHECKPOINT_BOOT,
            build_report,
            write_report,
            write_report_dict,
        )
        from tui.bench.run.runner import run_bench

        def checkpoint(result: BenchResult) -> None:
            try:
                write_report(result, out, CHECKPOINT_BOOT)
            except OSError:
                pass  # the final write reports the error

        runner.checkpoint = checkpoint
        try:
            result = run_bench(runner)
            report = build_report(result)
            write_report_dict(report, out)
            summary = report["summary"]
        except Exception as e:  # noqa: BLE001 - shown in the UI, the app stays up
            self.post_message(BenchDone(None, out, True, f"{type(e).__name__}: {e}"))
            return
        self.post_message(BenchDone(summary, out, result.partial))

    def action_stop(self) -> None:
        if self.runner is not None:
            self.runner.stop("stopped from the bench screen")
            self.query_one("#status", Static).update("stopping…")

    def action_close(self) -> None:
        self.action_stop()
        self.app.pop_screen()

    @on(Button.Pressed, "#start")
    def _start_pressed(self) -> None:
        self.action_start()

    @on(Button.Pressed, "#stop")
    def _stop_pressed(self) -> None:
        self.action_stop()

    @on(Button.Pressed, "#back")
    def _back_pressed(self) -> None:
        self.action_close()

    def on_bench_progress(self, message: BenchProgress) -> None:
        u = message.update
        bar = self.query_one("#progress", ProgressBar)
        bar.update(total=max(u.total, 1), progress=u.done)
        eta = "—" if u.eta_s is None else f"{u.eta_s:.0f} s"
        text = f"{u.engine} · {u.stage} · {u.done}/{u.total} · ETA {eta}"
        r = u.record
        if r is not None and r.ok and r.phase in ("cold", "warm"):
            m = r.metrics
            if m.ttft_ms is not None:
                self.ttfts.append(m.ttft_ms)
                self.query_one("#ttft_spark", Sparkline).data = self.ttfts[-SPARK_POINTS:]
            if m.decode_tps is not None:
                self.rates.append(m.decode_tps)
                self.query_one("#tps_spark", Sparkline).data = self.rates[-SPARK_POINTS:]
            text += "\n" + last_request_line(r)
        elif r is not None and r.status == "failed":
            text += f"\nlast request failed: {r.error}"
        if u.message:
            text += f"\n{u.message}"
        # errors quote servers: terminal-safe (and the status reads no markup)
        self.query_one("#status", Static).update(terminal_safe(text))

    def on_bench_done(self, message: BenchDone) -> None:
        self.runner = None
        self.last_out = message.out
        self.query_one("#start", Button).disabled = False
        self.query_one("#stop", Button).disabled = True
        status = self.query_one("#status", Static)
        if message.error:
            status.update(_bold_then("bench failed:", message.error))
            self.notify(message.error, severity="error")
            return
        table = self.query_one("#levels", DataTable)
        for e in message.summary["engines"] if message.summary else []:
            if e["error"]:
                why = Text(terminal_label(e["error"], 40))
                table.add_row(_cell(e["name"]), "—", "0", "—", "—", "—", "—", why)
            for lv in e["levels"]:
                med = lv["medians"]
                table.add_row(
                    _cell(e["name"]),
                    _cell(lv["label"]),
                    str(lv["ok"]),
                    str(lv["failed"]),
                    _f(lv["total_tps"]),
                    _f(lv["eta"], 2),
                    _f((med.get("ttft_ms") or {}).get("estimate")),
                    _f((med.get("decode_tps") or {}).get("estimate")),
                )
        word = "PARTIAL report" if message.partial else "report"
        status.update(terminal_safe(f"done: {word} in {message.out}"))
        self.refresh_past()
        self.open_report(message.out)


def _bold_then(head: str, text: str) -> Text:
    """``head`` in bold, then ``text`` (an error: terminal-safe, one line, as it is)."""
    return Text.assemble((head, "bold"), " ", terminal_label(text, 2000))


def _cell(text: object) -> Text:
    """A table cell of text from outside (an engine's name, a folder's): a
    ``DataTable`` reads Rich markup in a ``str`` cell, never in a ``Text``."""
    return Text(terminal_label(text))


def _f(x: float | None, digits: int = 1) -> str:
    return "—" if x is None else f"{x:,.{digits}f}"
