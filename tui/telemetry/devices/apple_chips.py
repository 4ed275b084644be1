"""Apple Silicon's peak unified-memory bandwidth, per chip, each figure with its source.

The roofline's peak for an Apple GPU (tui/telemetry/roofline.py): Apple's chips report no
bus width or memory clock anywhere a user process can read, so the figure comes from
this table, found by the chip's name ("Apple M1 Pro", from IORegistry or sysctl) and,
where one chip name covers two memory configurations, its GPU core count. A chip that is
not here — or whose configuration the core count does not settle — has no table peak
(then ``telemetry.peak_bandwidth_gbs``, or no percentage): never a guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Sources. Apple's newsroom releases give most figures; the binned M3 Max and M4 Max,
# whose lower memory bandwidth appears only in the Macs' tech specs, are cited from the
# articles that reported those specs.
_M1 = (
    "not published by Apple: LPDDR4X-4266 on a 128-bit bus (AnandTech, 'Apple Announces "
    "The Apple Silicon M1', 2020-11-10) = 4266 MT/s × 16 B = 68.25 GB/s; Apple's M2 "
    "release (below) calls M2's 100 GB/s '50 percent more than M1'"
)
_M1_PRO_MAX = (
    "Apple Newsroom 2021-10-18, 'Introducing M1 Pro and M1 Max': https://www.apple.com/"
    "newsroom/2021/10/introducing-m1-pro-and-m1-max-the-most-powerful-chips-apple-has-ever-"
    "built/ (M1 Pro 'up to 200GB/s', M1 Max 'up to 400GB/s')"
)
_M1_ULTRA = (
    "Apple Newsroom 2022-03-08, 'Apple unveils M1 Ultra': https://www.apple.com/newsroom/"
    "2022/03/apple-unveils-m1-ultra-the-worlds-most-powerful-chip-for-a-personal-computer/ "
    "('800GB/s')"
)
_M2 = (
    "Apple Newsroom 2022-06-06, 'Apple unveils M2': https://www.apple.com/newsroom/2022/06/"
    "apple-unveils-m2-with-breakthrough-performance-and-capabilities/ ('100GB/s')"
)
_M2_PRO_MAX = (
    "Apple Newsroom 2023-01-17, 'Apple unveils M2 Pro and M2 Max': https://www.apple.com/"
    "newsroom/2023/01/apple-unveils-m2-pro-and-m2-max-next-generation-chips-for-next-level-"
    "workflows/ (M2 Pro '200GB/s', M2 Max '400GB/s')"
)
_M2_ULTRA = (
    "Apple Newsroom 2023-06-05, 'Apple introduces M2 Ultra': https://www.apple.com/newsroom/"
    "2023/06/apple-introduces-m2-ultra/ ('800GB/s')"
)
_M3 = (
    "Apple tech specs, MacBook Pro (14-inch, M3, Nov 2023) ('100GB/s memory bandwidth'); "
    "M3 Pro 150 GB/s, M3 Max 300 GB/s (14-core CPU, 30-core GPU) or 400 GB/s (16-core "
    "CPU, 40-core GPU) from Apple's MacBook Pro (Nov 2023) specs, as reported by MacRumors "
    "2023-10-31: https://www.macrumors.com/2023/10/31/apple-m3-pro-less-memory-bandwidth/"
)
_M3_ULTRA = (
    "Apple Newsroom 2025-03-05, 'Apple reveals M3 Ultra': https://www.apple.com/newsroom/"
    "2025/03/apple-reveals-m3-ultra-taking-apple-silicon-to-a-new-extreme/ ('over 800GB/s'); "
    "819 GB/s in Apple's Mac Studio (2025) tech specs"
)
_M4 = (
    "Apple Newsroom 2024-05-07, 'Apple introduces M4 chip': https://www.apple.com/newsroom/"
    "2024/05/apple-introduces-m4-chip/ ('120GB/s')"
)
_M4_PRO_MAX = (
    "Apple Newsroom 2024-10-30, 'Apple introduces M4 Pro and M4 Max': https://www.apple.com/"
    "newsroom/2024/10/apple-introduces-m4-pro-and-m4-max/ (M4 Pro '273GB/s', M4 Max "
    "'546GB/s'); the 14-core CPU, 32-core GPU M4 Max: 410 GB/s in Apple's MacBook Pro "
    "(2024) tech specs, as compared in Ars Technica 2024-10-31, 'Apple's M4, M4 Pro, and "
    "M4 Max compared to past generations, and to each other'"
)


@dataclass(frozen=True)
class AppleChip:
    """One chip (configuration) and its peak memory bandwidth."""

    name: str  # "M1 Pro"
    bandwidth_gbs: float  # 10⁹ bytes/s
    source: str
    gpu_cores: tuple[int, ...] = ()  # the GPU configurations this figure is for (): all

    @property
    def bandwidth_bps(self) -> float:
        return self.bandwidth_gbs * 1e9

    def describe(self) -> str:
        cores = f", {'/'.join(map(str, self.gpu_cores))}-core GPU" if self.gpu_cores else ""
        return f"{self.name}{cores} {self.bandwidth_gbs:g} GB/s"


CHIPS: tuple[AppleChip, ...] = (
    AppleChip("M1", 68.25, _M1),
    AppleChip("M1 Pro", 200, _M1_PRO_MAX),
    AppleChip("M1 Max", 400, _M1_PRO_MAX),
    AppleChip("M1 Ultra", 800, _M1_ULTRA),
    AppleChip("M2", 100, _M2),
    AppleChip("M2 Pro", 200, _M2_PRO_MAX),
    AppleChip("M2 Max", 400, _M2_PRO_MAX),
    AppleChip("M2 Ultra", 800, _M2_ULTRA),
    AppleChip("M3", 100, _M3),
    AppleChip("M3 Pro", 150, _M3),
    AppleChip("M3 Max", 300, _M3, gpu_cores=(30,)),
    AppleChip("M3 Max", 400, _M3, gpu_cores=(40,)),
    AppleChip("M3 Ultra", 819, _M3_ULTRA),
    AppleChip("M4", 120, _M4),
    AppleChip("M4 Pro", 273, _M4_PRO_MAX),
    AppleChip("M4 Max", 410, _M4_PRO_MAX, gpu_cores=(32,)),
    AppleChip("M4 Max", 546, _M4_PRO_MAX, gpu_cores=(40,)),
)

_NAME = re.compile(r"\bM([1-9]\d?)(?:\s+(Pro|Max|Ultra))?\b")


def chip_name(text: str) -> str | None:
    """ "Apple M3 Max" → "M3 Max"; None when the text names no M-series chip."""
    m = _NAME.search(text or "")
    if m is None:
        return None
    return f"M{m.group(1)}" + (f" {m.group(2)}" if m.group(2) else "")


def chip_bandwidth(text: str, gpu_cores: int | None = None) -> AppleChip | None:
    """The table's entry for the chip named in ``text`` (and ``gpu_cores`` where the chip
    name alone does not settle its memory bandwidth); None when the table cannot say."""
    name = chip_name(text)
    if name is None:
        return None
    found = [c for c in CHIPS if c.name == name]
    if len(found) <= 1:
        return found[0] if found else None
    if gpu_cores is None:
        return None
    exact = [c for c in found if gpu_cores in c.gpu_cores]
    return exact[0] if len(exact) == 1 else None
