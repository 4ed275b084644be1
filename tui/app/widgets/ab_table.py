"""ABTable: per-turn deltas between engine A and engine B (B/A ratios)."""

from __future__ import annotations

from textual import events
from textual.widgets import DataTable

from tui.app.format import ms, ratio, tps
from tui.core.metrics import RequestMetrics


class ABTable(DataTable):
    DEFAULT_CSS = """
    ABTable { height: 7; }
    """

    async def _on_idle(self, event: events.Idle) -> None:
        """DataTable re-measures its columns when idle, but keeps rows it rendered before
        that in a cache keyed without the widths, so a frame drawn between ``add_row`` and
        idle can leave rows cut to the old widths: drop those rows once widths change."""
        pending = self._require_update_dimensions or bool(self._updated_cells)
        await super()._on_idle(event)
        if pending:
            self._clear_caches()
            self.refresh()

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
