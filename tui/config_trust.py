"""Which ``./infertop.toml`` files the user has trusted, by path and content hash.

A config can send a secret (``api_key_env`` names any environment variable, sent as a
Bearer token to ``url``; ``headers``) and run a program (``options.binary``). A config
the user named (``--config PATH``, ``$INFERTOP_CONFIG``) or keeps in their own config
folder is theirs. One found in the current folder may have come with a clone: infertop
uses it only once the user has run ``infertop trust`` on it (as direnv's ``allow`` or
mise's ``trust``), and only while its content is what was trusted — an edited file must
be trusted again. Until then it is ignored, with a one-line notice naming the command.

The store is ``trusted.json`` in the user's config folder (platformdirs; 0600 in a
0700 folder): ``{"version": 1, "files": {ABSOLUTE_PATH: SHA256_HEX}}``. A store that
cannot be read trusts nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Literal

# A ./infertop.toml as the trust store knows it: trusted as it is, changed since, or never.
TrustState = Literal["trusted", "changed", "untrusted"]
TRUST_COMMAND = "infertop trust"
STORE_LIMIT = 4 * 1024 * 1024  # bytes: a store bigger than this is not ours


def store_path() -> Path:
    """Where the trusted files are listed."""
    import platformdirs

    return Path(platformdirs.user_config_dir("infertop")) / "trusted.json"


def digest(data: bytes) -> str:
    """The content hash a trust entry holds (SHA-256, hex)."""
    return hashlib.sha256(data).hexdigest()


def canonical(path: Path) -> str:
    """The key of ``path`` in the store: absolute, symlinks resolved."""
    return str(Path(path).expanduser().resolve())


def trusted_files() -> dict[str, str]:
    """Path -> hash of every trusted file; {} when the store is missing or unreadable."""
    try:
        with store_path().open("rb") as f:
            raw = f.read(STORE_LIMIT + 1)
    except OSError:
        return {}
    if len(raw) > STORE_LIMIT:
        return {}
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return {}
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict):
        return {}
    return {k: v for k, v in files.items() if isinstance(k, str) and isinstance(v, str)}


def trust_state(path: Path, content: bytes) -> TrustState:
    """ "trusted", "changed" (trusted once, edited since) or "untrusted"."""
    known = trusted_files().get(canonical(path))
    if known is None:
        return "untrusted"
    return "trusted" if known == digest(content) else "changed"


def trusted_local(path: Path, notices: list[str] | None) -> Path | None:
    """``path`` (a config in the current folder) when it exists and is trusted as it is
    now; else None, and when it exists, why it is skipped goes to ``notices``."""
    if not path.is_file():
        return None
    try:
        state = trust_state(path, path.read_bytes())
    except OSError:
        state = "untrusted"
    if state == "trusted":
        return path
    if notices is not None:
        notices.append(untrusted_notice(path, state))
    return None


def untrusted_notice(path: Path, state: TrustState) -> str:
    """The one line shown when a config in the current folder is ignored."""
    why = "it changed since you trusted it" if state == "changed" else "it is not trusted yet"
    return (
        f"ignoring {path} ({why}: a config can send API keys and run programs); "
        f"to use it, check it and run: {TRUST_COMMAND} {path}"
    )


def set_trust(path: Path, content: bytes | None) -> Path:
    """Trust ``path`` with ``content``'s hash (None: forget it); returns the store's path.
    OSError when the store cannot be written."""
    files = trusted_files()
    key = canonical(path)
    if content is None:
        files.pop(key, None)
    else:
        files[key] = digest(content)
    store = store_path()
    store.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    text = json.dumps({"version": 1, "files": files}, indent=1, sort_keys=True) + "\n"
    fd, tmp = tempfile.mkstemp(dir=store.parent, prefix=".trusted.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:  # mkstemp: 0600
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, store)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return store
