"""Prompts from a user's dataset file, read as hostile input.

Formats (decided by the first non-space byte):

- **JSON array**, ShareGPT-style: each item an object with ``conversations`` (or
  ``messages``): a list of turns ``{"from": "human"|"gpt"|..., "value": TEXT}`` or
  ``{"role": "user"|"assistant"|..., "content": TEXT}``; the prompt is the first human /
  user turn's text. Items may also be ``{"prompt": TEXT}`` or a bare string.
- **JSONL**: one JSON value per line, each as above (blank lines skipped).

Limits: at most ``max_bytes`` read (a bigger file is refused, not truncated), at most
``max_records`` prompts used (the rest are counted as skipped), each prompt at most
``max_prompt_chars`` (longer ones refused with their position). Any error names the file
and the line (JSONL) or item index (JSON), and the key. Cost is linear in the file's size:
one ``json`` parse (the standard library's, recursion-limited: a deeply nested file is an
error, not a crash; so is a number longer than Python's ``int`` reads, 4300 digits).
Items without a human turn are skipped and counted.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MAX_BYTES = 64 * 2**20
MAX_RECORDS = 100_000
MAX_PROMPT_CHARS = 100_000
HUMAN = ("human", "user")


def _too_long() -> str:
    """What an integer that ``int`` refuses is, in words (its limit: 4300 digits unless
    PYTHONINTMAXSTRDIGITS says otherwise)."""
    limit = getattr(sys, "get_int_max_str_digits", lambda: 4300)()
    return f"a number of more than {limit} digits"


class DatasetError(ValueError):
    """A dataset file that cannot be used; the message names the file and where."""


@dataclass
class Dataset:
    """The prompts taken from a file, and what was skipped."""

    path: str
    format: str  # "json" | "jsonl"
    prompts: list[str] = field(default_factory=list)
    skipped: int = 0  # items without a usable human turn, or beyond max_records

    def describe(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "format": self.format,
            "prompts": len(self.prompts),
            "skipped": self.skipped,
        }


def _prompt_of(item: Any, where: str, max_chars: int) -> str | None:
    """The item's prompt text; None when it has no human turn; DatasetError when bad."""
    if isinstance(item, str):
        text: Any = item
    elif isinstance(item, dict):
        if "prompt" in item:
            text = item["prompt"]
            where += ", key 'prompt'"
        else:
            turns = item.get("conversations", item.get("messages"))
            if turns is None:
                return None
            key = "conversations" if "conversations" in item else "messages"
            if not isinstance(turns, list):
                raise DatasetError(f"{where}, key {key!r}: expected a list of turns")
            text = None
            for k, turn in enumerate(turns):
                if not isinstance(turn, dict):
                    raise DatasetError(f"{where}, key {key!r}[{k}]: expected an object")
                who = turn.get("from", turn.get("role"))
                if who in HUMAN:
                    text = turn.get("value", turn.get("content"))
                    where += f", key {key!r}[{k}]"
                    break
            if text is None:
                return None
    else:
        raise DatasetError(f"{where}: expected an object or a string, got {type(item).__name__}")
    if not isinstance(text, str):
        raise DatasetError(f"{where}: the prompt is not a string")
    if len(text) > max_chars:
        raise DatasetError(f"{where}: prompt of {len(text)} characters (at most {max_chars})")
    return text if text.strip() else None


def load_dataset(
    path: str | Path,
    max_bytes: int = MAX_BYTES,
    max_records: int = MAX_RECORDS,
    max_prompt_chars: int = MAX_PROMPT_CHARS,
) -> Dataset:
    """Read ``path`` (see the module docstring); DatasetError on anything unusable."""
    p = Path(path)
    try:
        with p.open("rb") as f:
            raw = f.read(max_bytes + 1)
    except OSError as e:
        raise DatasetError(f"{p}: cannot read: {e.strerror or e}") from None
    if len(raw) > max_bytes:
        raise DatasetError(f"{p}: larger than {max_bytes} bytes: refused")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise DatasetError(f"{p}: line {line}: not UTF-8") from None
    head = text.lstrip()[:1]
    if not head:
        raise DatasetError(f"{p}: empty")
    if head == "[":
        ds = Dataset(str(p), "json")
        try:
            items = json.loads(text)
        except (json.JSONDecodeError, RecursionError) as e:
            where = f"line {e.lineno}" if isinstance(e, json.JSONDecodeError) else "nesting"
            raise DatasetError(f"{p}: {where}: not valid JSON") from None
        except ValueError:  # an integer longer than int() reads
            raise DatasetError(f"{p}: {_too_long()}: not usable") from None
        if not isinstance(items, list):
            raise DatasetError(f"{p}: expected a JSON array")
        numbered = ((f"{p}: item {k}", item) for k, item in enumerate(items))
    else:
        ds = Dataset(str(p), "jsonl")
        numbered = _lines(p, text)
    for where, item in numbered:
        if len(ds.prompts) >= max_records:
            ds.skipped += 1
            continue
        prompt = _prompt_of(item, where, max_prompt_chars)
        if prompt is None:
            ds.skipped += 1
        else:
            ds.prompts.append(prompt)
    if not ds.prompts:
        raise DatasetError(f"{p}: no prompt found (no item has a human/user turn or a prompt)")
    return ds


def _lines(p: Path, text: str) -> Any:
    for n, line in enumerate(text.split("\n"), start=1):  # not splitlines: U+2028 in JSON
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except (json.JSONDecodeError, RecursionError):
            raise DatasetError(f"{p}: line {n}: not valid JSON") from None
        except ValueError:  # an integer longer than int() reads
            raise DatasetError(f"{p}: line {n}: {_too_long()}: not usable") from None
        yield f"{p}: line {n}", item
