"""Crafted GGUF headers against the pure-Python reader (tui/engines/files/gguf.py) and its
callers: arrays nested thousands deep (a 36 KB file), the 23 MB shape (5600 arrays of
4096 bytes: on main 13-19 s and ~200 MB), kept arrays past the value budget, counts no
file holds, text past the kept-bytes budget, a wall-time budget, a FIFO named ``.gguf``;
and a loopback llama-server whose /props names such a file: ``run --url`` answers, the
KV line says why it has no layout, no traceback.

Memory is measured with tracemalloc (the reader's own allocations), never wall time."""

from __future__ import annotations

import os
import struct
import subprocess
import tracemalloc
from pathlib import Path

import pytest

from tui.engines.base import EngineError
from tui.engines.files import gguf
from tui.engines.files.gguf import check_gguf, read_gguf_metadata
from tui.engines.files.gguf_scan import gguf_summary, scan_ggufs
from tui.engines.http.llama_server import server_kv_layout

U8, STRING, ARRAY = 0, 8, 9


def _s(b: bytes) -> bytes:
    return struct.pack("<Q", len(b)) + b


def _file(path: Path, *kvs: bytes, n_tensors: int = 1, tail: bytes = b"") -> Path:
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, n_tensors, len(kvs)) + b"".join(kvs) + tail)
    return path


def _kv(key: str, vtype: int, payload: bytes) -> bytes:
    return _s(key.encode()) + struct.pack("<I", vtype) + payload


def _tensor(name: bytes, *dims: int) -> bytes:
    """One tensor info: name, dimensions, type (f32), offset."""
    return _s(name) + struct.pack(f"<I{len(dims)}QIQ", len(dims), *dims, 0, 0)


def nested(depth: int) -> bytes:
    """A key whose value is an array of an array of ... (``depth`` times) of one byte."""
    value = struct.pack("<IQ", U8, 1) + b"\x07"
    for _ in range(depth):
        value = struct.pack("<IQ", ARRAY, 1) + value
    return _kv("k", ARRAY, value)


def arrays_of_bytes(outer: int, inner: int) -> bytes:
    """A key whose value is ``outer`` arrays of ``inner`` bytes each."""
    one = struct.pack("<IQ", U8, inner) + b"\x01" * inner
    return _kv("k", ARRAY, struct.pack("<IQ", ARRAY, outer) + one * outer)


# a header read's time budget where another bound is under test: the 2 s default tripped
# first at a load average of 14 (test_one_header_read_has_a_wall_time_budget tests it)
LOADED_S = 60.0


def test_arrays_nested_thousands_deep_are_refused(tmp_path: Path) -> None:
    """36 KB of arrays 3000 deep (on main: RecursionError out of every reader)."""
    path = _file(tmp_path / "nested.gguf", nested(3000))
    assert 35_000 < path.stat().st_size < 37_000
    for read in (read_gguf_metadata, gguf_summary):
        with pytest.raises(EngineError, match=f"nests arrays more than {gguf.MAX_NESTING} deep"):
            read(path)
    # nesting within the bound is read
    ok = _file(tmp_path / "ok.gguf", nested(gguf.MAX_NESTING - 1))
    value = read_gguf_metadata(ok)["k"]
    for _ in range(gguf.MAX_NESTING - 1):
        value = value[0]
    assert value == [7]


def _peak_mib(fn) -> float:  # type: ignore[no-untyped-def]
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def test_the_23_mb_shape_is_skipped_not_built(tmp_path: Path) -> None:
    """5600 arrays of 4096 bytes (23 MB; on main every byte became a Python int in a
    list: 13-19 s, ~200 MB): an array too long to keep is skipped whole, its inner
    arrays by seeking."""
    path = _file(
        tmp_path / "shape.gguf",
        arrays_of_bytes(5600, 4096),
        _kv("general.architecture", STRING, _s(b"llama")),
    )
    assert path.stat().st_size > 23_000_000
    out: dict[str, object] = {}
    # the bound under test is not time (a loaded machine must not trip the 2 s one first)
    peak = _peak_mib(lambda: out.update(read_gguf_metadata(path, budget_s=LOADED_S)))
    assert out == {"general.architecture": "llama"}
    assert peak < 4, f"{peak:.1f} MiB"


def test_kept_arrays_past_the_value_budget_are_refused(tmp_path: Path) -> None:
    """4096 arrays of 4096 bytes: short enough to keep, 16.8 M values in all (on main
    all read into lists)."""
    path = _file(tmp_path / "kept.gguf", arrays_of_bytes(4096, 4096))
    box: list[BaseException] = []

    def read() -> None:
        try:
            read_gguf_metadata(path, budget_s=LOADED_S)  # the value bound, not time's
        except EngineError as e:
            box.append(e)

    peak = _peak_mib(read)
    assert box and f"more than {gguf.MAX_VALUES} values" in str(box[0])
    assert peak < 64, f"{peak:.1f} MiB"


