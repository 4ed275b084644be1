"""ABTable: per-turn deltas between engine A and engine B (B/A ratios).

Each turn's rows say how it ran ("seq" or "conc" in the "run" column) and the table's
title the schedule's reason ("B/A · sequential (shared machine)"): ratios of engines that
ran at once on one machine describe their contention, not the engines. The ratio comes
right after the metric's name, so a narrow pane that cuts the table keeps it.
"""

from __future__ import annotations

from textual import events
from textual.widgets import DataTable

from tui.app.format import had_reasoning, ms, ratio, tps
from tui.core.live import LiveSnapshot
from tui.core.metrics import RequestMetrics
from tui.core.safe_text import markup_label
from tui.core.stats import percentile
from tui.engines.placement import SEQUENTIAL, ABPlan


class ABTable(DataTable[str]):
    DEFAULT_CSS = """
    ABTable { height: 7; }
    """

    rows_added = False  # rows added since DataTable last measured its columns

    def on_idle(self, event: events.Idle) -> None:
        """DataTable re-measures its columns when idle, but keeps rows it rendered before
        that in a cache keyed without the widths, so a frame drawn between ``add_row`` and
        idle can leave rows cut to the old widths: drop those rows once widths change.
        This handler runs before DataTable's (Textual calls each class's, this one first);
        ``call_next`` runs after both, and ``notify_style_update`` is DataTable's public
        way to drop its rendered rows and repaint (what a theme change does)."""
        if self.rows_added:
            self.rows_added = False
            self.call_next(self.notify_style_update)

    def on_mount(self) -> None:
        self.cursor_type = "row"
        self.add_columns("turn", "metric", "B/A", "A", "B", "run")

    def add_turn(self, turn: int, a: RequestMetrics, b: RequestMetrics, plan: ABPlan) -> None:
        """Three rows (TTFT, decode, prefill) for one A/B turn that ran as ``plan`` says,
        and a TTFO row after TTFT where either model thought first (a reasoning model:
        its answer began later than its first token, tui/core/metrics.py)."""
        self.border_title = markup_label(f"B/A · {plan.label}")  # (names a host)
        run = "seq" if plan.schedule == SEQUENTIAL else "conc"
        rows = [
            ("TTFT", ms(a.ttft_ms), ms(b.ttft_ms), ratio(a.ttft_ms, b.ttft_ms)),
            *(
                [("TTFO", ms(a.ttfo_ms), ms(b.ttfo_ms), ratio(a.ttfo_ms, b.ttfo_ms))]
                if had_reasoning(a) or had_reasoning(b)
                else []
            ),
            (
                "decode tok/s",
                tps(a.decode_tps),
                tps(b.decode_tps),
                ratio(a.decode_tps, b.decode_tps),
            ),
            (
                "prefill tok/s",
                prefill_cell(a),
                prefill_cell(b),
                ratio(a.prefill_tps, b.prefill_tps)
                + ("" if a.prefill_tps_source == b.prefill_tps_source else " (mixed)"),
            ),
        ]
        for metric, va, vb, r in rows:
            self.add_row(f"#{turn}", metric, r, va, vb, run)
        self.rows_added = True
        self.move_cursor(row=self.row_count - 1)


def prefill_cell(m: RequestMetrics) -> str:
    """Prefill tok/s labelled by where it came from: the engine's own prompt timing
    ("engine") or prompt tokens ÷ our TTFT ("est.")."""
    if m.prefill_tps is None:
        return tps(None)
    return f"{tps(m.prefill_tps)} ({'engine' if m.prefill_tps_source == 'engine' else 'est.'})"


def ab_ratio_text(
    a: LiveSnapshot | None,
    b: LiveSnapshot | None,
    last: dict[str, RequestMetrics | None],
    how: str = "",
) -> str:
    """B/A ratios in one line: live while both requests stream (TTFT once both have a
    first token; ITL = p50 of each one's recent gaps; decode tok/s so far), else of the
    last finished turn (TTFT, ITL p50, decode tok/s): "B/A now TTFT 1.01× ITL 0.42×
    tok/s 2.40×" / "B/A TTFT …". ``how``: a short tag of the schedule ("seq", "conc"),
    shown after "B/A"."""
    if a is not None and b is not None:
        itl_a = percentile(a.itl_recent, 50) if a.itl_recent else None
        itl_b = percentile(b.itl_recent, 50) if b.itl_recent else None
        vals = (a.ttft_ms, b.ttft_ms, itl_a, itl_b, a.decode_tps, b.decode_tps)
        head = "B/A now"
    else:
        ma, mb = last.get("A"), last.get("B")
        if ma is None or mb is None:
            return ""
        vals = (ma.ttft_ms, mb.ttft_ms, ma.itl_ms_p50, mb.itl_ms_p50, ma.decode_tps, mb.decode_tps)
        head = "B/A"
    ta, tb, ia, ib, da, db = vals
    if how:
        head = head.replace("B/A", f"B/A ({how})", 1)
    return f"{head} TTFT {ratio(ta, tb)} ITL {ratio(ia, ib)} tok/s {ratio(da, db)}"
