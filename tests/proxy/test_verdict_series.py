"""``infertop_proxy_verdicts_total`` (tui/proxy/exposition.py): every verdict kind's series
from the start at 0 (so ``rate()`` counts the first), one more per verdict given, a kind
not infertop's counted nowhere; the page parses as Prometheus text."""

from __future__ import annotations

from tui.core.verdict import VERDICT_KINDS
from tui.proxy.exposition import ProxyMetrics
from tui.transport.prometheus import parse

NAME = "infertop_proxy_verdicts_total"


def test_every_kind_from_zero_and_counted() -> None:
    pm = ProxyMetrics("127.0.0.1:8080", "llama-server")
    before = parse(pm.render().decode())
    assert {dict(k)["verdict"]: v for k, v in before.samples[NAME].items()} == dict.fromkeys(
        VERDICT_KINDS, 0.0
    )
    for kind in ("queued", "queued", "cache-hit", 'evil"}\n'):
        pm.verdict_given(kind)
    after = parse(pm.render().decode())
    assert after.total(NAME, verdict="queued") == 2
    assert after.total(NAME, verdict="cache-hit") == 1
    assert after.total(NAME) == 3  # the foreign kind: nowhere
    assert after.total(NAME, upstream="127.0.0.1:8080") == 3
