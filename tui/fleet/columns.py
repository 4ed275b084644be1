"""The fleet table's columns: header, width, how a value is shown and sorted, and which
columns stay when the terminal is narrow. Shared by the fleet screen and ``infertop fleet
--once``. What each number means is defined in :mod:`tui.fleet.rows`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tui.core import table
from tui.core.table import CELL_PADDING, DASH, clip, model_text, ms_text, tps_text
from tui.fleet.rows import EndpointRow

Column = table.Column[EndpointRow]


def _num(v: float | None) -> str:
    return DASH if v is None else f"{v:.0f}"


def _gpu_mem(r: EndpointRow) -> str:
    used, total = r.gpu_mem_used_mib, r.gpu_mem_total_mib
    if used is None:
        return DASH
    if total is None:
        return f"{used / 1024:.0f}G"
    return f"{used / 1024:.0f}/{total / 1024:.0f}G"


def _power(v: float | None) -> str:
    if v is None:
        return DASH
    return f"{v:.0f}W" if v < 10_000 else f"{v / 1000:.1f}kW"


def _rate(v: float | None) -> str:
    return DASH if v is None else f"{v:.1f}"


def _jpt(v: float | None) -> str:
    return DASH if v is None else f"{v:.3g}"


def state_text(r: EndpointRow) -> str:
    if not r.up:
        return "down"
    return "up!" if r.error else "up"


def _col(key: str, header: str, width: int, priority: int, fmt: Callable[[Any], str]) -> Column:
    def get(r: EndpointRow) -> Any:
        return getattr(r, key)

    return Column(key, header, width, priority, lambda r: fmt(get(r)), get)


COLUMNS: tuple[Column, ...] = (
    Column("name", "endpoint", 16, 0, lambda r: r.name, lambda r: r.name.lower(), False, True),
    Column("state", "state", 5, 1, state_text, lambda r: (not r.up, bool(r.error)), False),
    Column("kind", "kind", 12, 10, lambda r: r.kind or "?", lambda r: r.kind, False),
    Column("model", "model", 14, 11, lambda r: model_text(r.model), lambda r: r.model, False, True),
    _col("running", "run", 4, 2, _num),
    _col("waiting", "wait", 4, 3, _num),
    _col("kv_cache_pct", "KV%", 4, 5, _num),
    _col("prefix_cache_hit_pct", "pfx%", 4, 8, _num),
    _col("preempt_per_min", "pre/m", 5, 19, _rate),
    _col("spec_accept_pct", "acc%", 4, 20, _num),
    _col("ttft_p50_ms", "TTFT50", 6, 6, ms_text),
    _col("ttft_p90_ms", "TTFT90", 6, 9, ms_text),
    _col("itl_p50_ms", "ITL50", 6, 7, ms_text),
    _col("gen_tps", "tok/s", 6, 4, tps_text),
    Column("gpu_util", "GPU%", 4, 12, lambda r: _num(r.gpu_util_pct), lambda r: r.gpu_util_pct),
    Column("gpu_mem", "GPU mem", 8, 13, _gpu_mem, lambda r: r.gpu_mem_used_mib),
    Column("gpu_power", "power", 6, 14, lambda r: _power(r.gpu_power_w), lambda r: r.gpu_power_w),
    _col("itl_p90_ms", "ITL90", 6, 15, ms_text),
    _col("host_cpu_pct", "CPU%", 4, 16, _num),
    _col("j_per_token", "J/tok", 6, 18, _jpt),
    Column("error", "last error", 16, 17, lambda r: r.error or "", lambda r: r.error, False, True),
)
BY_KEY = {c.key: c for c in COLUMNS}
CAPS = {"name": 28, "model": 32, "error": 200}


def fit_columns(width: int, padding: int = CELL_PADDING) -> list[tuple[Column, int]]:
    """The columns that fit in ``width`` cells (by priority, shown in table order), each
    with its width; spare width goes to the stretchy columns (name, model, error)."""
    return table.fit_columns(COLUMNS, width, padding, CAPS)


def sort_rows(rows: list[EndpointRow], key: str, reverse: bool = False) -> list[EndpointRow]:
    """Rows ordered by column ``key``; rows without a value come last either way, and
    ties keep the name order."""
    return table.sort_rows(sorted(rows, key=lambda r: r.name.lower()), BY_KEY[key], reverse)


def text_table(rows: list[EndpointRow], width: int) -> str:
    """A plain-text table of ``rows`` that fits ``width`` columns (``--once``)."""
    cols = fit_columns(width, padding=1)
    lines = []
    head = []
    for col, w in cols:
        head.append(col.header.rjust(w) if col.numeric else col.header.ljust(w))
    lines.append(" ".join(head).rstrip())
    for r in rows:
        cells = []
        for col, w in cols:
            t = clip(col.text(r), w)
            cells.append(t.rjust(w) if col.numeric else t.ljust(w))
        lines.append(" ".join(cells).rstrip())
    return "\n".join(lines)


def top_clients_text(top: list[tuple[str, float]]) -> str:
    """ "top clients (tokens over the window): alice 12.3k, other 410" (names as the
    proxy labels them: clients choose some; the caller's cell or line is terminal-safe)."""

    def tokens(n: float) -> str:
        return f"{n / 1000:.1f}k" if n >= 1000 else f"{n:.0f}"

    return "top clients (tokens over the window): " + ", ".join(f"{c} {tokens(n)}" for c, n in top)


def detail_text(r: EndpointRow) -> str:
    """Everything about one row on one line (the screen's line under the table)."""
    parts = [r.name, r.kind or "kind unknown"]
    if r.model:
        parts.append(r.model)
    if r.url:
        parts.append(r.url)
    parts.append(("up" if r.up else "DOWN") + (f": {r.error}" if r.error else ""))
    if r.up and r.window_s is not None:
        src = "Prometheus" if r.source == "prometheus" else "scrapes"
        parts.append(f"window {r.window_s:.1f} s ({src})")
    if r.loaded:
        parts.append(f"loaded: {r.loaded}")
    if r.preempt_per_min:
        parts.append(f"{r.preempt_per_min:.1f} preemptions/min")
    if r.spec_accept_pct is not None:
        parts.append(f"draft acceptance {r.spec_accept_pct:.0f}%")
    if r.itl_mean_ms is not None:
        parts.append(f"ITL mean {ms_text(r.itl_mean_ms)}")
    if r.top_clients:
        parts.append(top_clients_text(r.top_clients))
    if r.gpus:
        models = sorted({g.model for g in r.gpus if g.model})
        where = r.hardware or r.gpus[0].host
        parts.append(
            f"{len(r.gpus)} GPU{'s' if len(r.gpus) != 1 else ''} on {where}"
            + (f" ({', '.join(models)})" if models else "")
            + f": util {_num(r.gpu_util_pct)}% mem {_gpu_mem(r)} power {_power(r.gpu_power_w)}"
        )
        if r.j_per_token is not None and r.gpu_energy_j is not None:
            parts.append(
                f"{_jpt(r.j_per_token)} J/token (GPU energy counter "
                f"{r.gpu_energy_j:.0f} J over the window, whole host)"
            )
    elif r.hardware is not None:
        parts.append(f"hardware {r.hardware}: no GPUs reported")
    elif r.gpus is None and r.up:
        parts.append("no GPU source for this host")
    if r.hardware_error:
        parts.append(r.hardware_error)
    if r.host_cpu_pct is not None or r.host_mem_pct is not None:
        parts.append(f"host CPU {_num(r.host_cpu_pct)}% RAM {_num(r.host_mem_pct)}%")
    return clip(" · ".join(parts), 4000)
