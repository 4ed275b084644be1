"""Fuzzing config files (tui/config.py: parse_config, load_config).

Generated: (1) documents written line by line from the schema: top-level keys,
[generation], [ui] (its keys inline or as [ui.keys]), [telemetry] and one to three
[engines.NAME] tables (bare and quoted names: "b.c", "a b", "é"), keys bare or quoted,
values in every TOML spelling (hex and 1_000 integers, exponents, literal and basic
strings, inline tables), each document valid or with exactly one fault: a wrong type, an
unknown key or table, NaN or ±inf, an integer past 64 bits, a value out of range
(max_tokens 0, a negative temperature, a timeout or rate <= 0), an unknown kind or
endpoint, a header that is not a string, holds CR/LF or has a bad name, an engine without
a kind, a default_engine naming no engine, options nested 40 deep, a duplicate key;
(2) those documents with random characters inserted, deleted or replaced, also loaded
from a file as raw bytes (invalid UTF-8 included); (3) random text from TOML's tokens.

Asserted: the result is a Config or a ConfigError, never another exception; a valid
document gives its values; a faulty one gives a one-line ConfigError that starts with the
file, names the faulty key as TOML writes it (engines."b.c".kind), says what is wrong,
and cites the line where that key (or its table, or the inline table holding it) was
written; any ConfigError is one line that starts with the file.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from hypothesis import given, settings

from tests.fuzz.config_documents import PATH, Doc, inject, valid_doc
from tests.fuzz.fuzz_support import FUZZ, MIN_CASES, SEEDS, CaseCount
from tui.config import Config, ConfigError, builtin_engines, load_config, parse_config
from tui.config_keys import key_text

BUILT_IN = builtin_engines()[0]  # with no engine in a document: the llama.cpp builds installed


def check_error(e: ConfigError) -> str:
    msg = str(e)
    assert msg.startswith(str(PATH)) and "\n" not in msg, msg
    return msg


def check_valid(cfg: Config, doc: Doc) -> None:
    engines = {p[1] for p in doc.where if p[0] == "engines"}
    assert set(cfg.engines) == (engines or set(BUILT_IN))
    for path, want in doc.values.items():
        if want is None:
            continue
        if path[0] == "engines":
            got = getattr(cfg.engines[path[1]], path[2])
        elif len(path) == 1:
            got = getattr(cfg, path[0])
        elif path[:2] == ("ui", "keys") and len(path) == 3:
            got = cfg.ui.keys[path[2]]
        else:
            got = getattr(getattr(cfg, path[0]), path[1])
        assert got == want and type(got) is type(want), (path, got, want)


def test_documents_give_their_values_or_an_error_naming_key_and_line() -> None:
    cases = CaseCount()

    @settings(FUZZ, max_examples=1400)
    @given(SEEDS)
    def run(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(8):
            doc = valid_doc(rng)
            fault = inject(doc, rng) if rng.random() < 0.75 else None
            text = doc.text()
            try:
                cfg = parse_config(text, PATH)
            except ConfigError as e:
                msg = check_error(e)
                assert fault is not None, (msg, text)
                assert fault.needle in msg, (fault, msg, text)
                if fault.path:
                    named = f"key '{key_text(fault.path)}" + ("." if fault.deeper else "'")
                    assert named in msg, (fault, msg, text)
                if fault.line is not None:
                    assert msg.startswith(f"{PATH}:{fault.line}: "), (fault, msg, text)
            else:
                assert fault is None, (fault, text)
                check_valid(cfg, doc)
            cases.add()

    run()
    assert cases.n >= MIN_CASES


def mutate(text: str, rng: random.Random) -> str:
    for _ in range(rng.randint(1, 3)):
        at = rng.randrange(len(text) + 1)
        new = rng.choice(['"', "'", "=", "[", "]", "{", "}", ".", "\n", " ", "x", "1", "#"])
        text = text[:at] + rng.choice([new, ""]) + text[at + rng.randint(0, 2) :]
    return text


def test_mutated_documents_are_configs_or_one_line_errors(tmp_path: Path) -> None:
    cases = CaseCount()
    file = tmp_path / "f.toml"

    @settings(FUZZ, max_examples=1300)
    @given(SEEDS)
    def run(seed: int) -> None:
        rng = random.Random(seed)
        text = valid_doc(rng).text()
        for i in range(8):
            bad = mutate(text, rng)
            try:
                if i == 0:  # from a file, as bytes (some of them not UTF-8)
                    raw = bad.encode()
                    if rng.random() < 0.5:
                        at = rng.randrange(len(raw) + 1)
                        raw = raw[:at] + rng.choice([b"\xff", b"\xc3", b"\x00", b"\r"]) + raw[at:]
                    file.write_bytes(raw)
                    load_config(file)
                else:
                    parse_config(bad, PATH)
            except ConfigError as e:
                msg = str(e)
                assert msg.startswith(str(file) if i == 0 else str(PATH)) and "\n" not in msg
            cases.add()

    run()
    assert cases.n >= MIN_CASES


TOKENS = ["[", "]", "[[", "]]", "engines", "ui", ".", "=", '"', "'", "\n", " ", "kind"]
TOKENS += ["1", "0x", "_", "nan", "inf", "true", "{", "}", ",", "#", "é", "\\", "1e9"]


def test_random_text_is_a_config_or_a_one_line_error() -> None:
    cases = CaseCount()

    @settings(FUZZ, max_examples=1300)
    @given(SEEDS)
    def run(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(8):
            text = "".join(rng.choices(TOKENS, k=rng.randint(0, 30)))
            try:
                parse_config(text, PATH)
            except ConfigError as e:
                check_error(e)
            cases.add()

    run()
    assert cases.n >= MIN_CASES


def test_the_generator_writes_what_tomllib_reads() -> None:
    # the structure-aware half is only as good as its TOML: valid documents parse as
    # written, key by key (numbers may be written as integers)
    import tomllib

    rng = random.Random(7)
    for _ in range(200):
        doc = valid_doc(rng)
        data = tomllib.loads(doc.text())
        for path, want in doc.values.items():
            got: Any = data
            for k in path:
                got = got[k]
            if want is not None:
                same_type = type(got) is type(want) or isinstance(want, float)
                assert got == want and same_type, (path, got, want)
