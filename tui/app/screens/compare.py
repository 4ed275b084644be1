"""CompareScreen: two bench reports side by side, with the ratios B ÷ A above them.

The comparison (bootstrap intervals: thousands of resamples) is computed in a thread
worker and posted back as a :class:`ComparisonReady` message; widgets are only touched
in its handler. Opened by ``infertop compare A B --ui`` (CompareApp) or from the bench
screen (open a past report, highlight another, press ``c``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Markdown, Static

from tui.bench.compare.markdown import HEAD, row_cells
from tui.bench.compare.ratios import compare_reports
from tui.bench.report.markdown import markdown as report_markdown
from tui.bench.report.shape import BenchReport
from tui.core.safe_text import markup_label, terminal_label, terminal_safe


class ComparisonReady(Message):
    """The comparison of the two reports (from the compare worker thread)."""

    def __init__(self, result: dict[str, Any]) -> None:
        super().__init__()
        self.result = result


class CompareScreen(Screen[None]):
    CSS_PATH = "compare.tcss"

    BINDINGS = [Binding("escape", "back", "Back", id="compare_back")]

    def __init__(self, a: tuple[Path, BenchReport], b: tuple[Path, BenchReport]) -> None:
        super().__init__(id="compare")
        self.a, self.b = a, b
        self.result: dict[str, Any] | None = None

    def compose(self) -> ComposeResult:
        (pa, _), (pb, _) = self.a, self.b
        # the reports' paths and folder names are anyone's (a report from someone else):
        # terminal-safe, and no markup read in them (tui/core/safe_text.py)
        title = f"A: {pa}    B: {pb}    (ratios B ÷ A, 95 % bootstrap)"
        yield Static(terminal_safe(title), id="compare-title", markup=False)
        with VerticalScroll(id="compare-env"):
            yield Static("comparing…", id="compare-warnings", markup=False)
        yield DataTable(id="compare-table", cursor_type="row")
        with Horizontal(id="compare-sides"):
            with VerticalScroll(classes="compare-side", id="side-a") as side_a:
                side_a.border_title = markup_label(f"A: {_report_name(pa)}")
                yield Markdown(terminal_safe(report_markdown(self.a[1])), id="report-a")
            with VerticalScroll(classes="compare-side", id="side-b") as side_b:
                side_b.border_title = markup_label(f"B: {_report_name(pb)}")
                yield Markdown(terminal_safe(report_markdown(self.b[1])), id="report-b")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#compare-table", DataTable).add_columns(*HEAD)
        self.run_worker(
            self._compare,
            thread=True,
            exclusive=True,
            exit_on_error=False,
            group="compare",
            description="compare two bench reports",
        )

    def _compare(self) -> None:
        self.post_message(ComparisonReady(compare_reports([self.a, self.b])))

    def on_comparison_ready(self, message: ComparisonReady) -> None:
        self.result = message.result
        comp = message.result["comparisons"][0]
        table = self.query_one("#compare-table", DataTable)
        for row in comp["rows"]:
            table.add_row(*(Text(terminal_label(cell)) for cell in row_cells(row)))
        diffs = comp["environment_differences"]
        if diffs:
            lines = [
                f"Warning: {len(diffs)} environment field(s) differ (a ratio may show the "
                "set-up, not the engine); scroll for all:"
            ]
            lines += [f"  {d['text']}" for d in diffs]
        else:
            lines = ["Environments match: same machine, versions, model file and settings."]
        lines += [f"  note: {n}" for n in comp["notes"]]
        # a report from someone else names engines and models: terminal-safe
        self.query_one("#compare-warnings", Static).update(terminal_safe("\n".join(lines)))

    def action_back(self) -> None:
        if len(self.app.screen_stack) > 2:
            self.app.pop_screen()
        else:
            self.app.exit()


def _report_name(path: Path) -> str:
    """A report's name: its file's, or its folder's for a ``report.json``."""
    return path.parent.name if path.name == "report.json" else path.name


class CompareApp(App[None]):
    """``infertop compare A B --ui``: the compare screen on its own."""

    def __init__(
        self, path_a: Path, report_a: BenchReport, path_b: Path, report_b: BenchReport
    ) -> None:
        super().__init__()
        self.pair = ((path_a, report_a), (path_b, report_b))

    def on_mount(self) -> None:
        self.push_screen(CompareScreen(*self.pair))
