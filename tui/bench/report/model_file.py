"""A model file's identity for reports: path, size and a fingerprint of its contents.

fingerprint = SHA-256 over the file's size (8 bytes, little-endian), its first 4 MiB and
its last 4 MiB (the whole file when smaller than 8 MiB), hex. A GGUF's header, metadata
and tensor table sit at the start, so a different model, quantisation or conversion gives
a different fingerprint; two files that differ only in the middle would not — it is not a
full-file hash, which would take minutes on a 70 GB model at every bench.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import Any

EDGE_BYTES = 4 * 2**20
METHOD = "sha256 of size + first and last 4 MiB"


def model_file(info: dict[str, Any] | None) -> dict[str, Any] | None:
    """The identity of the model file an engine reported, when it is a file here."""
    if not info:
        return None
    params = info.get("parameters") or {}
    for candidate in (params.get("model_path"), info.get("model")):
        if isinstance(candidate, str) and candidate:
            path = Path(candidate)
            try:
                st = path.stat()
            except OSError:
                continue
            if path.is_file():
                return {
                    "path": str(path),
                    "bytes": st.st_size,
                    "fingerprint": fingerprint(str(path), st.st_size, st.st_mtime_ns),
                    "fingerprint_method": METHOD,
                }
    return None


@functools.lru_cache(maxsize=16)
def fingerprint(path: str, size: int, mtime_ns: int) -> str:
    """See the module docstring; cached per (path, size, mtime) for checkpoint reports."""
    h = hashlib.sha256(size.to_bytes(8, "little"))
    with open(path, "rb") as f:
        if size <= 2 * EDGE_BYTES:
            h.update(f.read())
        else:
            h.update(f.read(EDGE_BYTES))
            f.seek(size - EDGE_BYTES)
            h.update(f.read(EDGE_BYTES))
    return h.hexdigest()
