"""The CPU package's energy counter on Linux: powercap's RAPL zones.

Stdlib only, Python 3.6 syntax, no annotations (types are PEP 484 type comments): bundled
into the agent fed to a remote ``python3`` (tui/telemetry/devices/agent.py); every top-level name
is unique across the bundle.

The kernel's powercap framework (Documentation/power/powercap/powercap.rst) exposes one
zone per CPU package under ``ROOT/sys/class/powercap/intel-rapl:N`` (AMD's Zen packages
appear there too): ``name`` ("package-0"), ``energy_uj`` — the package's cumulative energy
in µJ — and ``max_energy_range_uj``, the value after which ``energy_uj`` starts again
from 0 (the wrap the energy arithmetic undoes: tui/core/energy.py). Sub-zones
(``intel-rapl:0:0`` core, ``:0:1`` uncore, ``:0:2`` dram) are inside the package and are
not added to it; ``psys`` (the whole platform, where present) is not a package either.

``energy_uj`` is readable by root only since Linux 5.10 (CVE-2020-8694, "PLATYPUS"): for
another user the zone is found but unreadable, and the reader says so.
"""

import os

if False:  # typing only (never runs): names for the type comments, read by mypy alone
    from typing import Any  # noqa: F401

RAPL_LIMIT = 64  # bytes: a counter file is a number and a newline
RAPL_SOURCE = "RAPL energy_uj (powercap)"


def _rapl_text(path):  # type: (str) -> tuple[str | None, str | None]
    """(text, None) or (None, why)."""
    try:
        with open(path, "rb") as f:
            data = f.read(RAPL_LIMIT + 1)
    except PermissionError:
        return None, "not readable by this user (root only since Linux 5.10)"
    except OSError as e:
        return None, e.strerror or type(e).__name__
    if len(data) > RAPL_LIMIT:
        return None, "not a counter (too long)"
    return data.decode("ascii", "replace").strip(), None


def _rapl_uint(path):  # type: (str) -> tuple[int | None, str | None]
    text, why = _rapl_text(path)
    if text is None:
        return None, why
    if not text.isdigit() or len(text) > 20:
        return None, f"not a counter ({text[:20]!r})"
    return int(text), None


def rapl_package_zones(root="/"):  # type: (str) -> list[tuple[str, str]]
    """[(package name, zone dir)] of the top-level package zones, in zone order."""
    base = os.path.join(root, "sys", "class", "powercap")
    try:
        names = os.listdir(base)
    except OSError:
        return []
    zones = []  # type: list[tuple[int, str, str]]
    for name in names:
        head, _, number = name.partition(":")
        if head != "intel-rapl" or not number.isdigit():
            continue  # the control type itself, sub-zones (a second ':'), mmio zones
        label, _why = _rapl_text(os.path.join(base, name, "name"))
        if label and label.startswith("package"):
            zones.append((int(number), label, os.path.join(base, name)))
    return [(label, path) for _n, label, path in sorted(zones)][:64]


def read_rapl(root="/"):  # type: (str) -> tuple[list[dict[str, Any]], str | None]
    """(readings, problem): one energy dict per package (``domain``, ``joules``,
    ``wrap_j``, ``counter_source``), and why none could be read (None when fine or when
    there is no RAPL here at all)."""
    zones = rapl_package_zones(root)
    out = []  # type: list[dict[str, Any]]
    problem = None  # type: str | None
    for label, path in zones:
        uj, why = _rapl_uint(os.path.join(path, "energy_uj"))
        if uj is None:
            problem = f"CPU package energy: {label} {why}"
            continue
        wrap, _ = _rapl_uint(os.path.join(path, "max_energy_range_uj"))
        number = label.split("-", 1)[-1]
        out.append(
            {
                "domain": "CPU package " + number,
                "joules": uj / 1e6,
                "wrap_j": wrap / 1e6 if wrap else None,
                "counter_source": RAPL_SOURCE,
            }
        )
    return out, (problem if not out else None)
