"""Read one metadata value from a GGUF file's header, without loading the model.

GGUF v2/v3 layout (little-endian): magic "GGUF", u32 version, u64 tensor count, u64
metadata count, then each metadata entry: key (u64 length + UTF-8), u32 value type,
value. Strings are u64 length + bytes; arrays are u32 item type + u64 count + items.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import IO, Any

_SCALARS: dict[int, str] = {
    0: "<B",
    1: "<b",
    2: "<H",
    3: "<h",
    4: "<I",
    5: "<i",
    6: "<f",
    7: "<?",
    10: "<Q",
    11: "<q",
    12: "<d",
}
_STRING, _ARRAY = 8, 9


def _read(f: IO[bytes], fmt: str) -> Any:
    size = struct.calcsize(fmt)
    data = f.read(size)
    if len(data) != size:
        raise ValueError("GGUF header ends early")
    return struct.unpack(fmt, data)[0]


def _value(f: IO[bytes], vtype: int, keep: bool) -> Any:
    if vtype in _SCALARS:
        return _read(f, _SCALARS[vtype])
    if vtype == _STRING:
        n = _read(f, "<Q")
        if not keep:
            f.seek(n, 1)
            return None
        return f.read(n).decode("utf-8", errors="replace")
    if vtype == _ARRAY:
        itype, count = _read(f, "<I"), _read(f, "<Q")
        if itype in _SCALARS and not keep:
            f.seek(struct.calcsize(_SCALARS[itype]) * count, 1)
            return None
        return [_value(f, itype, keep) for _ in range(count)]
    raise ValueError(f"unknown GGUF value type {vtype}")


def gguf_value(path: Path, key: str) -> Any:
    """The metadata value stored under ``key``, or None when the file has none.
    ValueError when the file is not a readable GGUF."""
    with path.open("rb") as f:
        magic = f.read(4)
        if magic != b"GGUF":
            raise ValueError(f"not a GGUF file: {path}")
        version = _read(f, "<I")
        if version not in (2, 3):
            raise ValueError(f"unsupported GGUF version {version}: {path}")
        _read(f, "<Q")  # tensors
        for _ in range(_read(f, "<Q")):
            name = f.read(_read(f, "<Q")).decode("utf-8", errors="replace")
            vtype = _read(f, "<I")
            found = name == key
            value = _value(f, vtype, keep=found)
            if found:
                return value
    return None


def gguf_file_type(path: Path) -> str | None:
    """llama.cpp's name for the file's ``general.file_type`` (e.g. "Q4_K_M"), or None."""
    from tui.engines.llamacpp import FILE_TYPES

    try:
        ftype = gguf_value(path, "general.file_type")
    except (OSError, ValueError):
        return None
    return FILE_TYPES.get(ftype) if isinstance(ftype, int) else None
