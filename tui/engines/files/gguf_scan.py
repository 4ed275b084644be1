"""GGUF files already on this machine: found in the usual folders, described from their
headers (architecture, parameter count, quantisation, size).

The usual folders (:func:`default_gguf_roots`; ``[discovery] gguf_dirs`` replaces them):
llama.cpp's download cache, LM Studio's models folder, the Hugging Face hub cache, and
Ollama's model store, whose blobs have no names: there the manifests
(``manifests/HOST/NAMESPACE/MODEL/TAG``) name them.

Scanning is bounded: MAX_DEPTH folders deep, MAX_ENTRIES directory entries, MAX_FOUND
files, and a time budget; directory symlinks are never followed, and a file symlink only
when it points inside one of the roots (the Hugging Face cache's snapshots point at its
blobs). A link loop, or a folder that cannot be listed, is passed over (the notes count
the folders); a folder is listed only as far as the entry limit allows. Header reads
are bounded too (tui/engines/files/gguf.py: each within what is left of a second time
budget), and a file that is not a GGUF is left out.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tui.engines.base import EngineError
from tui.engines.files.gguf import FILE_TYPES, HEADER_TIME_S, _Reader, check_gguf, open_model_file
from tui.engines.servers.server_models import human_params, human_size

MAX_DEPTH = 8
MAX_ENTRIES = 20_000
MAX_FOUND = 500
SCAN_BUDGET_S = 3.0
MAX_TENSORS = 1_000_000  # a header claiming more is not read for its parameter count
MAX_MANIFEST_BYTES = 1 << 20
OLLAMA_MODEL_LAYER = "application/vnd.ollama.image.model"
_SUMMARY_KEYS = frozenset({"general.architecture", "general.file_type", "general.size_label"})
_SHARD = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$", re.IGNORECASE)


@dataclass
class GgufFile:
    """One GGUF file found; the header's facts are None until read (or unreadable)."""

    path: Path
    name: str  # file name, or the Ollama model name its manifest gives
    size_bytes: int
    source: str  # the root it was found under
    architecture: str | None = None
    parameters: int | None = None
    quantization: str | None = None
    error: str | None = None

    def details(self) -> str:
        """ "llama · 135M · Q4_1 · 97 MB" (what is known)."""
        parts = [
            self.architecture,
            human_params(self.parameters) if self.parameters else None,
            self.quantization,
            human_size(self.size_bytes),
        ]
        return " · ".join(p for p in parts if p)


@dataclass
class GgufScan:
    files: list[GgufFile] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # limits reached, unreadable roots


def default_gguf_roots(env: dict[str, str] | None = None) -> list[Path]:
    """The usual folders GGUF files live in (those that exist are scanned)."""
    env = dict(os.environ) if env is None else env
    home = Path(env.get("HOME") or Path.home())
    cache = Path(env.get("XDG_CACHE_HOME") or home / ".cache")
    hf_home = Path(env.get("HF_HOME") or cache / "huggingface")
    return [
        Path(env.get("LLAMA_CACHE") or cache / "llama.cpp"),
        home / ".lmstudio" / "models",
        cache / "lm-studio" / "models",
        Path(env.get("HF_HUB_CACHE") or hf_home / "hub"),
        Path(env.get("OLLAMA_MODELS") or home / ".ollama" / "models"),
    ]


def gguf_summary(
    path: Path, budget_s: float = HEADER_TIME_S
) -> tuple[str | None, int | None, str | None]:
    """(architecture, parameter count, quantisation) from a GGUF header: the metadata,
    then the tensor infos (each tensor's shape; no tensor data is read). EngineError on
    a file that is not a readable GGUF, or one past a bound of tui/engines/files/gguf.py's
    reader (within ``budget_s`` of wall time, the tensor infos included)."""
    check_gguf(path)
    try:
        with open_model_file(path) as f:
            r = _Reader(f, path, budget_s)
            _magic, _version, n_tensors, n_kv = struct.unpack("<4sIQQ", r.take(24))
            if n_tensors > r.size // 24:  # each tensor's info takes more
                raise EngineError(f"GGUF header claims {n_tensors} tensors: {path}")
            meta = r.metadata(n_kv, _SUMMARY_KEYS)
            params: int | None = None
            if n_tensors <= MAX_TENSORS:
                total = 0
                for i in range(n_tensors):
                    if not i & 0x3FF:
                        r.check_time()
                    r.skip(r.u64())  # name
                    n_dims = r.u32()
                    if n_dims > 8:
                        raise EngineError(f"GGUF tensor with {n_dims} dimensions: {path}")
                    count = 1
                    for _ in range(n_dims):
                        count *= r.u64()
                    r.take(12)  # type (u32), offset (u64)
                    total += count
                params = total
    except OSError as e:
        raise EngineError(f"cannot read model file {path}: {e.strerror}") from None
    except OverflowError:  # a length or count no file can hold
        raise EngineError(f"GGUF header holds an impossible length: {path}") from None
    arch = meta.get("general.architecture")
    ftype = meta.get("general.file_type")
    quant = FILE_TYPES.get(ftype) if isinstance(ftype, int) else None
    return (arch[:40] if isinstance(arch, str) else None), params, quant


def _inside(path: Path, roots: list[Path]) -> bool:
    return any(path == r or r in path.parents for r in roots)


def _resolved(path: Path) -> Path | None:
    """``path`` with every link followed; None for a link loop (Path.resolve raises
    RuntimeError on one before Python 3.13) or a path that cannot be looked at."""
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return None


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:  # a folder above it that we may not enter
        return False


