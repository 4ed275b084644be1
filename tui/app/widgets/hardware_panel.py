"""HardwarePanel: CPU (total, per core), RAM, engine RSS, GPUs, roofline line.

One row per GPU, the same shape for NVIDIA, AMD and Apple; an Apple GPU's memory is the
unified memory (RAM) it has in use, against its working-set budget — never VRAM.

The border title says whose hardware it is ("hardware" for this machine, "hardware ·
gpu-box via ssh", "hardware · dcgm http://…" for a remote source). A remote link in
trouble is the first line (the last good numbers stay below it, marked by it).
"""

from __future__ import annotations

from functools import cached_property
from urllib.parse import urlsplit

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Label

from tui.app.format import gib, mib
from tui.app.widgets.text_lines import TextLines
from tui.core.safe_text import markup_label, terminal_label
from tui.telemetry.devices.nvml import ABSENT, ERROR, GpuSample
from tui.telemetry.sampler import THIS_MACHINE, TelemetrySample

BLOCKS = " ▁▂▃▄▅▆▇█"


def core_bars(per_core: list[float]) -> str:
    """One block character per value on a fixed 0–100 % scale (cores, or CPU history)."""
    return "".join(BLOCKS[min(8, max(0, round(p / 12.5)))] for p in per_core)


class HardwarePanel(Vertical):
    DEFAULT_CSS = """
    HardwarePanel { height: auto; border: round $secondary; padding: 0 1; }
    HardwarePanel > Horizontal { height: 1; }
    HardwarePanel > Horizontal > Label { width: 8; }
    HardwarePanel > Horizontal > #cpu-spark { width: 1fr; height: 1; }
    HardwarePanel > .hw { height: auto; }
    """

    def compose(self) -> ComposeResult:
        with Horizontal():
            yield Label("CPU %")
            yield TextLines(id="cpu-spark", wrap=False)
        yield TextLines("waiting for the first sample…", classes="hw")

    def on_mount(self) -> None:
        self.border_title = "hardware"

    def show(self, sample: TelemetrySample, cpu_history: list[float], roofline: str | None) -> None:
        title = panel_title(sample.source)
        if title != self.border_title:  # setting it repaints the whole panel
            self.border_title = markup_label(title)  # a host, a URL: no markup read
        spark = self._spark
        width = max(1, spark.size.width or 40)
        spark.update(core_bars(cpu_history[-width:]))
        # only the lines that changed are repainted; a layout only when their number does
        self._text.show_text(hardware_text(sample, roofline))

    @property
    def text(self) -> str:
        return self._text.plain

    @cached_property
    def _spark(self) -> TextLines:  # composed once: looked up once
        return self.query_one("#cpu-spark", TextLines)

    @cached_property
    def _text(self) -> TextLines:
        return self.query_one(".hw", TextLines)


def panel_title(source: str) -> str:
    return "hardware" if source == THIS_MACHINE else f"hardware · {source}"


def source_tag(sample: TelemetrySample) -> str:
    """Whose hardware, in a few cells, for the 80-column strip: "" for this machine, else
    the host ("gpu-box", "10.0.0.7:9400") and the link's state when it is not up."""
    if sample.source == THIS_MACHINE:
        return ""
    who = sample.source.removesuffix(" via ssh")
    if "://" in who:  # an exporter: "dcgm http://host:9400/metrics" -> host:9400
        who = urlsplit(who.split()[-1]).netloc or who
    if sample.link is None:
        return f"{who}: "
    return f"{who} {'LOST' if 'lost' in sample.link else 'connecting'}: "


def gpu_memory(gpu: GpuSample) -> str:
    """ "mem 1.0 GiB/141.0 GiB"; Apple: "in use 3.1 GiB of RAM (budget 21.3 GiB)"."""
    if not gpu.unified_memory:
        return f"mem {gib(gpu.mem_used)}/{gib(gpu.mem_total)}"
    budget = "budget unknown" if gpu.mem_total is None else f"budget {gib(gpu.mem_total)}"
    return f"in use {gib(gpu.mem_used)} of RAM ({budget})"


def hardware_text(sample: TelemetrySample, roofline: str | None) -> Text:
    t = Text()
    if sample.link:
        t.append(terminal_label(sample.link, 500) + "\n", style="bold yellow")
    s = sample.system
    if s is not None:
        cores = f"  cores {core_bars(s.per_core)}" if s.per_core else ""
        t.append(f"CPU {s.cpu_percent:5.1f}%{cores}\n")
        t.append(f"{s.ram_label} {gib(s.ram_used)} / {gib(s.ram_total)} ({s.ram_percent:.0f}%)\n")
        if s.rss_bytes is not None:
            t.append(f"engine RSS {mib(s.rss_bytes)} (pid {s.rss_pid})\n")
        elif s.rss_error is not None:
            t.append(f"engine RSS – ({s.rss_error})\n", style="yellow")
        # else a remote source: no local pid means anything there
        if s.cpu_shares is not None:
            t.append(s.cpu_shares.describe() + "\n", style="dim")
            if s.cpu_shares.shares_few_cores:
                t.append(
                    f"{s.cpu_shares.cores} cores shared with the engine: "
                    "infertop's CPU is taken from it\n",
                    style="yellow",
                )
    elif sample.source != THIS_MACHINE and sample.gpu.gpus:
        t.append("CPU, RAM: not in this source's metrics\n", style="dim")
    if sample.error:
        t.append(terminal_label(sample.error, 500) + "\n", style="red")
    g = sample.gpu
    if g.status == ABSENT:
        t.append(terminal_label(g.message or "no GPU", 500), style="dim")
    elif g.status == ERROR:
        t.append(terminal_label(g.message, 500), style="bold red")
    for gpu in g.gpus:
        util = "–" if gpu.util_percent is None else f"{gpu.util_percent:.0f}%"
        name = terminal_label(gpu.name, 80)  # an exporter's or agent's label
        t.append(f"GPU{gpu.index} {name}: util {util} {gpu_memory(gpu)}")
        if gpu.power_w is not None:
            t.append(f" {gpu.power_w:.0f} W")
        if gpu.temp_c is not None:
            t.append(f" {gpu.temp_c:.0f}°C")
        if gpu.sm_clock_mhz is not None:
            t.append(f" {'sm' if gpu.vendor == 'nvidia' else 'gfx'} {gpu.sm_clock_mhz} MHz")
        if gpu.proc_mem is not None:
            t.append(f" ours {mib(gpu.proc_mem)}")
        top = max(gpu.processes, key=lambda p: p.bytes or 0, default=None)
        if top is not None and top.bytes:
            more = f" +{len(gpu.processes) - 1}" if len(gpu.processes) > 1 else ""
            t.append(f" · {terminal_label(top.name or 'pid', 40)} {top.pid} {gib(top.bytes)}{more}")
        t.append("\n")
        if gpu.note:
            t.append(f"  {gpu.note}\n", style="dim")
    if roofline:
        t.append("\n" + roofline, style="italic")
    t.rstrip()
    return t
