"""A cheap GGUF sanity check before handing a file to llama.cpp (clearer errors)."""

from __future__ import annotations

import struct
from pathlib import Path

from tui.engines.base import EngineError

GGUF_MAGIC = b"GGUF"
_HEADER = struct.Struct("<4sIQQ")  # magic, version, tensor count, metadata kv count


def check_gguf(path: Path) -> int:
    """Raise EngineError unless ``path`` starts like a GGUF file; return its version."""
    try:
        with path.open("rb") as f:
            head = f.read(_HEADER.size)
    except OSError as e:
        raise EngineError(f"cannot read model file {path}: {e.strerror}") from None
    if len(head) < _HEADER.size:
        raise EngineError(f"not a GGUF model (file too short: {len(head)} bytes): {path}")
    magic, version, n_tensors, _n_kv = _HEADER.unpack(head)
    if magic != GGUF_MAGIC:
        raise EngineError(f"not a GGUF model (bad magic {magic!r}): {path}")
    if version not in (2, 3):
        raise EngineError(f"unsupported GGUF version {version}: {path}")
    if n_tensors == 0:
        raise EngineError(f"GGUF file holds no tensors: {path}")
    return int(version)
