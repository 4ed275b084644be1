"""Bench reports in a folder: report.json, report.csv, report.md and SVG plots.

report.json holds everything: the plan, the environment, each engine's spec and info,
every request's timeline and metrics, and the summary (tui.bench.stats.aggregate). The other
files are derived from that same dictionary, so they agree with it. Every file is
written atomically; a bench that was stopped writes ``"partial": true`` and says so at
the top of report.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import cast

from tui.bench.report.atomic import write_atomic
from tui.bench.report.check import report_problem
from tui.bench.report.csv import csv_text
from tui.bench.report.markdown import markdown
from tui.bench.report.model_file import model_file
from tui.bench.report.plots import plots
from tui.bench.report.shape import BenchReport, EngineEntry
from tui.bench.run.records import finite
from tui.bench.run.results import BenchResult
from tui.bench.stats.aggregate import summarize_result
from tui.bench.stats.samples import N_BOOT
from tui.bench.stats.why import spec_levels, twin_baselines, verdicts

SCHEMA = "infertop.bench/1"
FILES = ("report.json", "report.csv", "report.md")


def build_report(result: BenchResult, n_boot: int = N_BOOT) -> BenchReport:
    """The report dictionary. Records come finite from RequestRecord.to_dict (and are
    not walked again: they hold every chunk stamp); the rest is made finite here."""
    engines: list[EngineEntry] = []
    baselines = twin_baselines(result.engines)
    for run in result.engines:
        records = run.records()
        why = verdicts(records, run.info, baselines.get(run.name))
        engines.append(
            {
                "name": run.name,
                "kind": run.kind,
                "spec": finite(run.spec),
                "info": finite(run.info),
                "model_file": model_file(run.info),
                "request_controls": dict(run.controls),
                "records": [
                    {**r.to_dict(), "verdict": finite(why[id(r)].to_dict())} for r in records
                ],
                "speculation": finite(spec_levels(records, baselines.get(run.name))),
            }
        )
    return {
        "schema": SCHEMA,
        "partial": result.partial,
        "partial_reason": result.partial_reason,
        "started_at": result.started_at,
        "finished_at": result.finished_at,
        "plan": finite(result.plan.to_dict()),
        "environment": finite({**result.environment, "stamp_sources": stamp_sources(result)}),
        "energy_source": result.energy_source,
        "own_cpu": finite(result.own_cpu) if result.own_cpu else None,
        "engines": engines,
        "summary": finite(summarize_result(result, n_boot)),
    }


def stamp_sources(result: BenchResult) -> dict[str, list[str]]:
    """Per engine, how its requests' stamps were taken (each distinct way, as recorded)."""
    return {
        run.name: sorted(
            {r.timeline.stamp_source for r in run.records() if r.timeline.stamp_source}
        )
        for run in result.engines
    }


CHECKPOINT_BOOT = 200  # resamples in the reports written while the bench still runs


def write_report(result: BenchResult, out: Path, n_boot: int = N_BOOT) -> list[Path]:
    """Write every report file into ``out`` (which must exist); return their paths."""
    return write_report_dict(build_report(result, n_boot), out)


def write_report_dict(report: BenchReport, out: Path) -> list[Path]:
    """Write the files of an already built report (see :func:`build_report`)."""
    written: list[Path] = []
    # JSON last: a reader that sees the new report.json also finds its companions.
    for name, text in (("report.csv", csv_text(report)), ("report.md", markdown(report))):
        write_atomic(out / name, text)
        written.append(out / name)
    for name, svg in plots(report).items():
        write_atomic(out / name, svg)
        written.append(out / name)
    write_atomic(out / "report.json", _json_bytes(report))
    written.append(out / "report.json")
    return written


def _json_bytes(report: BenchReport) -> bytes:
    """Compact UTF-8 JSON, one line; orjson when installed (C speed: reports hold every
    chunk stamp, and indenting tripled the file: 21 MB for 512 requests of 256 tokens).
    ``jq . report.json`` shows it indented."""
    try:
        import orjson
    except ImportError:
        text = json.dumps(report, ensure_ascii=False, separators=(",", ":"))
        return text.encode("utf-8") + b"\n"
    return orjson.dumps(report, option=orjson.OPT_NON_STR_KEYS) + b"\n"


def load_report(path: Path) -> BenchReport:
    """Read a report.json (or the folder holding one); ValueError with a one-line reason.
    What ``compare`` reads is checked (tui/bench/report/check.py); the rest is taken as
    infertop writes it (a report that lacks it fails where it is shown)."""
    p = path / "report.json" if path.is_dir() else path
    try:
        data = json.loads(p.read_bytes())
    except OSError as e:
        raise ValueError(f"{p}: cannot read ({e.strerror or e})") from None
    except RecursionError:
        raise ValueError(f"{p}: not valid JSON (nested too deeply)") from None
    except ValueError as e:  # JSONDecodeError, bad UTF-8, an integer of 4300+ digits
        raise ValueError(f"{p}: not valid JSON ({' '.join(str(e).split())[:120]})") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise ValueError(f"{p}: not an infertop bench report")
    why = report_problem(data)
    if why is not None:
        raise ValueError(f"{p}: not a readable bench report: {why}")
    return cast(BenchReport, data)
