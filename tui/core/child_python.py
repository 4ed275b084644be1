"""Python child processes that cannot import from the user's working directory.

infertop is often started inside a folder somebody else made (a fresh clone). A child
started as ``python -m tui.engines.inprocess.worker_main`` in that folder would put the folder first
on its import path, so a ``tui/engines/inprocess/worker_main.py``, ``numpy/`` or ``llama_cpp/``
planted there would run instead of the real one. Every Python child infertop starts
(engine workers, the setup probe, bench worker processes) therefore:

- runs with ``-P`` (Python 3.11+: no script or working directory prepended to
  ``sys.path``) and ``PYTHONSAFEPATH=1`` (the same, for any Python it starts in turn);
- starts in a neutral working directory, :func:`neutral_cwd` (the filesystem root), so
  even a relative entry in ``PYTHONPATH`` cannot name the user's folder;
- gets an import path of absolute entries only: the folder holding the ``tui`` package
  this process runs, then the absolute entries of the caller's ``PYTHONPATH``.

Paths the child needs (a model file) are made absolute before it starts
(:func:`absolute_if_path`).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

SAFE_PATH_FLAG = ["-P"] if sys.version_info >= (3, 11) else []


def package_root() -> str:
    """The folder holding the ``tui`` package this process imported."""
    return str(Path(__file__).resolve().parents[2])


def neutral_cwd() -> str:
    """A working directory that holds nothing of the user's: the filesystem root."""
    return os.path.abspath(os.sep)


def python_argv(module: str, *args: str) -> list[str]:
    """``[python, -P, -m, module, *args]``: this interpreter, running ``module``."""
    return [sys.executable, *SAFE_PATH_FLAG, "-m", module, *args]


def child_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a Python child: ``base`` (default: this process's), with
    ``PYTHONSAFEPATH=1`` and ``PYTHONPATH`` = the package root, then only the absolute
    entries of the old ``PYTHONPATH`` (an empty or relative entry would name the
    working directory)."""
    env = dict(os.environ if base is None else base)
    old = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and os.path.isabs(p)]
    root = package_root()
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([root, *old]))
    env["PYTHONSAFEPATH"] = "1"
    return env


def absolute_if_path(value: str | None) -> str | None:
    """``value`` as an absolute path when it names an existing file or folder relative
    to the working directory (a model path); otherwise unchanged (a model name, None,
    "default")."""
    if not value or value == "default":
        return value
    path = Path(value).expanduser()
    if path.is_absolute() or not path.exists():
        return str(path) if path.is_absolute() else value
    return str(path.resolve())


@contextlib.contextmanager
def safe_spawn_environment() -> Iterator[None]:
    """Around ``multiprocessing`` spawn starts: the children inherit this process's
    environment and working directory, and their bootstrap (``python -c ...``) would put
    the working directory first on the import path, so ``PYTHONSAFEPATH=1`` is set
    for the start and restored after. Call from the thread that starts the processes."""
    before = os.environ.get("PYTHONSAFEPATH")
    os.environ["PYTHONSAFEPATH"] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("PYTHONSAFEPATH", None)
        else:
            os.environ["PYTHONSAFEPATH"] = before
