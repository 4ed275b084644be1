"""Building engines: a spec becomes an engine of its kind (tui/engines/kinds.py), in a
worker process for the in-process kinds that run isolated (tui/engines/worker.py)."""

from __future__ import annotations

import dataclasses

from tui.engines.base import Engine, EngineError, EngineSpec
from tui.engines.kinds import (  # noqa: F401 - the registry's names, where callers find them
    ENGINE_KINDS,
    IN_PROCESS_KINDS,
    ISOLATED_BY_DEFAULT,
    KIND_HELP,
    KIND_OPTIONS,
    engine_class,
    register,
)


def runs_in_worker(spec: EngineSpec) -> bool:
    """Whether this engine runs in a worker process (see ISOLATED_BY_DEFAULT)."""
    if spec.kind not in IN_PROCESS_KINDS:
        return False
    isolate = spec.options.get("isolate", spec.kind in ISOLATED_BY_DEFAULT)
    if not isinstance(isolate, bool):
        raise EngineError(f"engine {spec.name!r}: options.isolate must be true or false")
    return isolate


def create_engine(spec: EngineSpec) -> Engine:
    """Build (not load) the engine a spec describes."""
    if runs_in_worker(spec):
        from tui.engines.worker import worker_class

        engine_class(spec.kind)  # an unknown kind fails here, in this process
        return worker_class(spec.kind, ENGINE_KINDS[spec.kind])(spec)
    options = {k: v for k, v in spec.options.items() if k != "isolate"}
    if options != spec.options:
        spec = dataclasses.replace(spec, options=options)
    return engine_class(spec.kind)(spec)
