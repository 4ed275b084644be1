"""Where two bench reports were measured, field by field: what differs between them.

Compared: the environment block (CPU, core count, memory, GPUs, OS, host, Python package
versions, measuring discipline), the plan's settings (prompt and output length, runs,
temperature, concurrency levels, ...) and, per compared engine pair, the engine's kind,
spec (the server URL without its port, since test servers get free ports), model,
quantisation, context size, parameters (engine build and version included), the request
controls sent, how its tokens were stamped (per engine, rather than the environment's
kernel probe), and the model file's fingerprint; for two engines of different kinds only
the kind, model file, request controls and stamp sources (the rest means different
things per kind). Measurements that change on every run (load times, PIDs) are not
settings and are left out. A field one report lacks (an older report) shows as
"(not recorded)".
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from tui.bench.report.shape import BenchReport, EngineEntry

NOT_RECORDED = "(not recorded)"
# measured per run, or naming the engine (the pairing already says which engines meet)
SKIP_PLAN = {"engines"}
# per engine instead: stamp_sources says how each engine's tokens were really stamped
# (http_receive_stamps is a probe of the kernel, taken whether or not HTTP was used)
SKIP_ENVIRONMENT = {"stamp_sources", "http_receive_stamps"}
SKIP_SPEC = {"name", "kind"}
SKIP_INFO = {"engine", "kind", "load_ms", "pid", "url"}
# engines of different kinds: their spec and parameters mean different things, so only
# these are compared (with the kind itself)
ACROSS_KINDS = ("model_file", "request_controls", "stamp_sources")
SKIP_PARAMETERS = {"model_load_ms"}


def _without_port(url: Any) -> Any:
    if not isinstance(url, str) or not url:
        return url
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname}{parts.path}"


def _engine_fields(engine: EngineEntry | None, report: BenchReport) -> dict[str, Any]:
    if engine is None:
        return {}
    stamps = ((report.get("environment") or {}).get("stamp_sources") or {}).get(engine.get("name"))
    spec = {k: v for k, v in (engine.get("spec") or {}).items() if k not in SKIP_SPEC}
    if "url" in spec:
        spec["url"] = _without_port(spec["url"])
    info = {k: v for k, v in (engine.get("info") or {}).items() if k not in SKIP_INFO}
    params = info.pop("parameters", None) or {}
    info["parameters"] = {k: v for k, v in params.items() if k not in SKIP_PARAMETERS}
    return {
        "kind": engine.get("kind"),
        "spec": spec,
        "info": info,
        "request_controls": engine.get("request_controls"),
        "model_file": engine.get("model_file", NOT_RECORDED),
        "stamp_sources": stamps,
    }


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _diff(a: Any, b: Any, prefix: str) -> list[dict[str, Any]]:
    """Walk both values together: dictionaries key by key, anything else as one field."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in dict.fromkeys([*a, *b]):
            va, vb = a.get(key, NOT_RECORDED), b.get(key, NOT_RECORDED)
            out += _diff(va, vb, f"{prefix}.{key}")
        return out
    if a == b:
        return []
    return [
        {"field": prefix, "a": a, "b": b, "text": f"{prefix}: {_shown(a)} (A) vs {_shown(b)} (B)"}
    ]


def environment_differences(
    a: BenchReport, b: BenchReport, pairs: list[tuple[str, str]]
) -> list[dict[str, Any]]:
    """Each field that differs, with both values and a one-line ``text``."""
    env_a = {k: v for k, v in (a.get("environment") or {}).items() if k not in SKIP_ENVIRONMENT}
    env_b = {k: v for k, v in (b.get("environment") or {}).items() if k not in SKIP_ENVIRONMENT}
    out = _diff(env_a, env_b, "environment")
    plan_a = {k: v for k, v in (a.get("plan") or {}).items() if k not in SKIP_PLAN}
    plan_b = {k: v for k, v in (b.get("plan") or {}).items() if k not in SKIP_PLAN}
    out += _diff(plan_a, plan_b, "settings")
    by_a = {e.get("name"): e for e in a.get("engines") or []}
    by_b = {e.get("name"): e for e in b.get("engines") or []}
    for ea, eb in pairs:
        label = ea if ea == eb else f"{ea}↔{eb}"
        fa, fb = _engine_fields(by_a.get(ea), a), _engine_fields(by_b.get(eb), b)
        if fa.get("kind") != fb.get("kind"):
            fa = {k: fa.get(k) for k in ("kind", *ACROSS_KINDS)}
            fb = {k: fb.get(k) for k in ("kind", *ACROSS_KINDS)}
        out += _diff(fa, fb, f"engine {label}")
    return out
