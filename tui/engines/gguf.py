"""A cheap GGUF sanity check before handing a file to llama.cpp (clearer errors)."""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Any

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


# GGUF metadata value types -> struct format (8 = string, 9 = array: read specially).
_SCALARS = {
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
MAX_ARRAY_KEPT = 4096  # longer arrays (the tokenizer's vocabulary) are skipped, not kept
_U64 = struct.Struct("<Q")
_BLOCK = 1 << 20


class _Reader:
    """Sequential reads from a GGUF file's header (the metadata section only)."""

    def __init__(self, f: Any, path: Path) -> None:
        self.f, self.path = f, path
        self.size = os.fstat(f.fileno()).st_size

    def skip(self, n: int) -> None:
        """Move ``n`` bytes on; a skip past the file's end (a count no file holds) is
        the metadata cut short, not an offset the OS refuses."""
        if n > self.size - self.f.tell():
            raise EngineError(f"GGUF metadata is cut short: {self.path}")
        self.f.seek(n, 1)

    def skip_strings(self, count: int) -> None:
        """Skip ``count`` length-prefixed strings (a vocabulary), reading the file in
        blocks: one unpack per string instead of a read and a seek."""
        unpack = _U64.unpack_from
        off = base = self.f.tell()
        buf = b""
        for _ in range(count):
            rel = off - base
            if rel + 8 > len(buf):
                self.f.seek(off)
                buf, base, rel = self.f.read(_BLOCK), off, 0
                if len(buf) < 8:
                    raise EngineError(f"GGUF metadata is cut short: {self.path}")
            off += 8 + unpack(buf, rel)[0]
            if off > self.size:
                raise EngineError(f"GGUF metadata is cut short: {self.path}")
        self.f.seek(off)

    def take(self, n: int) -> bytes:
        data = self.f.read(n)
        if len(data) != n:
            raise EngineError(f"GGUF metadata is cut short: {self.path}")
        return bytes(data)

    def scalar(self, fmt: str) -> Any:
        s = struct.Struct(fmt)
        return s.unpack(self.take(s.size))[0]

    def string(self) -> str:
        n = self.scalar("<Q")
        if n > 1 << 24:
            raise EngineError(f"GGUF metadata holds a {n}-byte string: {self.path}")
        return self.take(n).decode("utf-8", errors="replace")

    def value(self, vtype: int) -> Any:
        if vtype in _SCALARS:
            return self.scalar(_SCALARS[vtype])
        if vtype == _STRING:
            return self.string()
        if vtype == _ARRAY:
            item_type, count = self.scalar("<I"), self.scalar("<Q")
            if count > MAX_ARRAY_KEPT and item_type in _SCALARS:
                self.skip(count * struct.calcsize(_SCALARS[item_type]))
                return None
            if count > MAX_ARRAY_KEPT and item_type == _STRING:
                self.skip_strings(count)
                return None
            items = [self.value(item_type) for _ in range(count)]
            return items if count <= MAX_ARRAY_KEPT else None
        raise EngineError(f"GGUF metadata has an unknown value type {vtype}: {self.path}")


def read_gguf_metadata(path: Path) -> dict[str, Any]:
    """The key/value metadata section of a GGUF file (v2/v3), read in pure Python: no
    tensor data is read. Arrays longer than MAX_ARRAY_KEPT (the vocabulary) are skipped.
    Raises EngineError (one line, naming the file) on anything that is not such a file."""
    check_gguf(path)
    try:
        with path.open("rb") as f:
            r = _Reader(f, path)
            _magic, _version, _n_tensors, n_kv = _HEADER.unpack(r.take(_HEADER.size))
            out: dict[str, Any] = {}
            for _ in range(n_kv):
                key = r.string()
                value = r.value(r.scalar("<I"))
                if value is not None:
                    out[key] = value
            return out
    except OSError as e:
        raise EngineError(f"cannot read model file {path}: {e.strerror}") from None


# llama.cpp's names for general.file_type (llama_ftype)
FILE_TYPES = {
    0: "F32",
    1: "F16",
    2: "Q4_0",
    3: "Q4_1",
    7: "Q8_0",
    8: "Q5_0",
    9: "Q5_1",
    10: "Q2_K",
    11: "Q3_K_S",
    12: "Q3_K_M",
    13: "Q3_K_L",
    14: "Q4_K_S",
    15: "Q4_K_M",
    16: "Q5_K_S",
    17: "Q5_K_M",
    18: "Q6_K",
    32: "BF16",
}


def gguf_file_type(path: Path) -> str | None:
    """llama.cpp's name for the file's ``general.file_type`` (e.g. "Q4_K_M"), or None
    when the file has none or is not a readable GGUF."""
    try:
        ftype = read_gguf_metadata(path).get("general.file_type")
    except EngineError:
        return None
    return FILE_TYPES.get(ftype) if isinstance(ftype, int) else None
