"""SGLang's inside, from its /metrics (``sglang:`` names, as SGLang's production-metrics
documentation lists them; SGLang cannot run here, so this reader is tested against a
fixture written from those docs, not a live server):

- ``num_running_reqs`` and ``num_queue_reqs`` (gauges, summed over ranks);
- ``token_usage`` (the KV cache's use, 0..1; the mean over ranks);
- ``cache_hit_rate`` (SGLang's own prefix-cache hit rate, a gauge: the mean over ranks);
- ``spec_accept_length`` (a gauge: mean tokens per verification step, the bonus token
  included — the same definition as tui/core/spec.py's mean acceptance length).
"""

from __future__ import annotations

from tui.core.inside import EngineInside
from tui.engines.inside.values import mean, value
from tui.transport.prometheus import Scrape

P = "sglang:"


def read_sglang(t: float, scrape: Scrape) -> EngineInside:
    usage = mean(scrape, P + "token_usage")
    hit = mean(scrape, P + "cache_hit_rate")
    return EngineInside(
        kind="sglang",
        t=t,
        running=value(scrape, P + "num_running_reqs"),
        waiting=value(scrape, P + "num_queue_reqs"),
        kv_usage=None if usage is None else min(usage, 1.0),
        prefix_hit_rate_total=None if hit is None else min(hit, 1.0),
        spec_accept_length=mean(scrape, P + "spec_accept_length"),
    )
