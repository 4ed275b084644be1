"""When a vLLM /metrics scrape holds the record of a request that just ended
(:func:`tui.engines.http.vllm.recorded`): its finished count grew and it runs nothing."""

from __future__ import annotations

from tui.engines.http.vllm import recorded
from tui.transport.prometheus import parse


def _scrape(finished: int | None, running: int | None = None, waiting: int | None = None):  # type: ignore[no-untyped-def]
    lines = []
    if finished is not None:
        lines.append(f'vllm:e2e_request_latency_seconds_count{{model_name="m"}} {finished}')
    if running is not None:
        lines.append(f'vllm:num_requests_running{{model_name="m"}} {running}')
    if waiting is not None:
        lines.append(f'vllm:num_requests_waiting{{model_name="m"}} {waiting}')
    return parse("\n".join(lines) + "\n")


def test_a_grown_count_counts_only_once_vllm_runs_nothing() -> None:
    before = _scrape(4, 0, 0)
    assert recorded(before, _scrape(5, 0, 0))
    assert recorded(before, _scrape(6, 0, 0))  # (two: recorded, and not attributable)
    assert not recorded(before, _scrape(5, 1, 0))  # one ended, one still runs: maybe ours
    assert not recorded(before, _scrape(5, 0, 2))  # waiting ones are not recorded either
    assert not recorded(before, _scrape(4, 0, 0))  # nothing recorded yet


def test_without_the_gauges_a_grown_count_is_all_there_is() -> None:
    assert recorded(_scrape(4), _scrape(5))
    assert not recorded(_scrape(4), _scrape(4))


def test_a_missing_or_reset_count_ends_the_wait() -> None:
    assert recorded(_scrape(None), _scrape(5, 0))
    assert recorded(_scrape(9, 0), _scrape(2, 0))  # vLLM restarted
