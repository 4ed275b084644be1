"""Energy per token in a bench (definitions: tui/core/energy.py).

While the bench runs, one hardware source is sampled in its own thread (2 Hz) into an
:class:`~tui.telemetry.energy_track.EnergyTrack`: ``--energy SOURCE``, else the source the
engines' ``telemetry`` names when they all name the same one, else this machine. The
energy is computed when a report is built, from the requests' own stamps:

- per level: E over the level's window (first request sent → last stream ended) ÷ the
  output tokens of its ok requests → ``j_per_token``, ``tokens_per_j``, and each domain
  (GPU, CPU package) with its source;
- per request, only where requests ran alone (a concurrency-1 level, cold starts): E over
  the request's E2E window ÷ its output tokens; their median is ``j_per_token_median``.
  Requests running at once share the device, so they get no figure of their own.

Sampling adds no request to the engine and runs outside the measured requests' path (a
thread reading NVML/sysfs twice a second).
"""

from __future__ import annotations

from typing import Any

from tui.bench.run.records import LevelRun
from tui.core.energy import EnergyUse
from tui.core.stats import median


class BenchEnergy:
    """The sampler behind a bench's energy figures (``start``/``stop`` around the run)."""

    def __init__(
        self, source_text: str, interval_s: float = 0.5, gpu: bool = True, source: Any = None
    ) -> None:
        """``source``: a HardwareSource to read instead of opening ``source_text``'s."""
        from tui.telemetry.sampler import TelemetrySampler
        from tui.telemetry.sources import open_source, parse_source

        if source is None:
            spec = parse_source(source_text)  # SourceError for a bad one: the caller says
            self.label = spec.label
            source = open_source(spec, interval_s, gpu)
        else:
            self.label = source_text
        self.interval_s = interval_s
        self.sampler = TelemetrySampler(interval_s, source=source)
        self.track = self.sampler.energy

    def start(self) -> None:
        self.sampler.start()

    def stop(self) -> None:
        self.sampler.stop()

    def describe(self) -> dict[str, Any]:
        """report.json's ``energy_source``: whose hardware, how often it was read."""
        return {"source": self.label, "interval_s": self.interval_s}


def choose_source(asked: str | None, telemetry: list[str | None]) -> str | None:
    """``--energy``'s value ('off': None), else the engines' common telemetry, else
    'local'."""
    if asked is not None:
        return None if asked.strip().lower() == "off" else asked
    named = {t for t in telemetry if t}
    if len(named) == 1 and all(telemetry):
        return named.pop()
    return "local"


def level_energy(level: LevelRun, track: Any) -> dict[str, Any] | None:
    """The level's energy (see the module docstring); None with no sample to go on."""
    recs = [r for r in level.records if r.status != "cancelled"]
    sent = [r.timeline.t_sent_ns for r in recs if r.timeline.t_sent_ns is not None]
    ends = [r.timeline.t_end_ns for r in recs if r.timeline.t_end_ns is not None]
    if not sent or not ends:
        return None
    ok = [r for r in recs if r.ok]
    tokens = sum(r.metrics.output_tokens or 0 for r in ok)
    use: EnergyUse | None = track.window_ns(min(sent), max(ends), tokens or None)
    if use is None:
        return None
    out = use.to_dict()
    alone = level.kind == "cold" or (level.kind == "concurrency" and level.concurrency == 1)
    if alone:
        per: dict[str, float] = {}
        for r in ok:
            t0, t1 = r.timeline.t_sent_ns, r.timeline.t_end_ns
            if t0 is None or t1 is None:
                continue
            one = track.window_ns(t0, t1, r.metrics.output_tokens)
            if one is not None and one.j_per_token is not None:
                per[r.request_id] = one.j_per_token
        out["requests"] = per
        out["j_per_token_median"] = median(list(per.values())) if per else None
    return out
