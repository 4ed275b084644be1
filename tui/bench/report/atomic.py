"""Atomic file writes: a report file is either the old one or the new one, never half."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

from tui.bench.run.plan import BenchError


def write_atomic(path: Path, text: str | bytes) -> None:
    """Write ``text`` (bytes as they are, text as UTF-8) to a temp file in the same folder,
    fsync it, then os.replace(). The file is its owner's only (0600, as mkstemp makes
    it): reports hold every request's prompt and answer, like session logs."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode("utf-8") if isinstance(text, str) else text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


# What write_atomic leaves when its process is killed between mkstemp and os.replace
# (SIGKILL, power loss): ".report.json.k3j_9x2a.tmp" beside report.json.
STALE_TEMP = re.compile(r"^\.[\w.-]+\.(json|csv|md|svg)\.[a-z0-9_]{8}\.tmp$")


def remove_stale_temps(folder: Path) -> list[Path]:
    """Delete the temp files of report writes that never finished; returns them."""
    removed = []
    for p in folder.iterdir():
        if STALE_TEMP.match(p.name) and p.is_file():
            try:
                p.unlink()
            except OSError:
                continue
            removed.append(p)
    return removed


def prepare_out_dir(out: Path) -> Path:
    """Create ``out`` if needed (0700: its reports hold prompts and answers) and prove it
    is writable; BenchError (one line) if not.

    Temp files left there by a bench that was killed mid-write are removed (the reports
    beside them are whole: each is the old or the new version)."""
    try:
        if out.exists() and not out.is_dir():
            raise BenchError(f"--out {out}: exists and is not a folder")
        out.mkdir(mode=0o700, parents=True, exist_ok=True)  # private, as session logs
        remove_stale_temps(out)
        fd, probe = tempfile.mkstemp(dir=out, prefix=".write-test.")
        os.close(fd)
        os.unlink(probe)
    except BenchError:
        raise
    except OSError as e:
        raise BenchError(f"--out {out}: cannot write there ({e.strerror or e})") from None
    return out
