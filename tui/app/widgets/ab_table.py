"""ABTable: per-turn deltas between engine A and engine B (B/A ratios)."""

from __future__ import annotations

from textual.widgets import DataTable

from tui.app.format import ms, ratio, tps
from tui.core.metrics import RequestMetrics


class ABTable(DataTable):
    DEFAULT_CSS = """
    ABTable { height: 7; }
    """

    def on_mount(self) -> None:
        self.cursor_type = "row"
        self.add_columns("turn", "metric", "A", "B", "B/A")

    def add_turn(self, turn: int, a: RequestMetrics, b: RequestMetrics) -> None:
        prefill_note = (
            "" if (a.prefill_tps_source == b.prefill_tps_source == "engine") else " (est.)"
        )
        rows = [
            ("TTFT", ms(a.ttft_ms), ms(b.ttft_ms), ratio(a.ttft_ms, b.ttft_ms)),
            (
                "decode tok/s",
                tps(a.decode_tps),
                tps(b.decode_tps),
                ratio(a.decode_tps, b.decode_tps),
            ),
            (
                "prefill tok/s" + prefill_note,
                tps(a.prefill_tps),
                tps(b.prefill_tps),
                ratio(a.prefill_tps, b.prefill_tps),
            ),
        ]
        for metric, va, vb, r in rows:
            self.add_row(f"#{turn}", metric, va, vb, r)
        self.move_cursor(row=self.row_count - 1)
