"""Where a config value sits and what it may be: the checks behind every
:class:`ConfigError`, each naming the file, the key as TOML writes it and (where found)
its line (tui/config.py uses them; the schema lives there)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit


class ConfigError(Exception):
    """A config file that cannot be used; the message names file, key and line."""


NUM = (int, float)  # a schema's "a number": ints and floats, read as float

KeyPath = tuple[str, ...]
MAX_DEPTH = 32  # tables and arrays nested deeper than this are no config (and recurse)
TOML_INT = range(-(2**63), 2**63)  # TOML 1.0: integers are 64-bit signed
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # an HTTP token (RFC 9110 5.6.2)


def key_text(key_path: KeyPath) -> str:
    """A key path as TOML writes it: ``engines."b.c".kind`` (quoted where not bare)."""
    return ".".join(
        k if _BARE_KEY.fullmatch(k) else json.dumps(k, ensure_ascii=False) for k in key_path
    )


def _brief(value: Any) -> str:
    """A value for a message: its repr, cut to one short line."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class Validator:
    """Checks values of one config file (its text, for line numbers)."""

    def __init__(self, text: str, path: Path) -> None:
        self.lines = text.splitlines()
        self.path = path

    def line_of(self, key_path: KeyPath) -> int | None:
        """Best-effort line of a key: ``key =`` in its table's body (the lines from the
        table's header to the next header), else a header naming the key itself. None
        when not found: never a guess."""
        names = [_key_pattern(k) for k in key_path]
        body = 0 if len(names) == 1 else self._header(names[:-1], exact=True)
        if body is not None:
            key_re = re.compile(r"^\s*" + names[-1] + r"\s*=")
            for i in range(body, len(self.lines)):
                if key_re.match(self.lines[i]):
                    return i + 1
                if self.lines[i].lstrip().startswith("["):
                    break  # the next table: the key was not written in this one
        return self._header(names, exact=False)

    def _header(self, names: list[str], exact: bool) -> int | None:
        """The line number of the first header naming ``names`` (or, not exact, a table
        inside it)."""
        end = r"\s*\]" if exact else r"\s*[\].]"
        header = re.compile(r"^\s*\[\[?\s*" + r"\s*\.\s*".join(names) + end)
        for i, line in enumerate(self.lines):
            if header.match(line):
                return i + 1
        return None

    def error(self, key_path: KeyPath, what: str) -> ConfigError:
        """ConfigError naming the file, the key and its line (else the line of the table
        or inline value that holds it)."""
        lines = (self.line_of(key_path[:n]) for n in range(len(key_path), 0, -1))
        line = next((n for n in lines if n), None)
        where = f"{self.path}:{line}" if line else str(self.path)
        return ConfigError(f"{where}: key '{key_text(key_path)}': {what}")

    def check(self, key_path: KeyPath, value: Any, types: tuple[type, ...]) -> None:
        ok = isinstance(value, types) and not (isinstance(value, bool) and bool not in types)
        if not ok:
            want = " or ".join(t.__name__ for t in types).replace("dict", "table")
            raise self.error(
                key_path, f"expected {want}, got {type(value).__name__} ({_brief(value)})"
            )

    def table(
        self, key_path: KeyPath, value: Any, schema: dict[str, tuple[tuple[type, ...], str]]
    ) -> dict[str, Any]:
        self.check(key_path, value, (dict,))
        out: dict[str, Any] = {}
        for key, item in value.items():
            if key not in schema:
                raise self.error((*key_path, key), "unknown key")
            self.check((*key_path, key), item, schema[key][0])
            if schema[key][0] is NUM:
                item = float(item)  # walk() kept every int within 64 bits
                if not math.isfinite(item):
                    raise self.error((*key_path, key), f"must be a finite number, not {item}")
            out[key] = item
        return out

    def header(self, key_path: KeyPath, name: str, value: Any) -> None:
        """An HTTP header: a token for a name, a one-line string for a value."""
        if not _HEADER_NAME.fullmatch(name):
            raise self.error(key_path, "is not an HTTP header name")
        self.check(key_path, value, (str,))
        if any(c in value for c in "\r\n\0"):
            raise self.error(key_path, "a header value cannot hold CR, LF or NUL")

    def url(self, key_path: KeyPath, value: Any, what: str = "") -> None:
        """An http(s) URL with a host."""
        if not isinstance(value, str):
            raise self.error(
                key_path, f"{what}expected str, got {type(value).__name__} ({_brief(value)})"
            )
        try:
            parts = urlsplit(value.strip())
            ok = parts.scheme in ("http", "https") and bool(parts.hostname)
        except ValueError:
            ok = False
        if not ok:
            raise self.error(key_path, f"{what}not an http(s) URL: {_brief(value)}")

    def walk(self, data: dict[str, Any]) -> None:
        """Every value in the document: integers within TOML's 64 bits (tomllib takes any
        size), tables and arrays nested at most MAX_DEPTH deep. Iterative: the document
        may be deeper than Python's recursion limit."""
        todo: list[tuple[KeyPath, int, Any]] = [((), 0, data)]
        while todo:
            key_path, depth, value = todo.pop()
            if depth > MAX_DEPTH:
                raise self.error(key_path, f"nested more than {MAX_DEPTH} deep")
            if isinstance(value, dict):
                todo.extend(((*key_path, k), depth + 1, item) for k, item in value.items())
            elif isinstance(value, list):
                todo.extend((key_path, depth + 1, item) for item in value)
            elif isinstance(value, int) and value not in TOML_INT:
                raise self.error(key_path, "integer out of TOML's 64-bit range")


def _key_pattern(key: str) -> str:
    """A regex for one key as TOML may write it: bare, "basic" or 'literal'."""
    forms = [json.dumps(key, ensure_ascii=False), "'" + key + "'"]
    if _BARE_KEY.fullmatch(key):
        forms.append(key)
    return "(?:" + "|".join(map(re.escape, forms)) + ")"
