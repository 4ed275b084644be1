"""Hour packs: the numbers ``usage`` reads of every request, an hour of requests in one
blob — a column store beside the rows, so a window of a million requests is read as a
few thousand blobs instead of a million rows.

A pack holds, for each request that started in one UTC hour (in ``t0`` order), the
columns of :data:`FIELDS`: exactly what :mod:`tui.ledger.usage` computes from — the
names as their ids in ``texts``, token counts, TTFT/TTFO to the microsecond and decode
rates to a thousandth (as ``usage`` has always ranked them), and the request's busy
share, joules and covered seconds (tui/core/attribution.py, over every request of its
engine that the ledger holds: :mod:`tui.ledger.shares`). Nothing is summed or binned:
a pack is the rows' numbers, so every total, percentile and share read from packs is
the one read from the rows (tests/ledger/test_packs.py holds them equal).

Packs never disagree with the rows: triggers (tui/ledger/store.py, schema version 3)
drop a pack in the same transaction as any change to a row it was made from or to a
request or energy span in flight with one of its requests; a dropped hour is read from
the rows until it is packed again. A pack is one record per request, each field in the
narrowest integer type its values fit in that hour (or float64; a field of zeros is not
stored), so the packs of one layout — most of them — are read as one array.
:data:`FORMAT` versions the layout: a pack of another format is ignored (its hour read
from the rows) and remade.
"""

from __future__ import annotations

import functools
import struct
from typing import Any, Final, Literal

FORMAT: Final = 2  # 2: the verdict field
HOUR_S: Final = 3600
Kind = Literal["f", "i"]  # float64, or an integer column (stored narrow)
# the columns of a pack (and of a window read: tui/ledger/shares.py), in order
FIELDS: Final[tuple[tuple[str, Kind], ...]] = (
    ("t0", "f"),  # wall clock the request was sent (epoch s)
    ("client", "i"),  # names: ids in ``texts``, -1 none
    ("model", "i"),
    ("route", "i"),
    ("upstream", "i"),
    ("source", "i"),  # tui/ledger/shares.py's SOURCE_CODES index, -1 another
    ("flags", "i"),  # failed 1, cancelled 2; + 4 output counted, + 8 reasoning counted
    ("verdict", "i"),  # 1 + its kind's index in tui/core/verdict.py's VERDICT_KINDS, 0 none
    ("prompt", "i"),  # token counts (none: 0)
    ("cached", "i"),
    ("output", "i"),
    ("reasoning", "i"),
    ("ttft_us", "i"),  # microseconds, -1 none
    ("ttfo_us", "i"),
    ("decode_mtps", "i"),  # thousandths of a token per second, -1 none
    ("busy", "f"),  # the request's busy share (s)
    ("joules", "f"),  # its joules, and the busy seconds an energy span covered
    ("covered", "f"),
)
NAMES: Final = tuple(name for name, _k in FIELDS)
_HEAD: Final = struct.Struct("<2sBI")  # magic, format, requests
_MAGIC: Final = b"LP"
_NARROW: Final = (("b", 2**7), ("h", 2**15), ("i", 2**31), ("q", 2**63))


