"""Where an engine runs, and whether two engines share a machine (A/B scheduling).

Two engines timed at once on one machine slow each other down: the B/A ratios of such a
run describe the contention, not the engines. So A/B runs the two turns one after the
other when the engines share hardware, and at once only when they run on different
machines (or the user asks). "Share hardware" is decided from config alone, before any
request, by :func:`shared_hardware`:

- an engine without a URL runs in a process on this machine (in-process kinds, a
  llama-server infertop starts from a model path);
- an engine with a URL runs on that URL's host; every loopback name (``localhost``,
  ``127.0.0.0/8``, ``::1``) and this machine's own host name are this machine;
- two engines whose ``telemetry`` names the same hardware source run on that source's
  machine (the user said so);
- anything else is taken to be two machines.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import socket
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from tui.engines.base import EngineSpec

THIS_MACHINE = "this machine"

# How A/B turns run: one after the other, at once, or chosen by where the engines run.
AbSchedule = Literal["auto", "sequential", "concurrent"]
SEQUENTIAL: AbSchedule = "sequential"
CONCURRENT: AbSchedule = "concurrent"
AUTO: AbSchedule = "auto"
AB_SCHEDULES: tuple[AbSchedule, ...] = (AUTO, SEQUENTIAL, CONCURRENT)
ALL_CORES_UP_TO = 4  # under the TUI, llama.cpp uses every core up to this many (ui_threads)


def engine_host(spec: EngineSpec) -> str:
    """The machine ``spec`` runs on: :data:`THIS_MACHINE` or a lower-case host name."""
    if not spec.url:
        return THIS_MACHINE
    try:
        host = (urlsplit(spec.url).hostname or "").lower()
    except ValueError:
        return spec.url.lower()  # not a URL: only an identical one is "the same"
    if not host or _is_loopback(host) or host in _own_names():
        return THIS_MACHINE
    return host


def _is_loopback(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _own_names() -> set[str]:
    """This machine's own names (no DNS lookup: a lookup could hang on a bad resolver)."""
    name = socket.gethostname().lower()
    return {name, name.split(".", 1)[0]}


@dataclass(frozen=True)
class ABPlan:
    """How one A/B turn runs: ``schedule`` is SEQUENTIAL or CONCURRENT; ``why`` in words."""

    schedule: AbSchedule  # never "auto": the choice made
    why: str

    @property
    def label(self) -> str:
        """What the B/A table and ratios say: "sequential (shared machine)", …"""
        return f"{self.schedule} ({self.why})"


def shared_hardware(a: EngineSpec, b: EngineSpec) -> str | None:
    """Why A and B share a machine (a short phrase), or None when they do not."""
    if a.telemetry and a.telemetry == b.telemetry:
        return "same hardware source"
    ha, hb = engine_host(a), engine_host(b)
    if ha == hb:
        return "shared machine" if ha == THIS_MACHINE else f"both on {ha}"
    return None


def ab_plan(a: EngineSpec, b: EngineSpec, setting: AbSchedule = AUTO) -> ABPlan:
    """The schedule for an A/B turn. ``setting`` is config's ``ui.ab_schedule``:
    "auto" (sequential on shared hardware, else concurrent), "sequential" or
    "concurrent" (the user's choice, kept even where it is unfair, and said so)."""
    shared = shared_hardware(a, b)
    if setting == SEQUENTIAL:
        return ABPlan(SEQUENTIAL, shared or "as configured")
    if setting == CONCURRENT:
        return ABPlan(CONCURRENT, f"{shared}: engines compete" if shared else "as configured")
    if shared:
        return ABPlan(SEQUENTIAL, shared)
    return ABPlan(CONCURRENT, "different machines")


def turn_order(turn: int, slots: tuple[str, ...] = ("A", "B")) -> list[str]:
    """Sequential A/B alternates who goes first, turn by turn (1: A then B, 2: B then
    A, …), so warm caches and machine drift favour neither engine."""
    order = list(slots)
    return order if turn % 2 == 1 else order[::-1]


def ui_threads(cores: int) -> int:
    """llama.cpp threads for an in-process engine under the TUI, on ``cores`` cores.

    llama.cpp's threads spin at barriers, so a decode step waits for its slowest thread,
    and a thread that shares its core with the UI stalls the steps the UI draws in. With
    the UI costing ~10 % of a core while an answer streams (benchmarks/watch_cost.py),
    measured on 2 cores: all cores give the engine 85-92 tok/s under the TUI (0.89-0.96
    of headless), one thread 55. So up to :data:`ALL_CORES_UP_TO` cores the engine gets
    them all; above that one core is left to the UI (a core is then at most a fifth of
    the compute, and the UI stays off the barrier; not measured here: no such machine).
    """
    return cores if cores <= ALL_CORES_UP_TO else cores - 1


def shares_cores_with_ui(spec: EngineSpec, cores: int | None = None) -> bool:
    """Whether an engine's work takes the cores the TUI draws on: it runs on this
    machine, and that has at most :data:`ALL_CORES_UP_TO` cores (where an in-process
    engine gets every core, :func:`ui_threads`, and any other one competes with the UI
    for so few). There the chat screen paints a new turn before the engine starts on it
    (tui/app/screens/chat.py)."""
    return engine_host(spec) == THIS_MACHINE and (cores or os.cpu_count() or 1) <= ALL_CORES_UP_TO


def ui_engine_spec(spec: EngineSpec, cores: int | None = None) -> EngineSpec:
    """The spec an engine runs with under the TUI: an in-process llama.cpp engine with no
    ``n_threads`` in config gets :func:`ui_threads`; a configured ``n_threads`` is kept."""
    if spec.kind == "llamacpp" and spec.n_threads is None:
        return dataclasses.replace(spec, n_threads=ui_threads(cores or os.cpu_count() or 1))
    return spec
