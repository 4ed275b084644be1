"""``infertop bench --sweep KEY=V1,V2 [--perplexity [FILE]]``: the options and their checks.

Everything that can be wrong is found before anything runs (exit 2): an unknown key, a
bad value, an engine kind that cannot take the key, a missing model file or text file.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from tui.bench.report.shape import BenchReport
from tui.bench.run.plan import BenchError


def add_sweep_arguments(p: argparse.ArgumentParser) -> None:
    a = p.add_argument
    a(
        "--sweep",
        metavar="KEY=V1,V2,...",
        help="measure each value of an engine option as its own point: model (GGUF paths, "
        "'default', or quantization names such as Q8_0,Q4_K_M: variants of the engine's "
        "model, made once and cached), n_threads, n_gpu_layers, spec_type (llama-server's "
        "speculative decoding: none, ngram-simple, draft-simple, ...). Engines: llamacpp, "
        "or llama-server with a model and no url (infertop starts it for each point)",
    )
    a(
        "--compare-spec",
        metavar="TYPE",
        help="the same llama-server (model set, no url) with speculative decoding TYPE "
        "(ngram-simple, draft-simple: the model as its own draft unless options."
        "draft_model, ...) and without: --sweep spec_type=none,TYPE; the report's "
        "speculation table gives acceptance beside tok/s and the speed-up",
    )
    a(
        "--perplexity",
        nargs="?",
        const="default",
        metavar="FILE",
        help="also measure each model's perplexity on FILE (UTF-8 text; default: a "
        "public-domain text shipped with infertop), from its own logits, after the bench",
    )
    a(
        "--perplexity-window",
        type=int,
        default=512,
        metavar="N",
        help="tokens per perplexity window (stride N/2; default 512)",
    )


def perplexity_text(arg: str) -> tuple[str, str]:
    """(text, where it came from) for --perplexity; BenchError when unreadable."""
    from tui.bench.sweep.perplexity import DEFAULT_TEXT_SOURCE, default_text

    if arg == "default":
        return default_text(), DEFAULT_TEXT_SOURCE
    path = Path(arg).expanduser()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise BenchError(f"--perplexity {arg}: cannot read ({e.strerror or e})") from None
    except UnicodeDecodeError:
        raise BenchError(f"--perplexity {arg}: not UTF-8 text") from None
    if not text.strip():
        raise BenchError(f"--perplexity {arg}: the file is empty")
    return text, str(path)


def build_study(args: argparse.Namespace, specs: list[Any]) -> Any:
    """The SweepStudy for these arguments, or None when neither option was given."""
    compare = getattr(args, "compare_spec", None)
    if compare is not None:
        if args.sweep:
            raise BenchError("--compare-spec is a sweep of its own: give it or --sweep, not both")
        args.sweep = f"spec_type=none,{compare}"
    if not args.sweep and args.perplexity is None:
        return None
    from tui.bench.sweep.study import SweepStudy, parse_sweep, plan_points

    sweep = parse_sweep(args.sweep) if args.sweep else None
    text = None
    if args.perplexity is not None:
        if args.perplexity_window < 16:
            raise BenchError(
                f"--perplexity-window must be at least 16 tokens (got {args.perplexity_window})"
            )
        text = perplexity_text(args.perplexity)
    what = f"--sweep {sweep.key}" if sweep else "--perplexity"
    points = plan_points(specs, sweep, what, say=_say)
    return SweepStudy(points, sweep, text, args.perplexity_window)


def _say(message: str) -> None:
    print(f"infertop bench: {message}", file=sys.stderr, flush=True)


def finish_study(study: Any, result: Any, report: BenchReport) -> None:
    """After the bench: perplexities (unless it was stopped), then report["sweep"]."""
    if not result.partial:
        study.measure_perplexities(say=_say)
    elif study.perplexity_text is not None:
        for point in study.points:
            study.perplexity_errors[str(point.model_path)] = "the bench was stopped"
    report["sweep"] = study.section(report)


def print_sweep(report: BenchReport) -> None:
    from tui.bench.report.sweep import sweep_rows

    sweep = report.get("sweep")
    if not sweep:
        return
    head, rows = sweep_rows(sweep)
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
    for line in [head, *rows]:
        print("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip())