def hour_of(t: float) -> int:
    """The UTC hour ``t`` falls in (store.py's ``hour_sql`` is the same in SQL)."""
    return int(t // HOUR_S)


class Columns:
    """Requests as columns, read lazily: ``cols["client"]`` is every request's value of
    that field (floats float64, integers in the narrowest type that holds every part's),
    joined from its parts — pack records (a numpy structured array, fields of zeros
    absent) or arrays from the rows — the first time it is asked for; a report by
    client never joins the fields it does not read. Parts keep their own order (packs
    of one layout together)."""

    def __init__(self, parts: list[Any] | None = None) -> None:
        self.parts = [p for p in parts or [] if _length(p)]
        self._done: dict[str, Any] = {}

    def __len__(self) -> int:
        return sum(_length(p) for p in self.parts)

    def zero(self, name: str) -> bool:
        """Every request's ``name`` is zero (no part stores the field)."""
        return all(
            not p[name].any() if isinstance(p, dict) else name not in p.dtype.names
            for p in self.parts
        )

    def __getitem__(self, name: str) -> Any:
        found = self._done.get(name)
        if found is None:
            import numpy as np

            pieces = [_field(p, name) for p in self.parts]
            if not pieces:
                found = np.zeros(0, np.float64 if _KIND[name] == "f" else np.int8)
            else:
                found = np.concatenate(pieces)
            self._done[name] = found
        return found

    def take(self, which: Any) -> Columns:
        """The requests selected by ``which`` (a mask over every part, in order)."""
        out, at = [], 0
        for p in self.parts:
            n = _length(p)
            mine = which[at : at + n]
            out.append(p[mine] if not isinstance(p, dict) else {k: v[mine] for k, v in p.items()})
            at += n
        return Columns(out)


_KIND: Final = dict(FIELDS)


def _length(part: Any) -> int:
    return len(part["t0"]) if isinstance(part, dict) else len(part)


def _field(part: Any, name: str) -> Any:
    import numpy as np

    if isinstance(part, dict):
        return part[name]
    if name in part.dtype.names:
        return part[name]
    return np.zeros(len(part), np.float64 if _KIND[name] == "f" else np.int8)


def narrow_code(values: Any) -> str:
    """The type code a field's values are stored in: the narrowest integer type that
    holds them all (``z``: all zero), ``d`` for floats."""
    if not values.any():
        return "z"
    if values.dtype.kind == "f":
        return "d"
    lo, hi = int(values.min()), int(values.max())
    return next(c for c, top in _NARROW if -top <= lo and hi < top)


def narrowed(cols: dict[str, Any]) -> dict[str, Any]:
    """The same arrays, integers in their narrowest type (so that joining them with
    packs' fields widens nothing)."""
    out = {}
    for name, values in cols.items():
        code = narrow_code(values)
        out[name] = (
            values
            if values.dtype.kind == "f"
            else values.astype("<" + ("b" if code == "z" else code))
        )
    return out


def take(cols: dict[str, Any], which: Any) -> dict[str, Any]:
    """Arrays of the requests selected by ``which`` (a mask or indices)."""
    return {name: values[which] for name, values in cols.items()}


def encode(cols: dict[str, Any]) -> bytes:
    """One pack's bytes: a head (magic, format, count), one type code per field, then
    one record per request — its fields in :data:`FIELDS` order, each in the narrowest
    type every request's value fits (``z``: all zero, not stored)."""
    import numpy as np

    codes = [narrow_code(cols[name]) for name, _kind in FIELDS]
    layout = _layout("".join(codes))
    records = np.zeros(len(cols["t0"]), layout)
    for name in layout.names:
        records[name] = cols[name]
    head = _HEAD.pack(_MAGIC, FORMAT, len(records)) + "".join(codes).encode()
    return head + records.tobytes()


@functools.lru_cache(maxsize=256)
def _layout(codes: str) -> Any:
    """The record type of a pack whose fields have these type codes."""
    import numpy as np

    fields = [(name, "<" + code) for (name, _k), code in zip(FIELDS, codes) if code != "z"]
    return np.dtype(fields)


HEAD_BYTES: Final = _HEAD.size + len(FIELDS)


def whole(head: bytes, length: int) -> bool:
    """A pack whose first :data:`HEAD_BYTES` are ``head`` and whose length is ``length``
    is of this format and as long as its head says."""
    if len(head) < HEAD_BYTES:
        return False
    magic, fmt, n = _HEAD.unpack_from(head)
    if magic != _MAGIC or fmt != FORMAT:
        return False
    codes = head[_HEAD.size : HEAD_BYTES].decode("ascii", "replace")
    for (_name, kind), code in zip(FIELDS, codes):
        if not (code == "z" or (code == "d" if kind == "f" else code in "bhiq")):
            return False
    return bool(length == HEAD_BYTES + n * int(_layout(codes).itemsize))


def parse(blob: bytes) -> tuple[str, memoryview] | None:
    """A pack's type codes and records, or None for another format or a damaged pack
    (then its hour is read from the rows)."""
    if not whole(blob[:HEAD_BYTES], len(blob)):
        return None
    return blob[_HEAD.size : HEAD_BYTES].decode("ascii"), memoryview(blob)[HEAD_BYTES:]


def records(parsed: list[tuple[str, memoryview]]) -> list[Any]:
    """Parsed packs' records, one structured array per layout (the packs of one layout
    read together, from one buffer)."""
    import numpy as np

    by_layout: dict[str, list[memoryview]] = {}
    for codes, body in parsed:
        by_layout.setdefault(codes, []).append(body)
    return [np.frombuffer(b"".join(bodies), _layout(codes)) for codes, bodies in by_layout.items()]


def decode(blobs: list[bytes]) -> list[Any]:
    """Readable packs' records (:func:`records`); the others are left out."""
    return records([p for p in map(parse, blobs) if p is not None])
