"""GGUF files found in the usual folders (a temp copy of each layout): llama.cpp's cache,
the Hugging Face hub cache (snapshot symlinks to blobs), Ollama's store (manifests name
the blobs); symlinks out of the roots, directory symlinks, split shards, files that are
not GGUF, depth and count limits; headers read for arch, parameters and quantisation; and
hostile headers (cut short, huge lengths, impossible counts) refused quickly."""

from __future__ import annotations

import hashlib
import json
import os
import struct
import time
from pathlib import Path

import pytest

from tui.engines.base import EngineError
from tui.engines.files import gguf_scan
from tui.engines.files.gguf_scan import default_gguf_roots, gguf_summary, scan_ggufs

SMOLLM2_PARAMS = 134_515_008  # what llama-server's /v1/models says (meta.n_params)


@pytest.fixture(scope="module")
def gguf_copy(model_path: Path, tmp_path_factory) -> Path:  # type: ignore[no-untyped-def]
    """One copy of the real GGUF in a temp folder (hard links to it fill the layouts)."""
    d = tmp_path_factory.mktemp("gguf-src")
    out = d / "SmolLM2-135M-Instruct.Q4_1.gguf"
    out.write_bytes(model_path.read_bytes())
    return out


def _link(src: Path, dst: Path) -> Path:
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        dst.write_bytes(src.read_bytes())
    return dst


def _layouts(root: Path, gguf: Path) -> dict[str, Path]:
    """llama.cpp cache, HF hub cache and Ollama store under ``root``."""
    llama = root / "llama.cpp"
    _link(gguf, llama / "bartowski_SmolLM2-135M-Instruct-Q4_1.gguf")
    hub = root / "hub"
    repo = hub / "models--HuggingFaceTB--SmolLM2-135M-Instruct-GGUF"
    blob = _link(gguf, repo / "blobs" / ("a" * 64))
    snap = repo / "snapshots" / "0123abcd"
    snap.mkdir(parents=True)
    (snap / "smollm2-135m-instruct-q4_1.gguf").symlink_to(os.path.relpath(blob, snap))
    ollama = root / "ollama"
    digest = hashlib.sha256(b"smollm2").hexdigest()
    _link(gguf, ollama / "blobs" / f"sha256-{digest}")
    manifest = ollama / "manifests" / "registry.ollama.ai" / "library" / "smollm2" / "135m"
    manifest.parent.mkdir(parents=True)
    manifest.write_text(
        json.dumps(
            {
                "schemaVersion": 2,
                "layers": [
                    {"mediaType": "application/vnd.ollama.image.template", "digest": "x"},
                    {"mediaType": gguf_scan.OLLAMA_MODEL_LAYER, "digest": f"sha256:{digest}"},
                ],
            }
        )
    )
    return {"llama": llama, "hub": hub, "ollama": ollama}


def test_usual_folders_are_found_and_described(gguf_copy: Path, tmp_path: Path) -> None:
    roots = _layouts(tmp_path, gguf_copy)
    scan = scan_ggufs(list(roots.values()))
    by_name = {f.name: f for f in scan.files}
    assert set(by_name) == {
        "bartowski_SmolLM2-135M-Instruct-Q4_1.gguf",
        "smollm2-135m-instruct-q4_1.gguf",
        "smollm2:135m",  # Ollama's blob, named by its manifest
    }
    for f in scan.files:
        assert (f.architecture, f.parameters, f.quantization) == ("llama", SMOLLM2_PARAMS, "Q4_1")
        assert f.size_bytes == gguf_copy.stat().st_size
        assert f.details() == "llama · 135M · Q4_1 · 98 MB"  # 97.6 MB on disk
    assert scan.notes == []


def test_symlinks_out_of_the_roots_are_not_followed(gguf_copy: Path, tmp_path: Path) -> None:
    root = tmp_path / "models"
    root.mkdir()
    (root / "outside.gguf").symlink_to(gguf_copy)  # a file link out of the root
    (root / "linked-dir").symlink_to(gguf_copy.parent, target_is_directory=True)
    _link(gguf_copy, root / "inside.gguf")
    (root / "alias.gguf").symlink_to(root / "inside.gguf")  # a link within: kept
    names = sorted(f.name for f in scan_ggufs([root]).files)
    assert names == ["alias.gguf", "inside.gguf"]