class _Walk:
    def __init__(self, roots: list[Path], budget_s: float) -> None:
        found = (_resolved(r) for r in roots if _is_dir(r))
        self.roots = [r for r in found if r is not None]
        self.end = time.monotonic() + budget_s
        self.entries = 0
        self.unreadable = 0  # folders that could not be listed
        self.scan = GgufScan()
        self.stopped: str | None = None

    def over(self) -> bool:
        if self.stopped is None:
            if time.monotonic() > self.end:
                self.stopped = "time budget"
            elif self.entries >= MAX_ENTRIES:
                self.stopped = f"{MAX_ENTRIES} entries"
            elif len(self.scan.files) >= MAX_FOUND:
                self.stopped = f"{MAX_FOUND} files"
        return self.stopped is not None

    def add(self, path: Path, name: str, size: int, root: Path) -> None:
        if not self.over():
            self.scan.files.append(GgufFile(path, name, size, str(root)))

    def listing(self, folder: Path) -> list[os.DirEntry[str]]:
        """The folder's entries by name, at most as many as the entry limit has left
        (a folder of millions is not read whole); none when it cannot be listed."""
        try:
            with os.scandir(folder) as it:
                entries = list(itertools.islice(it, MAX_ENTRIES - self.entries + 1))
        except OSError:
            self.unreadable += 1
            return []
        return sorted(entries, key=lambda e: e.name)

    def run(self) -> GgufScan:
        for root in self.roots:
            if _is_dir(root / "manifests") and _is_dir(root / "blobs"):
                self.ollama(root)
            else:
                self.tree(root)
        if self.stopped:
            self.scan.notes.append(f"scan stopped at its limit ({self.stopped})")
        if self.unreadable:
            self.scan.notes.append(f"{self.unreadable} folder(s) could not be read")
        return self.scan

    def walk(
        self, top: Path, max_depth: int, hidden: bool = True
    ) -> Iterator[tuple[os.DirEntry[str], int]]:
        """Every entry below ``top`` that is not a folder, with its depth (0: in ``top``),
        within the entry limit; folders deeper than ``max_depth`` are not entered, nor
        dot folders unless ``hidden``; links are not followed into folders."""
        todo = [(top, 0)]
        while todo and not self.over():
            folder, depth = todo.pop()
            for e in self.listing(folder):
                self.entries += 1
                if self.over():
                    return
                try:
                    if e.is_dir(follow_symlinks=False):
                        if depth + 1 <= max_depth and (hidden or not e.name.startswith(".")):
                            todo.append((Path(e.path), depth + 1))
                        continue
                except OSError:
                    continue
                yield e, depth

    def tree(self, root: Path) -> None:
        for e, _ in self.walk(root, MAX_DEPTH - 1, hidden=False):
            try:
                if not e.name.lower().endswith(".gguf"):
                    continue
                shard = _SHARD.search(e.name)
                if shard and int(shard.group(1)) != 1:
                    continue  # a split model opens by its first part
                path = Path(e.path)
                if e.is_symlink():
                    target = _resolved(path)  # None: a link loop
                    if target is None or not _inside(target, self.roots):
                        continue  # never out of the roots
                    if not target.is_file():
                        continue
                elif not e.is_file(follow_symlinks=False):
                    continue
                self.add(path, e.name, path.stat().st_size, root)
            except OSError:
                continue

    def ollama(self, root: Path) -> None:
        """Ollama's store: each manifest's model layer is a blob holding the GGUF."""
        for e, depth in self.walk(root / "manifests", 4):
            try:
                if depth == 3 and e.is_file(follow_symlinks=False):
                    self.ollama_manifest(root, Path(e.path))
            except OSError:
                continue

    def ollama_manifest(self, root: Path, manifest: Path) -> None:
        host, namespace, model = manifest.parts[-4:-1]
        tag = manifest.name
        name = f"{model}:{tag}"
        if not (host == "registry.ollama.ai" and namespace == "library"):
            name = f"{host}/{namespace}/{name}"
        try:
            if manifest.stat().st_size > MAX_MANIFEST_BYTES:
                return
            data = json.loads(manifest.read_bytes())
        except (OSError, ValueError, RecursionError):
            return
        layers = data.get("layers") if isinstance(data, dict) else None
        for layer in layers if isinstance(layers, list) else []:
            if not isinstance(layer, dict) or layer.get("mediaType") != OLLAMA_MODEL_LAYER:
                continue
            digest = layer.get("digest")
            if not isinstance(digest, str) or not re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
                continue
            blob = root / "blobs" / digest.replace(":", "-")
            try:
                if blob.is_file() and not blob.is_symlink():
                    self.add(blob, name, blob.stat().st_size, root)
            except OSError:
                pass
            return


def scan_ggufs(
    roots: list[Path], budget_s: float = SCAN_BUDGET_S, read_headers: bool = True
) -> GgufScan:
    """GGUF files under ``roots`` (see the module docstring for the bounds), each
    described from its header while a second time budget lasts (a header takes tens of
    ms); files that are not GGUF are dropped."""
    walk = _Walk(roots, budget_s)
    scan = walk.run()
    if not read_headers:
        return scan
    t0 = time.monotonic()  # the headers have a budget of their own
    kept = []
    for i, f in enumerate(scan.files):
        if time.monotonic() - t0 > budget_s:
            scan.notes.append(f"headers of {len(scan.files) - i} file(s) not read (time budget)")
            kept += scan.files[i:]
            break
        left = budget_s - (time.monotonic() - t0)
        try:
            f.architecture, f.parameters, f.quantization = gguf_summary(
                f.path, min(HEADER_TIME_S, left)
            )
        except EngineError as e:
            if "not a GGUF" in str(e) or "GGUF version" in str(e):
                continue
            f.error = str(e)
        kept.append(f)
    scan.files = kept
    return scan
