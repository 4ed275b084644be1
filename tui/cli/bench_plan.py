"""``infertop bench``'s command line made into what it runs: the plan (command line over
preset over defaults) and the engines (config names, ``--url`` servers, or the default)."""

from __future__ import annotations

import argparse
from typing import Any

from tui.bench.run.plan import BenchError, BenchPlan, parse_concurrency, parse_slo
from tui.cli.bench_load import load_values


def build_plan(args: argparse.Namespace, engines: list[str]) -> BenchPlan:
    """Command line over preset over defaults; BenchError on bad values."""
    from tui.bench.run.plan import preset_values

    values: dict[str, Any] = preset_values(args.preset) if args.preset else {}
    explicit = {
        "runs": args.runs,
        "warmup": args.warmup,
        "rate": args.rate,
        "prompt_tokens": args.prompt_tokens,
        "max_tokens": args.max_tokens,
        "temperature": args.temperature,
        "cold": args.cold,
        "workers": args.workers,
        **load_values(args),
    }
    if args.concurrency is not None:
        explicit["concurrency"] = parse_concurrency(args.concurrency)
    if args.slo is not None:
        explicit["slo"] = parse_slo(args.slo)
    if getattr(args, "depth", None) is not None:
        from tui.bench.run.depth import parse_depths

        explicit["depths"] = parse_depths(args.depth)
    values.update({k: v for k, v in explicit.items() if v is not None})
    plan = BenchPlan(engines=engines, preset=args.preset, **values)
    plan.validate()
    return plan


def resolve_engines(args: argparse.Namespace, cfg: Any) -> list[Any]:
    """EngineSpecs from --engine names (config), --url, or the config's default engine.

    A --url server's kind is detected exactly as ``infertop run --url`` does, so a
    llama-server keeps ``cache_prompt``, ``ignore_eos`` and its ``timings``."""
    from urllib.parse import urlparse

    from tui.engines.base import EngineError
    from tui.engines.kinds import find_kind, kind_names
    from tui.engines.servers.detect import spec_from_url
    from tui.transport.access import redact_url

    specs = []
    for name in dict.fromkeys(args.engine or []):
        specs.append(cfg.engine(name))
    for url in dict.fromkeys(args.url or []):
        parsed = urlparse(url)
        shown = redact_url(url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise BenchError(f"--url {shown!r}: expected http(s)://HOST:PORT")
        try:
            specs.append(spec_from_url(url, verify_tls=not args.insecure))
        except EngineError as e:
            raise BenchError(f"--url {shown}: {e}") from None
    if not specs:
        specs.append(cfg.engine(cfg.default_engine))
    for spec in specs:
        if find_kind(spec.kind) is None:
            known = ", ".join(kind_names())
            raise BenchError(f"engine {spec.name!r}: unknown kind {spec.kind!r} ({known})")
    return specs
