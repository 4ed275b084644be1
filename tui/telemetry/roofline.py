"""The decode roofline line: bandwidth achieved by streaming the weights once per token.

achieved_bandwidth (bytes/s) = model_bytes × decode tok/s. For a dense model each decoded
token reads every weight once, so this is the memory traffic decode needs (KV-cache reads
excluded: it is a lower bound of traffic, an estimate, and labelled so). share = achieved /
peak, where peak is the configured ``telemetry.peak_bandwidth_gbs``, else the GPU's: NVML's
(bus width × memory clock × 2) or, for Apple Silicon, the chip's from the table of Apple
chips (tui/telemetry/devices/apple_chips.py, each figure with its source).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Roofline:
    achieved_bps: float
    peak_bps: float | None
    peak_source: str | None  # "nvml" | "Apple chip table (M1 Pro)" | "config" | None

    @property
    def share(self) -> float | None:
        return self.achieved_bps / self.peak_bps if self.peak_bps else None

    def describe(self) -> str:
        text = f"decode reads ≈{self.achieved_bps / 1e9:.2f} GB/s (weights × tok/s, est.)"
        share = self.share
        if share is not None and self.peak_bps:
            peak = f"{self.peak_bps / 1e9:.0f} GB/s peak ({self.peak_source})"
            text += f" = {100 * share:.1f}% of {peak}"
        else:
            text += "; peak unknown (set telemetry.peak_bandwidth_gbs)"
        return text


def roofline(
    model_bytes: int | None,
    decode_tps: float | None,
    nvml_peak_bps: float | None = None,
    config_peak_gbs: float | None = None,
    gpu_peak_source: str = "nvml",
) -> Roofline | None:
    """The roofline for one decode speed; None when model size or speed is unknown.
    ``nvml_peak_bps``: the GPU's peak (NVML's, or Apple's chip table's: then
    ``gpu_peak_source`` names it)."""
    if not model_bytes or not decode_tps or decode_tps <= 0:
        return None
    if config_peak_gbs:
        peak, source = config_peak_gbs * 1e9, "config"
    elif nvml_peak_bps:
        peak, source = nvml_peak_bps, gpu_peak_source
    else:
        peak, source = None, None
    return Roofline(model_bytes * decode_tps, peak, source)


def peak_source_label(gpu: Any) -> str:
    """How the roofline names a GPU's peak: "nvml", or "Apple chip table (M1 Pro)"."""
    if getattr(gpu, "vendor", "nvidia") == "apple":
        from tui.telemetry.devices.apple_chips import chip_name

        chip = chip_name(getattr(gpu, "name", "")) or "?"
        return f"Apple chip table ({chip})"
    return "nvml"
