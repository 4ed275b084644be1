"""Dataset files (tui/bench/run/dataset.py) and workload options: the shipped samples
parse; hostile files are refused with the file and the line or item named, in bounded
time and memory."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tui.bench.run.dataset import DatasetError, load_dataset
from tui.bench.run.workload import WorkloadError, parse_length

DATA = Path(__file__).resolve().parent / "data"


def test_the_shipped_jsonl_sample() -> None:
    ds = load_dataset(DATA / "prompts_sample.jsonl")
    assert ds.format == "jsonl" and len(ds.prompts) == 6 and ds.skipped == 0
    assert ds.prompts[2] == "List three uses for an old wooden ladder."  # the user turn
    assert ds.prompts[4].startswith("Tell a story about a lighthouse")


def test_the_shipped_sharegpt_sample_skips_an_item_without_a_human_turn() -> None:
    ds = load_dataset(DATA / "sharegpt_sample.json")
    assert ds.format == "json" and ds.skipped == 1
    assert ds.prompts == [
        "What makes a good walking trail in a forest?",
        "How do bees find flowers?",
        "Give advice for planting tomatoes in spring.",
    ]


@pytest.mark.parametrize(
    ("content", "where"),
    [
        (b'{"prompt": "ok"}\n{"prompt": 5}\n', "line 2, key 'prompt': the prompt is not a string"),
        (b'{"prompt": "ok"}\n{not json\n', "line 2: not valid JSON"),
        (b'{"prompt": "ok"}\n\xff\xfe\n', "line 2: not UTF-8"),
        (b'[{"prompt": "ok"}, 7]', "item 1: expected an object or a string"),
        (b'[{"conversations": {"from": "human"}}]', "item 0, key 'conversations'"),
        (b'[{"messages": ["hi"]}]', "item 0, key 'messages'[0]: expected an object"),
        (b"[" * 100_000 + b"]" * 100_000, "not valid JSON"),  # nesting: no crash
        (b'{"a": 1}\n', "no prompt found"),
        (b"   \n", "empty"),
        (b'{"prompt": "' + b"x" * 200 + b'"}', "line 1, key 'prompt': prompt of 200 characters"),
    ],
)
def test_hostile_files_are_refused_by_place(tmp_path: Path, content: bytes, where: str) -> None:
    p = tmp_path / "d.jsonl"
    p.write_bytes(content)
    with pytest.raises(DatasetError) as e:
        load_dataset(p, max_prompt_chars=100)
    assert str(p) in str(e.value) and where in str(e.value)


def test_a_file_over_the_byte_limit_is_refused_not_truncated(tmp_path: Path) -> None:
    p = tmp_path / "big.jsonl"
    p.write_text('{"prompt": "hello"}\n' * 1000)
    with pytest.raises(DatasetError, match="larger than 1000 bytes"):
        load_dataset(p, max_bytes=1000)
    assert len(load_dataset(p, max_records=10).prompts) == 10  # the rest counted as skipped
    assert load_dataset(p, max_records=10).skipped == 990


def test_a_line_separator_inside_a_json_string_is_not_a_line_break(tmp_path: Path) -> None:
    p = tmp_path / "d.jsonl"
    p.write_text('{"prompt": "one\u2028two"}\n', encoding="utf-8")
    assert load_dataset(p).prompts == ["one\u2028two"]


def test_a_missing_file_names_itself(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="nope.json: cannot read"):
        load_dataset(tmp_path / "nope.json")


def test_length_distributions_parse_and_draw_in_range() -> None:
    rng = random.Random(0)
    assert parse_length("fixed:64", "--input-len").draw(rng) == 64
    u = parse_length("uniform:10,20", "--input-len")
    draws = [u.draw(rng) for _ in range(2000)]
    assert min(draws) == 10 and max(draws) == 20
    n = parse_length("normal:100,10", "--output-len")
    xs = [n.draw(rng) for _ in range(4000)]
    assert 98 < sum(xs) / len(xs) < 102 and min(xs) >= 1
    assert parse_length("normal:2,50", "--x").draw(random.Random(1)) >= 1  # truncated at 1


@pytest.mark.parametrize(
    "text",
    [
        "fixed",
        "fixed:0",
        "fixed:1.5",
        "uniform:5,2",
        "normal:10",
        "poisson:3",
        "uniform:a,b",
        "normal:nan,1",
    ],
)
def test_bad_lengths_are_refused_naming_the_flag(text: str) -> None:
    with pytest.raises(WorkloadError, match="--input-len"):
        parse_length(text, "--input-len")


@pytest.mark.parametrize(
    ("kw", "word"),
    [
        ({"turns": 2, "rate": 1.0}, "--turns applies to concurrency levels only"),
        ({"turns": 0}, "--turns must be at least 1"),
        (
            {"dataset": str(DATA / "prompts_sample.jsonl"), "input_len": "fixed:9"},
            "their own length",
        ),
        ({"dataset": "/nonexistent/x.jsonl"}, "--dataset: /nonexistent/x.jsonl: cannot read"),
        ({"output_len": "uniform:3"}, "--output-len"),
        ({"shared_prefix": 8, "workers": 2}, "--workers > 1"),
        ({"find_capacity": True}, "--find-capacity needs --slo"),
        ({"find_capacity": True, "slo": {"ttft_ms": 1.0}, "attainment": 1.0}, "--attainment"),
    ],
)
def test_plans_with_bad_workloads_are_refused(kw: dict, word: str) -> None:  # type: ignore[type-arg]
    from tui.bench.run.plan import BenchError, BenchPlan

    with pytest.raises(BenchError, match=word.replace("(", r"\(").replace(">", ">")):
        BenchPlan(engines=["e"], **kw).validate()  # type: ignore[arg-type]


def test_lengths_from_a_file_are_its_empirical_distribution(tmp_path: Path) -> None:
    p = tmp_path / "lengths.txt"
    p.write_text("# output lengths seen in production\n12\n\n40\n40\n7\n")
    d = parse_length(f"file:{p}", "--output-len")
    assert d.values == (12, 40, 40, 7)
    rng = random.Random(0)
    draws = [d.draw(rng) for _ in range(8000)]
    assert set(draws) == {7, 12, 40}
    assert 0.45 < draws.count(40) / len(draws) < 0.55  # two lines of four


@pytest.mark.parametrize(
    ("content", "where"),
    [
        (b"12\n0\n", "line 2: '0' is not a length"),
        (b"12\n-3\n", "line 2: '-3' is not a length"),
        (b"5\n\xd9\xa3\n", "line 2"),  # an Arabic-Indic digit is not a length
        (b"99999999999999999999\n", "line 1"),
        (b"# nothing\n\n", "no lengths in it"),
    ],
)
def test_hostile_length_files_are_refused_by_line(
    tmp_path: Path, content: bytes, where: str
) -> None:
    p = tmp_path / "l.txt"
    p.write_bytes(content)
    with pytest.raises(WorkloadError) as e:
        parse_length(f"file:{p}", "--input-len")
    assert str(p) in str(e.value) and where in str(e.value) and "--input-len" in str(e.value)


@pytest.mark.parametrize(
    ("content", "where"),
    [
        (b'[{"prompt": "hi", "n": ' + b"9" * 5000 + b"}]", "a number of more than 4300 digits"),
        (b'{"prompt": "ok"}\n{"prompt": "hi", "n": -' + b"1" * 5000 + b"}\n", "line 2: a number"),
    ],
    ids=["json", "jsonl"],
)
def test_a_number_of_5000_digits_is_a_dataset_error(
    tmp_path: Path, content: bytes, where: str
) -> None:
    """int() refuses strings of over 4300 digits with a plain ValueError: on main it
    left load_dataset as that (a traceback from `bench --dataset`), not a DatasetError."""
    path = tmp_path / ("d.json" if content.startswith(b"[") else "d.jsonl")
    path.write_bytes(content)
    with pytest.raises(DatasetError) as e:
        load_dataset(path)
    assert str(e.value).startswith(f"{path}: ") and where in str(e.value)
    assert str(e.value).endswith("not usable")


def test_bench_names_a_5000_digit_number_in_one_line(cli_env, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """`infertop bench --dataset` on it: one line naming the file and the line, no
    traceback, nothing run."""
    from tests.bench.test_cli_bench import _pace_config, one_line_error, pace_bench

    cfg = _pace_config(tmp_path)
    bad = tmp_path / "d.jsonl"
    bad.write_text('{"prompt": "ok"}\n{"prompt": "hi", "n": ' + "7" * 5000 + "}\n")
    p = pace_bench(cli_env, cfg, "--dataset", str(bad), "--out", str(tmp_path / "o"))
    one_line_error(p, f"{bad}: line 2: a number of more than 4300 digits: not usable")
    assert not (tmp_path / "o" / "report.json").exists()
