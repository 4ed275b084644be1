"""Whose hardware goes with a chat, and the decode roofline figure beside it.

The hardware shown with slot A's engine is that engine's ``telemetry`` source in config,
else the one given on the command line (``--telemetry``), else this machine. The roofline
line relates the engine's decode rate to the memory bandwidth it implies (weights read per
token × tok/s) and, where a peak is known, to that peak (tui/telemetry/roofline.py).
"""

from __future__ import annotations

from collections.abc import Callable

from tui.config import Config
from tui.core.metrics import RequestMetrics
from tui.engines.base import EngineInfo, EngineSpec
from tui.engines.inprocess.llama_builds import is_llama_cpp_kind
from tui.telemetry.roofline import peak_source_label, roofline
from tui.telemetry.sampler import THIS_MACHINE, LocalSource, TelemetrySample, TelemetrySampler
from tui.telemetry.sources import LOCAL, HardwareSource, SourceError, open_source, parse_source


def hardware_for(config: Config, engine: str | None, telemetry_source: str | None) -> str:
    """The hardware source shown with ``engine`` in slot A (a source name)."""
    spec = config.engines.get(engine) if engine else None
    if spec is not None and spec.telemetry:
        return spec.telemetry
    return telemetry_source or LOCAL


def roofline_text(
    config: Config,
    spec: EngineSpec,
    info: EngineInfo | None,
    m: RequestMetrics | None,
    sample: TelemetrySample,
) -> str | None:
    """The roofline line for the engine ``spec`` after its answer ``m`` (None without a
    decode rate or a model size)."""
    if m is None or m.decode_tps is None:
        return None
    size = model_bytes(info, spec)
    nvml_peak, peak_source = None, "nvml"
    # the sampled GPU runs this engine: a local llama.cpp offloading layers, or a server on
    # the remote host whose hardware is shown (its NVML peak, from the agent; DCGM and
    # nvitop report none: then config's, or no percentage)
    remote = sample.source != THIS_MACHINE
    on_gpu = spec.url is not None if remote else spec.n_gpu_layers != 0
    if on_gpu and sample.gpu.gpus:
        nvml_peak = sample.gpu.gpus[0].peak_bandwidth_bps
        peak_source = peak_source_label(sample.gpu.gpus[0])
    config_peak = config.telemetry.peak_bandwidth_gbs
    roof = roofline(size, m.decode_tps, nvml_peak, config_peak, peak_source)
    return None if roof is None else roof.describe()


def model_bytes(info: EngineInfo | None, spec: EngineSpec) -> int | None:
    """The model's size in bytes: as the engine reports it, else its GGUF file's."""
    if info is not None:
        size = info.parameters.get("model_bytes")
        if isinstance(size, int):
            return size
    if is_llama_cpp_kind(spec.kind):
        from tui.engines.files.default_model import resolve_model_path

        try:
            return resolve_model_path(spec.model).stat().st_size
        except Exception:
            return None
    return None


class HardwareWatch:
    """The hardware sampler of a chat and whose hardware it reads: slot A's engine's
    (see :func:`hardware_for`). :meth:`follow` switches the source when slot A's engine
    runs elsewhere; nothing connects until the sampler runs (its own thread)."""

    def __init__(
        self,
        config: Config,
        telemetry_source: str | None,
        engine: str | None,
        on_sample: Callable[[TelemetrySample], None],
        notes: list[str] | None = None,
    ) -> None:
        self.config = config
        self.telemetry_source = telemetry_source
        self.key = hardware_for(config, engine, telemetry_source)
        self._notes = notes if notes is not None else []
        t = config.telemetry
        self.sampler = TelemetrySampler(
            interval_s=t.interval_s, gpu=t.gpu, on_sample=on_sample, source=self._open(self.key)
        )

    def _open(self, name: str) -> HardwareSource | None:
        """None (this machine, the sampler's default) for local; nothing connects yet."""
        try:
            spec = parse_source(name)
        except SourceError as e:  # config and --telemetry were checked: only by hand
            self._notes.append(f"{e} — showing this machine")
            return None
        if spec.kind == LOCAL:
            return None
        t = self.config.telemetry
        return open_source(spec, t.interval_s, t.gpu)

    def follow(self, engine: str) -> None:
        """Slot A now uses ``engine``: read its hardware source if that is another."""
        key = hardware_for(self.config, engine, self.telemetry_source)
        if key == self.key:
            return
        self.key = key
        source = self._open(key) or LocalSource(self.config.telemetry.gpu)
        self.sampler.switch_source(source)

    def shows(self, engine: str) -> bool:
        """The hardware read now is the one ``engine`` runs on."""
        return hardware_for(self.config, engine, self.telemetry_source) == self.key
