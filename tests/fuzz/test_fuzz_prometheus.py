"""Fuzzing Prometheus text exposition parsing (tui/transport/prometheus.py) and the
readers of a scrape (histogram windows, counter rates, the vLLM and llama-server
summaries).

Generated: (1) valid scrapes: counter, gauge, histogram and untyped families with HELP
and TYPE lines, vLLM's and llama-server's own series among other names, label values
with escapes, quotes, braces, commas, newlines and UTF-8, values as integers, floats,
NaN, ±Inf and 1e400, optional timestamps, blank lines; histograms with cumulative
buckets, ``_count`` and ``_sum`` (now and then a bucket whose ``le`` is no number);
(2) the same scrapes with one line corrupted: a value that is no number ("abc", "1_0",
"0x10", none), an integer too large for a float, no closing brace, a label name that
starts with a digit, a TYPE line without a type; (3) random text from the format's
tokens.

Asserted: parse raises nothing but ScrapeError; a valid scrape gives exactly its samples;
a corrupted one is refused, naming the corrupted line by number and text (or, for a
value too large, the sample); any refusal that names a line quotes that line; and every
reader of any two scrapes (windows, quantiles, rates, both summaries) raises nothing.
"""

from __future__ import annotations

import math
import random

from hypothesis import given, settings

from tests.fuzz.fuzz_support import FUZZ, MIN_CASES, SEEDS, CaseCount
from tui.telemetry.servers import llamacpp_metrics, vllm_metrics
from tui.transport.prometheus import (
    Labels,
    Scrape,
    ScrapeError,
    counter_delta,
    counter_rate,
    histogram_window,
    parse,
)

HISTOGRAM_NAMES = ["vllm:time_to_first_token_seconds", "vllm:e2e_request_latency_seconds", "h"]
COUNTER_NAMES = [
    "vllm:generation_tokens", "vllm:prompt_tokens_total", "llamacpp:prompt_tokens_total",
    "llamacpp:prompt_seconds_total", "llamacpp:tokens_predicted_total",
    "llamacpp:tokens_predicted_seconds_total", "vllm:num_preemptions", "c",
]  # fmt: skip
GAUGE_NAMES = ["vllm:num_requests_running", "vllm:kv_cache_usage_perc", "g", "a:b_c"]
LABEL_VALUES = ["", "m", "a b", 'q"uote', "back\\slash", "new\nline", "}", ",", "=", "é日本"]
VALUES = ["0", "1", "12", "-3", "0.5", "1e3", "-1.5E-2", "NaN", "+Inf", "-Inf", "1e400"]
LE = ["0.1", "0.5", "1", "2.5", "10"]
HELP = ["", "doc", "a \\\\ b", "x\\ny", "é"]


def escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def value_of(text: str) -> float:
    return float(text)