def test_shards_non_gguf_files_and_limits(
    gguf_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "m"
    _link(gguf_copy, root / "big-00001-of-00002.gguf")
    (root / "big-00002-of-00002.gguf").write_bytes(b"GGUF" + b"\0" * 100)
    (root / "notes.gguf").write_text("not a model at all")
    deep = root
    for i in range(gguf_scan.MAX_DEPTH + 2):
        deep = deep / f"d{i}"
    _link(gguf_copy, deep / "too-deep.gguf")
    names = [f.name for f in scan_ggufs([root]).files]
    assert names == ["big-00001-of-00002.gguf"]

    many = tmp_path / "many"
    for i in range(30):
        (many / f"x{i}").mkdir(parents=True)
        _link(gguf_copy, many / f"x{i}" / f"m{i}.gguf")
    monkeypatch.setattr(gguf_scan, "MAX_FOUND", 5)
    scan = scan_ggufs([many], read_headers=False)
    assert len(scan.files) == 5
    assert scan.notes == ["scan stopped at its limit (5 files)"]


def test_missing_roots_and_defaults(tmp_path: Path) -> None:
    assert scan_ggufs([tmp_path / "nope"]).files == []
    roots = default_gguf_roots({"HOME": str(tmp_path), "OLLAMA_MODELS": "/srv/ollama"})
    assert tmp_path / ".cache" / "llama.cpp" in roots
    assert tmp_path / ".cache" / "huggingface" / "hub" in roots
    assert tmp_path / ".lmstudio" / "models" in roots
    assert Path("/srv/ollama") in roots


def _header(n_tensors: int, n_kv: int) -> bytes:
    return struct.pack("<4sIQQ", b"GGUF", 3, n_tensors, n_kv)


def _kv_string(key: str, value_len: int, value: bytes = b"") -> bytes:
    k = key.encode()
    return (
        struct.pack("<Q", len(k)) + k + struct.pack("<I", 8) + struct.pack("<Q", value_len) + value
    )


@pytest.mark.parametrize(
    "data",
    [
        _header(1, 2**63),  # more keys than bytes
        _header(1, 1) + _kv_string("general.architecture", 2**40),  # a 1 TB string
        _header(1, 1) + _kv_string("general.architecture", 50, b"llama"),  # cut short
        _header(2**62, 0) + b"\x01" * 64,  # tensor infos that are not there
        _header(1, 1)  # an array of 2**63 eight-byte items: an impossible seek
        + struct.pack("<Q", 1)
        + b"a"
        + struct.pack("<IIQ", 9, 10, 2**63),
        _header(1, 0) + struct.pack("<Q", 1) + b"t" + struct.pack("<I", 4000),  # 4000 dims
        _header(1, 1)  # 2**62 strings in 4 MiB of empty ones: cut short, read in blocks
        + struct.pack("<Q", 1)
        + b"v"
        + struct.pack("<IIQ", 9, 8, 2**62)
        + b"\0" * (4 << 20),
    ],
)
def test_hostile_headers_are_refused_quickly(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "bad.gguf"
    path.write_bytes(data)
    t0 = time.perf_counter()
    with pytest.raises(EngineError):
        gguf_summary(path)
    assert time.perf_counter() - t0 < 1.0
    # and a scan keeps going past it (listed, with its error, or left out)
    scan = scan_ggufs([tmp_path])
    assert all(f.architecture is None for f in scan.files)


def test_hostile_ollama_manifests(gguf_copy: Path, tmp_path: Path) -> None:
    """Manifests that are not JSON, too big, nested too deep, of odd shapes, or whose
    digest climbs out of the store: none is followed; the good one still is."""
    store = tmp_path / "ollama"
    digest = hashlib.sha256(b"good").hexdigest()
    _link(gguf_copy, store / "blobs" / f"sha256-{digest}")
    _link(gguf_copy, tmp_path / "secret.gguf")  # outside the store
    lib = store / "manifests" / "registry.ollama.ai" / "library"
    layer = gguf_scan.OLLAMA_MODEL_LAYER
    manifests = {
        "good/1b": {"layers": [{"mediaType": layer, "digest": f"sha256:{digest}"}]},
        "escape/1b": {"layers": [{"mediaType": layer, "digest": "sha256:../../../secret.gguf"}]},
        "shapes/1b": {"layers": {"mediaType": layer}},
        "list/1b": [1, 2, 3],
        "missing/1b": {"layers": [{"mediaType": layer, "digest": "sha256:" + "0" * 64}]},
    }
    for name, body in manifests.items():
        path = lib / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(body))
    (lib / "notjson").mkdir()
    (lib / "notjson" / "1b").write_text("{not json")
    (lib / "deep").mkdir()
    (lib / "deep" / "1b").write_text("[" * 100_000)
    (lib / "big").mkdir()
    (lib / "big" / "1b").write_bytes(b" " * (gguf_scan.MAX_MANIFEST_BYTES + 1))
    t0 = time.perf_counter()
    scan = scan_ggufs([store])
    assert time.perf_counter() - t0 < 5
    assert [(f.name, f.path.name) for f in scan.files] == [("good:1b", f"sha256-{digest}")]


def test_symlink_loops_are_passed_over(gguf_copy: Path, tmp_path: Path) -> None:
    """A link to itself, two links to each other and a folder link to its parent (on
    main the first raised RuntimeError out of the scan): the real file is still found."""
    root = tmp_path / "models"
    _link(gguf_copy, root / "real.gguf")
    (root / "self.gguf").symlink_to("self.gguf")
    (root / "a.gguf").symlink_to("b.gguf")
    (root / "b.gguf").symlink_to("a.gguf")
    (root / "up").symlink_to("..", target_is_directory=True)
    scan = scan_ggufs([root, root / "self.gguf"])
    assert [f.name for f in scan.files] == ["real.gguf"]
    assert scan.files[0].architecture == "llama"


def _nobody() -> tuple[int, int] | None:
    """(uid, gid) of ``nobody`` when this test runs as root with setpriv to drop to it."""
    import pwd
    import shutil

    if os.getuid() != 0 or shutil.which("setpriv") is None:
        return None
    try:
        pw = pwd.getpwnam("nobody")
    except KeyError:
        return None
    return pw.pw_uid, pw.pw_gid


def test_unreadable_folders_are_passed_over_and_counted(gguf_copy: Path) -> None:
    """A folder the scanning user may not list (mode 0): the rest is scanned and the
    notes count it. Root lists any folder, so as root the scan runs as ``nobody``."""
    import subprocess
    import sys
    import tempfile

    top = Path(tempfile.mkdtemp(prefix="gguf-perm-"))
    try:
        os.chmod(top, 0o755)
        root = top / "models"
        _link(gguf_copy, root / "ok" / "fine.gguf")
        _link(gguf_copy, root / "locked" / "hidden.gguf")
        for p in (root, root / "ok"):
            os.chmod(p, 0o755)
        os.chmod(root / "ok" / "fine.gguf", 0o644)
        os.chmod(root / "locked", 0)
        code = (
            "import json, sys; from pathlib import Path; "
            "from tui.engines.files.gguf_scan import scan_ggufs; "
            "s = scan_ggufs([Path(sys.argv[1])]); "
            "print(json.dumps([[f.name for f in s.files], s.notes]))"
        )
        argv = [sys.executable, "-c", code, str(root)]
        ids = _nobody()
        if os.getuid() == 0:
            if ids is None:
                pytest.skip("running as root without setpriv/nobody: every folder is readable")
            uid, gid = ids
            argv = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", *argv]
        root_of_repo = Path(__file__).resolve().parents[2]
        env = {**os.environ, "PYTHONPATH": str(root_of_repo)}
        p = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env, cwd=top)
        assert p.returncode == 0, p.stderr
        names, notes = json.loads(p.stdout)
        assert names == ["fine.gguf"]
        assert notes == ["1 folder(s) could not be read"]
    finally:
        os.chmod(root / "locked", 0o755)
        import shutil

        shutil.rmtree(top)


def test_a_folder_is_listed_only_as_far_as_the_entry_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder of 300 entries with a limit of 50: at most 51 are read from it (on main
    the whole folder was read into memory before the limit was looked at)."""
    for i in range(300):
        (tmp_path / f"f{i:03}.txt").touch()
    monkeypatch.setattr(gguf_scan, "MAX_ENTRIES", 50)
    walk = gguf_scan._Walk([tmp_path], 3.0)
    assert len(walk.listing(tmp_path)) == 51
    assert walk.run().notes == ["scan stopped at its limit (50 entries)"]
