"""Config documents for the fuzz tests, written line by line from the schema so that
each key's line is known, valid or with exactly one fault (see test_fuzz_config.py)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tui.config import ENGINE_KEYS, GENERATION_KEYS, TELEMETRY_KEYS, UI_KEYS
from tui.engines.registry import find_kind, kind_names

PATH = Path("f.toml")
AB_KEYS = ("ab_schedule", "ab_concurrent")
KeyPath = tuple[str, ...]
ENGINE_NAMES = ["local", "a", "b.c", "a b", "é", "x-y", "7"]
STRINGS = ["", "x", "a b", 'q"uote', "back\\slash", "tab\there", "日本", "C:\\models\\m.gguf"]
POSITIVE = {
    ("telemetry", "interval_s"), ("telemetry", "peak_bandwidth_gbs"), ("ui", "refresh_hz"),
    ("connect_timeout_s",), ("read_timeout_s",), ("stall_timeout_s",),
}  # fmt: skip


def toml_str(s: str, rng: random.Random) -> str:
    if "'" not in s and "\n" not in s and rng.random() < 0.3:
        return "'" + s + "'"  # a literal string
    out = s.replace("\\", "\\\\").replace('"', '\\"').replace("\t", "\\t")
    return '"' + out.replace("\r", "\\r").replace("\n", "\\n") + '"'


def toml_key(k: str, rng: random.Random) -> str:
    bare = k.replace("_", "").replace("-", "").isalnum() and k.isascii()
    return k if bare and rng.random() < 0.8 else toml_str(k, rng)


def toml_int(n: int, rng: random.Random) -> str:
    r = rng.random()
    if n >= 0 and r < 0.15:
        return hex(n)
    if abs(n) >= 1000 and r < 0.3:
        return f"{n:_}"
    return str(n)


def toml_float(x: float, rng: random.Random) -> str:
    return rng.choice([repr(float(x)), f"{x:e}", toml_int(int(x), rng) if x == int(x) else repr(x)])


@dataclass
class Doc:
    """A config being written, where each key went, and what parsing must give."""

    rng: random.Random
    lines: list[str] = field(default_factory=list)
    where: dict[KeyPath, int] = field(default_factory=dict)
    values: dict[KeyPath, Any] = field(default_factory=dict)

    def header(self, path: KeyPath) -> None:
        self.lines.append("")
        self.lines.append("[" + ".".join(toml_key(k, self.rng) for k in path) + "]")
        self.where[path] = len(self.lines)

    def key(self, path: KeyPath, text: str, value: Any) -> None:
        eq = self.rng.choice([" = ", "=", "  =  "])
        indent = self.rng.choice(["", "", "  "])
        self.lines.append(indent + toml_key(path[-1], self.rng) + eq + text)
        self.where[path] = len(self.lines)
        self.values[path] = value

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def value(path: KeyPath, types: tuple[type, ...], rng: random.Random) -> tuple[str, Any]:
    """A valid value for the key, as TOML text and as parse_config must keep it."""
    leaf = path[-1]
    if leaf == "kind":
        k = rng.choice(kind_names())
        return toml_str(k, rng), k
    if leaf == "endpoint":
        e = rng.choice(["chat", "completions"])
        return toml_str(e, rng), e
    if leaf == "telemetry":
        t = rng.choice(["local", "ssh://gpu-box", "ssh://a@10.0.0.5:2222", "http://h:9400"])
        return toml_str(t, rng), t
    if leaf == "ab_schedule":
        s = rng.choice(["auto", "sequential", "concurrent"])
        return toml_str(s, rng), s
    if types == (str,):
        s = rng.choice(STRINGS)
        return toml_str(s, rng), s
    if types == (int,):
        if leaf == "n_gpu_layers":
            n = rng.randint(-1, 10**6)
        elif leaf == "seed":
            n = rng.randint(0, 10**6)
        else:
            n = rng.randint(1, 4096 if leaf == "n_threads" else 10**6)
        return toml_int(n, rng), n
    if types == (bool,):
        b = rng.random() < 0.5
        return str(b).lower(), b
    if types == (dict,):
        if leaf == "headers":
            return '{X-Api = "v", "User-Agent" = "t"}', {"X-Api": "v", "User-Agent": "t"}
        if leaf == "keys":
            return '{quit = "q", "help" = "f1"}', {"quit": "q", "help": "f1"}
        return "{}", {}  # options: see option_value (they depend on the engine's kind)
    if leaf == "top_p":
        x = rng.choice([0.5, 1.0, 0.001, 0.95])  # in (0, 1]
    elif leaf == "temperature":
        x = rng.choice([0, 0.5, 1.0, 2, 10, 0.001, 100])  # in [0, 100]
    else:
        x = rng.choice([0.5, 1.0, 2, 10, 0.001, 1e3, 120])  # a number > 0
    return toml_float(x, rng), float(x)


def options_value(kind: str, rng: random.Random) -> tuple[str, dict[str, Any]]:
    """A valid ``options`` table for an engine of ``kind`` (what its EngineKind accepts)."""
    found = find_kind(kind)
    accepted = found.options if found is not None else {}
    chosen = rng.sample(sorted(accepted), min(len(accepted), rng.randint(0, 2)))
    samples: dict[type, tuple[str, Any]] = {
        bool: ("true", True),
        int: ("3", 3),
        float: ("1.5", 1.5),
        str: ('"auto"', "auto"),
        dict: ("{}", {}),
    }
    parts, kept = [], {}
    for key in chosen:
        text, val = samples[accepted[key][0]]
        parts.append(f"{key} = {text}")
        kept[key] = val
    return "{" + ", ".join(parts) + "}", kept


def schema_of(path: KeyPath) -> dict[str, tuple[tuple[type, ...], str]]:
    return {"generation": GENERATION_KEYS, "ui": UI_KEYS, "telemetry": TELEMETRY_KEYS}.get(
        path[0], ENGINE_KEYS
    )


def valid_doc(rng: random.Random) -> Doc:
    doc = Doc(rng)
    engines = rng.sample(ENGINE_NAMES, rng.randint(0, 3))
    if rng.random() < 0.7 or (engines and "local" not in engines):
        default = rng.choice(engines) if engines else "local"
        doc.key(("default_engine",), toml_str(default, rng), default)
    if rng.random() < 0.3:
        doc.key(("session_dir",), toml_str("/tmp/s", rng), "/tmp/s")
    for table in rng.sample(["generation", "ui", "telemetry"], rng.randint(0, 3)):
        doc.header((table,))
        for k in rng.sample(list(schema_of((table,))), rng.randint(0, 3)):
            if (table, k) == ("ui", "keys") and rng.random() < 0.5:
                continue  # written below as a table of its own
            if k in AB_KEYS and any((table, other) in doc.where for other in AB_KEYS):
                continue  # one of the two forms of the A/B schedule, never both
            doc.key((table, k), *value((table, k), schema_of((table,))[k][0], rng))
        if table == "ui" and ("ui", "keys") not in doc.where and rng.random() < 0.3:
            doc.header(("ui", "keys"))
            doc.key(("ui", "keys", "quit"), toml_str("q", rng), "q")
    for name in engines:
        doc.header(("engines", name))
        keys = ["kind", *rng.sample([k for k in ENGINE_KEYS if k != "kind"], rng.randint(0, 4))]
        rng.shuffle(keys)
        kind_text, kind = value(("engines", name, "kind"), (str,), rng)
        for k in keys:
            if k == "kind":
                doc.key(("engines", name, k), kind_text, kind)
            elif k == "options":
                doc.key(("engines", name, k), *options_value(kind, rng))
            else:
                doc.key(("engines", name, k), *value(("engines", name, k), ENGINE_KEYS[k][0], rng))
    return doc


@dataclass
class Fault:
    path: KeyPath  # the key the message must name
    needle: str  # what it must say
    line: int | None  # the line it must cite (None: no line, e.g. a TOML syntax error)
    deeper: bool = False  # the key named is inside ``path``


def scalar_keys(doc: Doc) -> list[KeyPath]:
    return [p for p in doc.values if p[-1] not in ("headers", "options", "keys")]


def types_of(path: KeyPath) -> tuple[type, ...]:
    if len(path) == 1:
        return (str,)
    if path[:2] == ("ui", "keys"):
        return (str,)
    return schema_of(path)[path[-1]][0]


def inject(doc: Doc, rng: random.Random) -> Fault | None:
    """One fault, written over the document; None when the document has no place for
    the kind drawn."""
    kind = rng.choice(
        ["type", "unknown", "nonfinite", "huge", "range", "kind", "header", "nokind",
         "default", "deep", "duplicate", "table"]
    )  # fmt: skip
    keys = scalar_keys(doc)
    engines = [p for p in doc.where if len(p) == 2 and p[0] == "engines"]

    def overwrite(path: KeyPath, text: str) -> int:
        line = doc.where[path]
        head, _, _ = doc.lines[line - 1].partition("=")
        doc.lines[line - 1] = head + "= " + text
        return line

    if kind == "type" and keys:
        p = rng.choice(keys)
        types = types_of(p)
        if str in types or bool in types:
            text = rng.choice(["5", "1.5", "[]"])
        else:  # a number: anything else, a bool included
            text = rng.choice(['"5"', "[1]", "{}", "true"])
        return Fault(p, "expected", overwrite(p, text))
    if kind == "unknown":
        tables = [p for p in doc.where if p[0] != "engines" or len(p) == 2]
        tables = [p for p in tables if p not in doc.values and p != ("ui", "keys")]
        if not tables:
            doc.lines.insert(0, "bogus = 1")
            doc.where = {p: n + 1 for p, n in doc.where.items()}
            return Fault(("bogus",), "unknown key", 1)
        t = rng.choice(tables)
        doc.lines.insert(doc.where[t], "bogus = 1")
        return Fault((*t, "bogus"), "unknown key", doc.where[t] + 1)
    nums = [p for p in keys if types_of(p) == (int, float)]
    ints = [p for p in keys if types_of(p) == (int,)]
    if kind == "nonfinite" and nums:
        p = rng.choice(nums)
        return Fault(p, "finite", overwrite(p, rng.choice(["nan", "inf", "-inf", "+nan"])))
    if kind == "huge" and (nums or ints):
        p = rng.choice(nums + ints)
        n = rng.choice([2**63, -(2**63) - 1, 10**30, 16**20])
        return Fault(p, "64-bit range", overwrite(p, toml_int(n, rng)))
    if kind == "range":
        ranged = [p for p in keys if p in POSITIVE or p[-1:] in POSITIVE]
        ranged += [
            p for p in keys if p in (("generation", "max_tokens"), ("generation", "temperature"))
        ]
        if ranged:
            p = rng.choice(ranged)
            if p == ("generation", "max_tokens"):
                return Fault(p, "must be >= 1", overwrite(p, rng.choice(["0", "-3"])))
            if p == ("generation", "temperature"):
                return Fault(p, ">= 0", overwrite(p, "-0.5"))
            return Fault(p, "must be > 0", overwrite(p, rng.choice(["0", "-1.5", "0.0", "-0.0"])))
    if kind == "kind" and engines:
        e = rng.choice(engines)
        if (*e, "endpoint") in doc.values and rng.random() < 0.5:
            return Fault((*e, "endpoint"), "must be 'chat'", overwrite((*e, "endpoint"), '"x"'))
        return Fault((*e, "kind"), "unknown kind", overwrite((*e, "kind"), '"gpt-9"'))
    engines = [e for e in engines if (*e, "headers") not in doc.values]
    engines = [e for e in engines if (*e, "options") not in doc.values]
    if kind == "header" and engines:
        e = rng.choice(engines)
        text, header, needle = rng.choice(
            [("{X = 1}", "X", "expected str"), ('{X = "a\\r\\nB: c"}', "X", "CR, LF"),
             ('{"a b" = "c"}', "a b", "HTTP header name"), ("{X = {}}", "X", "expected str")]
        )  # fmt: skip
        doc.key((*e, "headers"), text, None)
        doc.lines.insert(doc.where[e], doc.lines.pop())
        return Fault((*e, "headers", header), needle, doc.where[e] + 1)
    if kind == "nokind" and engines:
        e = rng.choice(engines)
        line = doc.where[(*e, "kind")]
        doc.lines[line - 1] = "# no kind"
        return Fault(e, "missing required key 'kind'", doc.where[e])
    if kind == "default" and ("default_engine",) in doc.where:
        return Fault(
            ("default_engine",), "names no engine", overwrite(("default_engine",), '"nope"')
        )
    if kind == "deep" and engines:
        e = rng.choice(engines)
        deep = "{a = " * 40 + "1" + "}" * 40
        doc.key((*e, "options"), deep, None)
        doc.lines.insert(doc.where[e], doc.lines.pop())
        return Fault((*e, "options"), "nested more than 32 deep", doc.where[e] + 1, True)
    if kind == "duplicate" and keys:
        p = rng.choice(keys)
        doc.lines.insert(doc.where[p], doc.lines[doc.where[p] - 1])
        return Fault(
            (), f"invalid TOML: Cannot overwrite a value (at line {doc.where[p] + 1}", None
        )
    if kind == "table":
        doc.lines.append("[zz]")
        return Fault(("zz",), "unknown key", len(doc.lines))
    return None
