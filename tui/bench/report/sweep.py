"""report.md's sweep section (and the terminal's sweep table): one row per point."""

from __future__ import annotations

from typing import Any

from tui.bench.report.format import DASH, num, table
from tui.bench.report.shape import BenchReport

MIB = 2**20


def _mib(x: int | None) -> str:
    return DASH if x is None else f"{x / MIB:,.0f}"


def _jpt(r: dict[str, Any]) -> str:
    jpt = r.get("j_per_token")
    if jpt is None:
        return DASH
    return f"{jpt:.3g}" + (" (est.)" if r.get("energy_estimated") else "")


def sweep_rows(sweep: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of the sweep table."""
    with_ppl = sweep.get("perplexity") is not None
    head = [
        "point",
        "model",
        "quant",
        "file MiB",
        "RSS MiB (peak)",
        "GPU MiB",
        "decode tok/s",
        "prefill tok/s",
        "TTFT ms",
        "J/token",
    ] + (["perplexity"] if with_ppl else [])
    rows = []
    for r in sweep["rows"]:
        fp = r.get("footprint") or {}
        rss = _mib(fp.get("rss_bytes"))
        if fp.get("peak_rss_bytes") is not None:
            rss += f" ({_mib(fp['peak_rss_bytes'])})"
        if fp.get("shared"):
            rss += " shared"
        gpu = _mib(fp.get("gpu_bytes")) if fp.get("gpu_bytes") is not None else DASH
        prefill = num(r.get("prefill_tps"))
        if r.get("prefill_estimated") and r.get("prefill_tps") is not None:
            prefill += " (est.)"
        row = [
            r["engine"],
            (r.get("model_path") or DASH).rsplit("/", 1)[-1],
            r.get("quantisation") or DASH,
            _mib(r.get("model_bytes")),
            rss,
            gpu,
            num(r.get("decode_tps")),
            prefill,
            num(r.get("ttft_ms")),
            _jpt(r),
        ]
        if with_ppl:
            row.append(num(r.get("perplexity"), 3) if r.get("perplexity") is not None else DASH)
        if r.get("error"):
            row = row[:6] + ["did not run"] + [DASH] * (len(row) - 7)
        rows.append(row)
    return head, rows


def sweep_markdown(report: BenchReport) -> list[str]:
    """The "Sweep" section; nothing when the bench was not a sweep."""
    sweep = report.get("sweep")
    if not sweep:
        return []
    title = f"## Sweep: {sweep['key']}" if sweep.get("key") else "## Models"
    head, rows = sweep_rows(sweep)
    lines = [title, ""] + table(head, rows)
    notes = [
        "Speeds are the headline level's medians (see above). RSS = the engine process's "
        "resident memory after the last level, model loaded (peak = its high-water mark); "
        "'shared' = the engine ran inside infertop's process. GPU = NVML's memory for that "
        "process (— = none or no NVIDIA GPU). J/token = the headline level's energy ÷ its "
        "output tokens (see Energy per token; (est.): integrated from sampled power)."
    ]
    gpu_notes = {str((r.get("footprint") or {}).get("gpu_note") or "") for r in sweep["rows"]}
    gpu_notes.discard("")
    if gpu_notes:
        notes.append("GPU: " + "; ".join(sorted(gpu_notes)) + ".")
    sources = {str(r.get("model_source") or "") for r in sweep["rows"]} - {"file", ""}
    notes += [f"Model: {s}." for s in sorted(sources)]
    ppl = sweep.get("perplexity")
    if ppl:
        notes.append(
            f"Perplexity: exp(mean negative log-likelihood) of each token given the ones "
            f"before it, from the model's own logits (llama.cpp in-process), on "
            f"{ppl['text_source']}: {ppl.get('text_tokens') or '?'} tokens, "
            f"{ppl['window']}-token windows every {ppl['stride']} tokens, every token but "
            "the first scored once. Lower is better; comparable only on the same text "
            "and tokenizer."
        )
    for r in sweep["rows"]:
        if r.get("perplexity_error"):
            notes.append(f"{r['engine']}: perplexity not measured: {r['perplexity_error']}")
        if r.get("error"):
            notes.append(f"{r['engine']} did not run: {r['error']}")
    return lines + [f"- {n}" for n in notes] + [""]
