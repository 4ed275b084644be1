"""A cheap GGUF sanity check before handing a file to llama.cpp (clearer errors), and a
reader of a GGUF header's metadata that treats the file as untrusted: nested arrays,
counts and lengths are bounded, and so is the wall time of one read (see _Reader)."""

from __future__ import annotations

import os
import stat
import struct
import time
from pathlib import Path
from typing import Any, BinaryIO

from tui.engines.base import EngineError

GGUF_MAGIC = b"GGUF"
_HEADER = struct.Struct("<4sIQQ")  # magic, version, tensor count, metadata kv count
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # opening a FIFO must not wait for a writer


def open_model_file(path: Path) -> BinaryIO:
    """``path`` opened for reading; EngineError unless it is a regular file (a FIFO
    named ``*.gguf`` would hold a read for ever, a device never ends). OSError as
    ``open`` raises it."""
    fd = os.open(path, os.O_RDONLY | _NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise EngineError(f"not a GGUF model (not a regular file): {path}")
        if _NONBLOCK:
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def check_gguf(path: Path) -> int:
    """Raise EngineError unless ``path`` starts like a GGUF file; return its version."""
    try:
        with open_model_file(path) as f:
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
_STRUCTS = {t: struct.Struct(f) for t, f in _SCALARS.items()}
_STRING, _ARRAY = 8, 9
MAX_ARRAY_KEPT = 4096  # longer arrays (the tokenizer's vocabulary) are skipped, not kept
MAX_STRING = 1 << 24  # one string's bytes
# The bounds of one header read (a file is untrusted: its counts are whatever it says).
# Real models nest no array in another, hold tens of keys and a few arrays of at most a
# few thousand items (the rest is skipped by seeking), and are read in tens of ms.
MAX_NESTING = 4  # arrays within arrays
MAX_VALUES = 1 << 18  # keys, array items and nested arrays read one by one
MAX_KEPT_BYTES = 1 << 24  # string bytes kept (keys, string values, short string arrays)
HEADER_TIME_S = 2.0  # wall time of one header read
_U32, _U64 = struct.Struct("<I"), struct.Struct("<Q")
_BLOCK = 1 << 20


class _Reader:
    """Sequential reads from a GGUF file's header (the metadata section only), within
    the bounds above: past any of them the read ends with an EngineError naming it.
    ``budget_s``: the wall time this read may take (at most HEADER_TIME_S is usual)."""

    def __init__(self, f: Any, path: Path, budget_s: float = HEADER_TIME_S) -> None:
        self.f, self.path = f, path
        self.size = os.fstat(f.fileno()).st_size
        self.budget_s = budget_s
        self.end = time.monotonic() + budget_s
        self.values_left = MAX_VALUES
        self.kept_left = MAX_KEPT_BYTES

    def check_time(self) -> None:
        """EngineError once this read's wall-time budget is spent."""
        if time.monotonic() > self.end:
            raise EngineError(
                f"GGUF header not read within {self.budget_s:g} s (no model's takes so"
                f" long): {self.path}"
            )

    def tick(self) -> None:
        """Count one value read one by one (the time is looked at every 256)."""
        self.values_left -= 1
        if self.values_left < 0:
            raise EngineError(f"GGUF header holds more than {MAX_VALUES} values: {self.path}")
        if not self.values_left & 0xFF:
            self.check_time()

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
        for i in range(count):
            rel = off - base
            if rel + 8 > len(buf):
                self.check_time()
                self.f.seek(off)
                buf, base, rel = self.f.read(_BLOCK), off, 0
                if len(buf) < 8:
                    raise EngineError(f"GGUF metadata is cut short: {self.path}")
            elif not i & 0xFFFF:
                self.check_time()
            off += 8 + unpack(buf, rel)[0]
            if off > self.size:
                raise EngineError(f"GGUF metadata is cut short: {self.path}")
        self.f.seek(off)

    def take(self, n: int) -> bytes:
        data = self.f.read(n)
        if len(data) != n:
            raise EngineError(f"GGUF metadata is cut short: {self.path}")
        return bytes(data)

    def u32(self) -> int:
        return int(_U32.unpack(self.take(4))[0])

    def u64(self) -> int:
        return int(_U64.unpack(self.take(8))[0])

    def string(self) -> str:
        """A string that is kept (a key, a value): its bytes count against MAX_KEPT_BYTES."""
        n = self.u64()
        if n > MAX_STRING:
            raise EngineError(f"GGUF metadata holds a {n}-byte string: {self.path}")
        self.kept_left -= n
        if self.kept_left < 0:
            raise EngineError(
                f"GGUF header holds more than {MAX_KEPT_BYTES} bytes of text: {self.path}"
            )
        return self.take(n).decode("utf-8", errors="replace")

    def value(self, vtype: int, depth: int = 0) -> Any:
        """One metadata value of type ``vtype``; None for an array too long to keep.
        ``depth``: how many arrays this value sits in."""
        self.tick()
        s = _STRUCTS.get(vtype)
        if s is not None:
            return s.unpack(self.take(s.size))[0]
        if vtype == _STRING:
            return self.string()
        if vtype == _ARRAY:
            if depth >= MAX_NESTING:
                raise EngineError(
                    f"GGUF metadata nests arrays more than {MAX_NESTING} deep: {self.path}"
                )
            item_type, count = self.u32(), self.u64()
            if count > MAX_ARRAY_KEPT:
                self.skip_array(item_type, count, depth + 1)
                return None
            return [self.value(item_type, depth + 1) for _ in range(count)]
        raise EngineError(f"GGUF metadata has an unknown value type {vtype}: {self.path}")

    def skip_array(self, item_type: int, count: int, depth: int) -> None:
        """Skip an array's ``count`` items of ``item_type`` (they sit ``depth`` arrays
        deep): fixed-size items in one seek, strings in blocks, arrays one by one."""
        s = _STRUCTS.get(item_type)
        if s is not None:
            self.skip(count * s.size)
        elif item_type == _STRING:
            self.skip_strings(count)
        elif item_type == _ARRAY:
            if depth >= MAX_NESTING:
                raise EngineError(
                    f"GGUF metadata nests arrays more than {MAX_NESTING} deep: {self.path}"
                )
            for _ in range(count):
                self.tick()
                inner_type, inner_count = self.u32(), self.u64()
                self.skip_array(inner_type, inner_count, depth + 1)
        elif count:
            raise EngineError(f"GGUF metadata has an unknown value type {item_type}: {self.path}")

    def metadata(self, n_kv: int, keys: frozenset[str] | None = None) -> dict[str, Any]:
        """The ``n_kv`` key/value pairs that follow the header (only ``keys``, when
        given); arrays too long to keep are left out."""
        out: dict[str, Any] = {}
        for _ in range(n_kv):
            key = self.string()
            value = self.value(self.u32())
            if value is not None and (keys is None or key in keys):
                out[key] = value
        return out


def read_gguf_metadata(path: Path, budget_s: float = HEADER_TIME_S) -> dict[str, Any]:
    """The key/value metadata section of a GGUF file (v2/v3), read in pure Python: no
    tensor data is read. Arrays longer than MAX_ARRAY_KEPT (the vocabulary) are skipped.
    Bounded (MAX_NESTING, MAX_VALUES, MAX_KEPT_BYTES, ``budget_s`` of wall time): raises
    EngineError (one line, naming the file) on anything that is not such a file or
    passes a bound."""
    check_gguf(path)
    try:
        with open_model_file(path) as f:
            r = _Reader(f, path, budget_s)
            _magic, _version, _n_tensors, n_kv = _HEADER.unpack(r.take(_HEADER.size))
            return r.metadata(n_kv)
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
