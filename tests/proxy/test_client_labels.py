"""Per-client series on /infertop/metrics: bounded, the busiest by tokens, every series
only growing (tui/proxy/exposition.py, ClientLabels)."""

from __future__ import annotations

import re

from tui.core.metrics import RequestMetrics
from tui.proxy.exposition import ClientLabels, ProxyMetrics


def _m(prompt: int, output: int) -> RequestMetrics:
    m = RequestMetrics(ttft_ms=1.0, ttfr_ms=1.0, e2e_ms=2.0)
    m.prompt_tokens, m.output_tokens, m.output_tokens_source = prompt, output, "usage"
    return m


def _series(text: str, name: str) -> dict[str, int]:
    pat = re.compile(rf'^infertop_proxy_{name}{{upstream="u",client="(.*)"}} (\d+)$', re.M)
    return {c: int(v) for c, v in pat.findall(text)}


def test_ten_thousand_clients_give_at_most_top_plus_other_series_and_sums_hold() -> None:
    pm = ProxyMetrics("u", "openai", top_clients=3)
    total = 0
    for i in range(10_000):
        pm.generation_ended("m", "/v1/chat/completions", "done", True, _m(1, 1), f"k:{i:012x}")
        total += 2
    for _ in range(50):  # two heavy clients arrive late: they get labels of their own
        for who in ("alice", "bob"):
            pm.generation_ended("m", "/v1/chat/completions", "done", True, _m(100, 100), who)
            total += 200
    text = pm.render().decode()
    prompt, output = (
        _series(text, "client_prompt_tokens_total"),
        _series(text, "client_output_tokens_total"),
    )
    assert len(prompt) <= 2 * 3 + 1 and "other" in prompt
    assert sum(prompt.values()) + sum(output.values()) == total  # nothing lost, none twice
    assert prompt["alice"] == prompt["bob"] == 49 * 100  # the first came before its label
    requests = _series(text, "client_requests_total")
    assert sum(requests.values()) == 10_100


def test_a_series_never_goes_back_and_hostile_labels_are_printable() -> None:
    labels = ClientLabels(top=1)
    assert labels.label("a", 10) == "other"  # promoted by this request: counted in other
    assert labels.label("a", 10) == "a"
    assert labels.label("b", 5) == "other" and labels.label("b", 100) == "other"  # now top
    assert labels.label("b", 1) == "b" and labels.label("a", 1) == "other"  # a is frozen
    assert labels.label("evil\n\x1b[31m", 1) == "other"
    pm = ProxyMetrics("u", "openai", top_clients=2)
    for _ in range(2):
        pm.generation_ended("m", "/v1/chat/completions", "done", True, _m(1, 1), 'x"\n\x1b')
    text = pm.render().decode()
    assert 'client="x\\"??"' in text and "\x1b" not in text
    assert ProxyMetrics("u", "openai", top_clients=0).clients.label("a", 1) == "other"
