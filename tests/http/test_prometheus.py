"""Prometheus parsing and the bucket-delta arithmetic (real scrapes are in server tests)."""

from __future__ import annotations

import math

import pytest

from tui.telemetry.servers.vllm_metrics import summarize
from tui.transport.prometheus import (
    HistogramWindow,
    ScrapeError,
    counter_delta,
    counter_rate,
    histogram_window,
    parse,
)


def hist(name: str, buckets: dict[str, float], total: float, count: float, model: str) -> str:
    lines = [f"# TYPE {name} histogram"]
    for le, c in buckets.items():
        lines.append(f'{name}_bucket{{le="{le}",model_name="{model}"}} {c}')
    lines.append(f'{name}_count{{model_name="{model}"}} {count}')
    lines.append(f'{name}_sum{{model_name="{model}"}} {total}')
    return "\n".join(lines) + "\n"


def scrape(t: float, b: dict[str, float], count: float, total: float, running: float) -> str:
    text = hist("vllm:time_to_first_token_seconds", b, total, count, "m")
    text += "# TYPE vllm:num_requests_running gauge\n"
    text += f'vllm:num_requests_running{{model_name="m"}} {running}\n'
    text += "# TYPE vllm:generation_tokens counter\n"
    text += f'vllm:generation_tokens_total{{model_name="m"}} {count * 100}\n'
    return text


A = scrape(0, {"0.1": 10, "0.5": 10, "1.0": 10, "+Inf": 10}, 10, 0.5, 0)
# Between A and B: 10 more requests, 4 in (0.1, 0.5], 6 in (0.5, 1.0].
B = scrape(0, {"0.1": 10, "0.5": 14, "1.0": 20, "+Inf": 20}, 20, 6.0, 3)


def test_window_uses_only_the_new_observations() -> None:
    a, b = parse(A, t=100.0), parse(B, t=102.0)
    w = histogram_window(a, b, "vllm:time_to_first_token_seconds")
    assert w.count == 10 and w.sum == pytest.approx(5.5)
    # p50: rank 5 lies in (0.5, 1.0], which holds ranks 5..10 -> 0.5 + 0.5 * 1/6.
    assert w.quantile(0.5) == pytest.approx(0.5 + 0.5 * (5 - 4) / 6)
    assert w.quantile(0.2) == pytest.approx(0.1 + 0.4 * 2 / 4)
    assert w.quantile(1.0) == pytest.approx(1.0)
    assert counter_rate(a, b, "vllm:generation_tokens_total") == pytest.approx(500.0)


def test_whole_history_percentile_differs_from_the_window() -> None:
    b = parse(B, t=1.0)
    all_time = histogram_window(None, b, "vllm:time_to_first_token_seconds")
    assert all_time.count == 20 and all_time.quantile(0.5) <= 0.1


def test_empty_window_has_no_percentiles() -> None:
    b = parse(B, t=1.0)
    w = histogram_window(b, b, "vllm:time_to_first_token_seconds")
    assert w.count == 0 and w.quantile(0.5) is None and w.mean is None


def test_restart_counts_from_zero() -> None:
    a, b = parse(B, t=1.0), parse(A, t=2.0)  # counters went down: the server restarted
    w = histogram_window(a, b, "vllm:time_to_first_token_seconds")
    assert w.count == 10
    assert counter_rate(a, b, "vllm:generation_tokens_total") is None


def test_a_counter_that_did_not_move_is_zero_not_unknown() -> None:
    """An idle window: unchanged counters are a difference of 0 and a rate of 0 (only a
    counter that went down, or a window of no time, has none)."""
    a, b = parse(A, t=1.0), parse(A, t=3.0)
    name = "vllm:generation_tokens_total"
    assert counter_delta(a, b, name) == 0.0 and counter_rate(a, b, name) == 0.0
    assert counter_delta(a, parse(B, t=3.0), name) == 1000.0
    assert counter_rate(a, parse(A, t=1.0), name) is None  # no time passed
    assert counter_delta(a, b, "vllm:no_such_total") is None  # absent: unknown


def test_a_quantile_on_a_bucket_edge_is_in_the_bucket_that_reaches_it() -> None:
    """As PromQL's histogram_quantile: the first bucket whose cumulative count reaches the
    rank holds the quantile, even when empty buckets follow it."""
    w = HistogramWindow([(1.0, 5.0), (2.0, 5.0), (3.0, 10.0), (math.inf, 10.0)], 10.0, 0.0)
    assert w.quantile(0.5) == 1.0  # rank 5: the whole first bucket, not the empty second
    assert w.quantile(0.6) == pytest.approx(2.2)  # rank 6: 1 of 5 into (2, 3]


def test_a_count_that_went_down_is_a_restart_even_where_buckets_did_not() -> None:
    """A histogram whose _count fell (a restarted server, or an exporter whose buckets and
    count disagree) is read from zero, never as a negative window."""
    a = parse(hist("h", {"1.0": 4, "+Inf": 4}, 2.0, 9, "m"), t=0.0)
    b = parse(hist("h", {"1.0": 5, "+Inf": 5}, 1.0, 5, "m"), t=1.0)
    w = histogram_window(a, b, "h")
    assert (w.count, w.sum) == (5.0, 1.0)


def test_a_label_filter_matches_every_label_it_names() -> None:
    text = (
        "# TYPE x gauge\n"
        'x{model_name="a",engine="0"} 1\n'
        'x{model_name="a",engine="1"} 2\n'
        'x{model_name="b",engine="0"} 4\n'
    )
    s = parse(text)
    assert s.total("x") == 7.0 and s.total("x", model_name="a") == 3.0
    assert s.total("x", model_name="a", engine="0") == 1.0  # both, not either
    assert s.total("x", model_name="b", engine="1") is None


def test_vllm_summary() -> None:
    s = summarize(parse(A, t=0.0), parse(B, t=2.0))
    assert s.running == 3 and s.waiting is None
    assert s.windows["ttft"].count == 10
    assert s.percentiles_ms("ttft")["p50"] == pytest.approx(583.333, rel=1e-3)
    assert s.generation_tps == pytest.approx(500.0)


def test_not_prometheus_text() -> None:
    with pytest.raises(ScrapeError):
        parse("<html>hello</html>\n{{{")


def test_a_bad_line_is_named_by_number_and_text() -> None:
    with pytest.raises(ScrapeError, match=r"line 2: 'foo\{ 1'"):
        parse("a 1\nfoo{ 1\nb 2\n")


@pytest.mark.parametrize(
    "text",
    [
        "big 1" + "0" * 400 + "\n",  # float(int) raised OverflowError
        '# TYPE c counter\nc{m="x"} 1' + "0" * 400 + "\n",
        "stamp 1 1" + "0" * 400 + "\n",  # the parser's own timestamp / 1000 overflowed
    ],
    ids=["value", "counter", "timestamp"],
)
def test_a_number_too_large_for_a_float_is_a_scrape_error(text: str) -> None:
    with pytest.raises(ScrapeError, match="too large|line 1"):
        parse(text)


def test_a_bucket_whose_le_is_not_a_number_is_not_a_bucket() -> None:
    # float("abc") raised ValueError in every reader of the histogram
    s = parse('x_bucket{le="abc"} 1\nx_bucket{le="NaN"} 1\nx_bucket{le="1"} 2\n')
    assert s.buckets("x") == {1.0: 2.0}
    assert histogram_window(None, s, "x").buckets == [(1.0, 2.0)]