class ScrapeText:
    """Lines of a scrape being written, and the samples parse must find in it."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.samples: dict[str, dict[Labels, float]] = {}
        self.sample_lines: list[int] = []  # indices of the sample lines

    def sample(self, name: str, labels: dict[str, str], value: str, rng: random.Random) -> None:
        body = ",".join(f'{k}="{escape(v)}"' for k, v in labels.items())
        line = name + ("{" + body + "}" if labels or rng.random() < 0.1 else "")
        line += rng.choice([" ", " ", "\t"]) + value
        if rng.random() < 0.15:
            line += " " + str(rng.randint(0, 2 * 10**12))  # a timestamp in ms
        self.sample_lines.append(len(self.lines))
        self.lines.append(line)
        self.samples.setdefault(name, {})[tuple(sorted(labels.items()))] = value_of(value)

    def text(self) -> str:
        return "\n".join(self.lines) + ("\n" if self.lines else "")


def labels(rng: random.Random) -> dict[str, str]:
    names = rng.sample(["model_name", "engine", "le_x", "_a", "b1"], rng.randint(0, 2))
    return {n: rng.choice(LABEL_VALUES) for n in names}


def valid_scrape(rng: random.Random) -> ScrapeText:
    s = ScrapeText()
    for _ in range(rng.randint(0, 5)):
        kind = rng.choice(["counter", "gauge", "histogram", "untyped"])
        name = rng.choice(
            {"counter": COUNTER_NAMES, "histogram": HISTOGRAM_NAMES}.get(kind, GAUGE_NAMES)
        )
        if name in s.samples or any(k.startswith(name + "_") for k in s.samples):
            continue  # one family per name
        if rng.random() < 0.5:
            s.lines.append(f"# HELP {name} {rng.choice(HELP)}")
        if kind != "untyped":
            s.lines.append(f"# TYPE {name} {kind}")
        if kind == "histogram":
            les, cum = sorted(rng.sample(LE, rng.randint(0, 4)), key=float), 0
            for lab in [labels(rng) for _ in range(rng.randint(1, 2))]:
                for le in [*les, "+Inf"]:
                    cum += rng.randint(0, 5)
                    s.sample(name + "_bucket", {**lab, "le": le}, str(cum), rng)
                s.sample(name + "_count", lab, str(cum), rng)
                s.sample(name + "_sum", lab, rng.choice(VALUES), rng)
        else:
            sample_name = name
            if kind == "counter" and not name.endswith("_total"):
                sample_name = name + "_total"  # prometheus_client's naming of counters
            for lab in [labels(rng) for _ in range(rng.randint(1, 3))]:
                s.sample(name, lab, rng.choice(VALUES), rng)
            s.samples[sample_name] = s.samples.pop(name)
        if rng.random() < 0.3:
            s.lines.append("")
    if rng.random() < 0.2:  # a bucket whose le is no bound: readers skip it
        s.sample("h_bucket", {"le": rng.choice(["abc", "NaN", ""])}, "1", rng)
    return s


def same_samples(got: Scrape, want: dict[str, dict[Labels, float]]) -> bool:
    def canon(d: dict[str, dict[Labels, float]]) -> dict[str, dict[Labels, object]]:
        return {n: {k: "nan" if math.isnan(v) else v for k, v in s.items()} for n, s in d.items()}

    return canon(got.samples) == canon(want)


def read_everything(a: Scrape, b: Scrape) -> None:
    """Every reader of two scrapes; none may raise."""
    for name in set(a.samples) | set(b.samples):
        base = name.removesuffix("_bucket")
        histogram_window(a, b, base).percentiles()
        histogram_window(None, b, base).mean  # noqa: B018 - the property computes
        counter_rate(a, b, name)
        counter_delta(a, b, name)
    v = vllm_metrics.summarize(a, b)
    for short in v.windows:
        v.percentiles_ms(short)
    llamacpp_metrics.summarize(a, b)


def test_valid_scrapes_give_their_samples_and_read_without_error() -> None:
    cases = CaseCount()

    @settings(FUZZ, max_examples=2600)
    @given(SEEDS)
    def run(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(2):
            first, second = valid_scrape(rng), valid_scrape(rng)
            a = parse(first.text(), t=1.0)
            b = parse(second.text(), t=rng.choice([1.0, 1.5, 1.0 + 1e-12]))
            assert same_samples(a, first.samples), first.text()
            assert same_samples(b, second.samples), second.text()
            read_everything(*((a, b) if rng.random() < 0.5 else (b, a)))  # b: a restart
            cases.add(2)

    run()
    assert cases.n >= MIN_CASES


BAD_VALUES = ["abc", "1_0", "0x10", "", "1" + "0" * 400]


def corrupt(line: str, rng: random.Random) -> tuple[str, bool]:
    """(the corrupted sample line, whether the corruption is a value too large)."""
    head = line[: line.rindex("}") + 1] if "}" in line else line.split()[0]
    kind = rng.choice(["value", "value", "brace", "label"])
    if kind == "value" or "{" not in line:
        bad = rng.choice(BAD_VALUES)
        return head.rstrip() + " " + bad, len(bad) > 40
    if kind == "brace":  # the closing one (a label value may hold a "}" too)
        return line[: line.rindex("}")] + line[line.rindex("}") + 1 :], False
    return line.replace("{", "{1", 1), False  # a label name cannot start with a digit


def test_a_corrupted_line_is_refused_by_number_and_text() -> None:
    cases = CaseCount()

    @settings(FUZZ, max_examples=2000)
    @given(SEEDS)
    def run(seed: int) -> None:
        rng = random.Random(seed)
        s = valid_scrape(rng)
        if not s.sample_lines:
            s.sample("x", {}, "1", rng)
        for _ in range(5):
            lines = list(s.lines)
            i = rng.choice(s.sample_lines)
            if rng.random() < 0.1:
                lines.insert(i, "# TYPE x")  # a TYPE line without a type
                bad, too_large = "# TYPE x", False
            else:
                bad, too_large = corrupt(lines[i], rng)
                lines[i] = bad
            try:
                parse("\n".join(lines) + "\n", t=1.0)
            except ScrapeError as e:
                if too_large:
                    assert "too large" in str(e), (e, bad)
                else:
                    assert f"line {i + 1}: {bad[:80]!r}" in str(e), (e, lines)
            else:
                raise AssertionError(f"accepted {bad!r}")
            cases.add()

    run()
    assert cases.n >= MIN_CASES


TOKENS = ["# TYPE ", "# HELP ", "foo", "foo_bucket", "_total", "{", "}", "le=", '"', "\\"]
TOKENS += [",", "=", " ", "\t", "\n", "1", "1e400", "1" * 400, "-", "+Inf", "NaN", "#", "_"]
TOKENS += ["histogram", "counter", "gauge", "summary", "é", "\x00", "\r", " # ", "0.5"]


def test_random_text_is_a_scrape_or_a_named_error() -> None:
    cases = CaseCount()

    @settings(FUZZ, max_examples=2000)
    @given(SEEDS)
    def run(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(5):
            text = "".join(rng.choices(TOKENS, k=rng.randint(0, 30)))
            try:
                s = parse(text, t=1.0)
            except ScrapeError as e:
                msg = str(e)
                assert msg.startswith("not Prometheus text: ") and "\n" not in msg
                if msg.startswith("not Prometheus text: line "):
                    n = int(msg.split()[4].rstrip(":"))
                    assert repr(text.split("\n")[n - 1][:80]) in msg, (msg, text)
            else:
                read_everything(s, s)
            cases.add()

    run()
    assert cases.n >= MIN_CASES
