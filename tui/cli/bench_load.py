"""``infertop bench``'s open-loop and SLO options: the arrival process of the ``--rate``
level, its ramp and duration limit, and ``--find-capacity``; and the lines the terminal
prints about them (attainment per level with its definition, the capacity found).
"""

from __future__ import annotations

import argparse
from typing import Any

from tui.bench.report.shape import Summary
from tui.core.safe_text import terminal_label


def add_load_arguments(p: argparse.ArgumentParser) -> None:
    a = p.add_argument
    a(
        "--arrival",
        choices=("poisson", "constant", "gamma"),
        help="arrival process of the --rate level and capacity probes (default poisson)",
    )
    a(
        "--burstiness",
        type=float,
        metavar="K",
        help="gamma shape: inter-arrival CV = 1/sqrt(K); 1 = Poisson, lower = burstier "
        "(default 1; with --arrival gamma)",
    )
    a("--ramp-up", type=float, metavar="S", help="raise the rate linearly from 0 over S seconds")
    a(
        "--duration",
        type=float,
        metavar="S",
        help="the --rate level sends for S seconds instead of --runs requests; requests in "
        "flight then get S more seconds, then are cut (counted as not good)",
    )
    a(
        "--find-capacity",
        action="store_true",
        default=None,
        help="search the arrival rate for the highest load whose SLO attainment stays at or "
        "above --attainment (needs --slo)",
    )
    a(
        "--capacity-by",
        choices=("rate", "concurrency"),
        help="what --find-capacity searches: the arrival rate (default) or the number of "
        "users sending back to back",
    )
    a("--attainment", type=float, metavar="F", help="share of good requests (default 0.9)")
    a("--probe-s", type=float, metavar="S", help="seconds each capacity probe sends (default 20)")
    a(
        "--input-len",
        metavar="DIST",
        help="prompt tokens per request: fixed:N, uniform:A,B, normal:MEAN,SD or file:PATH",
    )
    a("--output-len", metavar="DIST", help="output tokens per request (same forms as --input-len)")
    a(
        "--dataset",
        metavar="FILE",
        help="prompts from FILE: a ShareGPT-style JSON array or JSONL "
        "(prompt / conversations / messages)",
    )
    a(
        "--shared-prefix",
        type=int,
        metavar="N",
        help="a system prompt of ~N tokens shared by all requests",
    )
    a(
        "--prefix-cache",
        action="store_true",
        default=None,
        help="ask the engine to reuse cached prefixes (llama-server cache_prompt; "
        "default: ask for none)",
    )
    a(
        "--turns",
        type=int,
        metavar="T",
        help="concurrency levels hold conversations of T turns, each turn's prompt holding "
        "the earlier exchanges",
    )
    a(
        "--capacity-budget",
        type=float,
        metavar="S",
        help="seconds the whole capacity search may take per engine (default 600)",
    )


def load_values(args: argparse.Namespace) -> dict[str, Any]:
    """The plan fields these options set (only those given)."""
    out = {
        "arrival": getattr(args, "arrival", None),
        "burstiness": getattr(args, "burstiness", None),
        "ramp_s": getattr(args, "ramp_up", None),
        "duration_s": getattr(args, "duration", None),
        "find_capacity": getattr(args, "find_capacity", None),
        "attainment": getattr(args, "attainment", None),
        "probe_s": getattr(args, "probe_s", None),
        "capacity_budget_s": getattr(args, "capacity_budget", None),
        "capacity_by": getattr(args, "capacity_by", None),
        "input_len": getattr(args, "input_len", None),
        "output_len": getattr(args, "output_len", None),
        "dataset": getattr(args, "dataset", None),
        "shared_prefix": getattr(args, "shared_prefix", None),
        "prefix_cache": getattr(args, "prefix_cache", None),
        "turns": getattr(args, "turns", None),
    }
    return {k: v for k, v in out.items() if v is not None}


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f} %"


def print_slo_and_capacity(summary: Summary) -> None:
    """Attainment per level (with the definition, once) and each engine's capacity."""
    from tui.bench.stats.slo import slo_definition

    shown: set[str] = set()  # the objectives of the levels shown
    for e in summary["engines"]:
        for lv in e["levels"]:
            g = lv.get("goodput")
            if not g:
                continue
            rps = g["requests_per_s"]
            print(
                f"{e['name']} {lv['label']}: SLO attainment {_pct(g['attainment'])} "
                f"[{_pct(g['attainment_low'])}, {_pct(g['attainment_high'])}] "
                f"({g['good']}/{g['judged']}, {g['failed']} failed, {g['cut']} cut), goodput "
                + ("—" if rps is None else f"{rps:.3g} req/s")
            )
            shown.update(g.get("slo") or ())
        cap = e.get("capacity_search")
        if cap:
            lo, hi = cap["interval"]
            at, unit = cap["target"], cap.get("unit", "req/s")
            text = "none found" if lo is None else f"{lo:g} {unit}"
            print(
                f"{e['name']}: capacity at {_pct(at)} attainment: {text}, interval "
                f"[{'—' if lo is None else f'{lo:g}'}, {'—' if hi is None else f'{hi:g}'}) "
                f"{unit} after {len(cap['probes'])} probes in {cap['search_s']:.0f} s "
                f"({terminal_label(cap['done_because'], 300)})"
            )
            for note in cap["notes"]:
                print(f"  note: {terminal_label(note, 500)}")
    if shown:
        print("SLO: " + slo_definition(shown))