@pytest.mark.parametrize(
    ("kvs", "why"),
    [
        # an array claiming 2**62 arrays, with 1 KB of data behind it
        ((_kv("k", ARRAY, struct.pack("<IQ", ARRAY, 2**62) + b"\0" * 1024),), "cut short"),
        # 2**62 arrays of 2**62 bytes each
        ((_kv("k", ARRAY, struct.pack("<IQIQ", ARRAY, 2**62, U8, 2**62)),), "cut short"),
        # an array of an unknown item type
        ((_kv("k", ARRAY, struct.pack("<IQ", 77, 5000)),), "unknown value type 77"),
        # 5 strings of 4 MiB kept: past the kept-bytes budget (16 MiB)
        (
            (
                _kv(
                    "k",
                    ARRAY,
                    struct.pack("<IQ", STRING, 5) + _s(b"x" * (4 << 20)) * 5,
                ),
            ),
            "bytes of text",
        ),
    ],
)
def test_huge_counts_are_refused(tmp_path: Path, kvs: tuple[bytes, ...], why: str) -> None:
    path = _file(tmp_path / "counts.gguf", *kvs)
    with pytest.raises(EngineError, match=why):
        read_gguf_metadata(path)


def test_one_header_read_has_a_wall_time_budget(model_path: Path) -> None:
    """The real SmolLM2's header (a 49,152-token vocabulary to skip), given no time: the
    read stops at its budget with a message saying so (on main no budget existed)."""
    assert read_gguf_metadata(model_path)["general.architecture"] == "llama"
    with pytest.raises(EngineError, match="not read within 0 s"):
        read_gguf_metadata(model_path, budget_s=0.0)
    with pytest.raises(EngineError, match="not read within 0 s"):
        gguf_summary(model_path, budget_s=0.0)


def test_a_fifo_named_gguf_is_refused_not_waited_on(tmp_path: Path) -> None:
    """A FIFO holding 24 bytes of a GGUF header (kept open here, so the open and the
    read return on main): refused as not a regular file."""
    fifo = tmp_path / "pipe.gguf"
    os.mkfifo(fifo)
    keep = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
    try:
        os.write(keep, b"GGUF" + struct.pack("<IQQ", 3, 1, 0))
        with pytest.raises(EngineError, match="not a regular file"):
            check_gguf(fifo)
    finally:
        os.close(keep)


def test_a_scan_lists_the_crafted_files_with_their_errors(tmp_path: Path) -> None:
    root = tmp_path / "models"
    root.mkdir()
    _file(root / "nested.gguf", nested(3000))
    arch = _kv("general.architecture", STRING, _s(b"llama"))
    _file(root / "fine.gguf", arch, tail=_tensor(b"t", 10, 3))
    scan = scan_ggufs([root])
    by_name = {f.name: f for f in scan.files}
    assert (by_name["fine.gguf"].architecture, by_name["fine.gguf"].parameters) == ("llama", 30)
    assert "nests arrays" in (by_name["nested.gguf"].error or "")


def test_server_kv_layout_says_why_for_crafted_files(tmp_path: Path) -> None:
    """What llama-server's /props names, read for the KV line: nested arrays, a
    block_count of 2**62 (on main: a list of 2**62 items, MemoryError) and one of
    5000 digits as text (on main: ValueError) each give a reason, not an exception."""
    arch = _kv("general.architecture", STRING, _s(b"llama"))
    heads = _kv("llama.attention.head_count", 4, struct.pack("<I", 4))
    cases = {
        "nested": (_file(tmp_path / "n.gguf", nested(3000)), "nests arrays"),
        "layers": (
            _file(
                tmp_path / "l.gguf",
                arch,
                _kv("llama.block_count", 10, struct.pack("<Q", 2**62)),
                heads,
            ),
            "is no model's",
        ),
        "digits": (
            _file(
                tmp_path / "d.gguf", arch, _kv("llama.block_count", STRING, _s(b"9" * 5000)), heads
            ),
            "no llama.block_count",
        ),
    }
    for name, (path, why) in cases.items():
        layout, reason = server_kv_layout("http://127.0.0.1:8080", str(path))
        assert layout is None and why in reason, (name, reason)


def test_run_url_on_a_server_whose_props_names_a_crafted_file(
    hostile_bench, launcher, clean_env, tmp_path: Path
) -> None:
    """The review's case: a loopback llama-server (the hostile server's props-gguf mode)
    whose /props names a 36 KB file of nested arrays. On main `run --url` died with a
    RecursionError traceback; now the answer streams and the run ends cleanly."""
    hostile, server = hostile_bench
    server.props_model_path = str(_file(tmp_path / "nested.gguf", nested(3000)))
    p = subprocess.run(
        [*launcher, "run", "--url", f"{hostile}/props-gguf", "--prompt", "hi", "--json"],
        env=clean_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in p.stderr, p.stderr
    assert p.returncode == 0, p.stderr
    assert '"text": "Hello"' in p.stdout, p.stdout
