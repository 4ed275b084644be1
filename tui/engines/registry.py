"""Building engines: a spec becomes an engine of its kind (tui/engines/kinds.py), in a
worker process for the in-process kinds that run isolated (tui/engines/inprocess/worker.py)."""

from __future__ import annotations

import dataclasses

from tui.engines.base import Engine, EngineError, EngineSpec
from tui.engines.kinds import (
    EngineKind,
    engine_class,
    engine_kind,
    find_kind,
    kind_names,
    kinds,
    register,
    unregister,
)

# the kinds' registry (tui/engines/kinds.py), also found here beside the engine builder
__all__ = [
    "EngineKind",
    "create_engine",
    "engine_class",
    "engine_kind",
    "find_kind",
    "kind_names",
    "kinds",
    "register",
    "runs_in_worker",
    "unregister",
]


def runs_in_worker(spec: EngineSpec) -> bool:
    """Whether this engine runs in a worker process (see EngineKind.isolated_by_default)."""
    kind = find_kind(spec.kind)
    if kind is None or not kind.in_process:
        return False
    isolate = spec.options.get("isolate", kind.isolated_by_default)
    if not isinstance(isolate, bool):
        raise EngineError(f"engine {spec.name!r}: options.isolate must be true or false")
    return isolate


def create_engine(spec: EngineSpec) -> Engine:
    """Build (not load) the engine a spec describes."""
    if runs_in_worker(spec):
        from tui.engines.inprocess.worker import worker_class

        engine_class(spec.kind)  # an unknown kind fails here, in this process
        return worker_class(spec.kind, engine_kind(spec.kind).target)(spec)
    options = {k: v for k, v in spec.options.items() if k != "isolate"}
    if options != spec.options:
        spec = dataclasses.replace(spec, options=options)
    return engine_class(spec.kind)(spec)
