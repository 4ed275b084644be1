"""Atomic file writes: a report file is either the old one or the new one, never half."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from tui.bench.plan import BenchError


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to a temp file in the same folder, fsync it, then os.replace()."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; a report is meant to be shared
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def prepare_out_dir(out: Path) -> Path:
    """Create ``out`` if needed and prove it is writable; BenchError (one line) if not."""
    try:
        if out.exists() and not out.is_dir():
            raise BenchError(f"--out {out}: exists and is not a folder")
        out.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=out, prefix=".write-test.")
        os.close(fd)
        os.unlink(probe)
    except BenchError:
        raise
    except OSError as e:
        raise BenchError(f"--out {out}: cannot write there ({e.strerror or e})") from None
    return out
