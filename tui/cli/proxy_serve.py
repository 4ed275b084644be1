"""The headless proxy's run: it listens, says where (the :data:`ANNOUNCE` line a ``--ui``
parent waits for, then one line each for the upstream, the scheduler slice and the
ledger), forwards until SIGINT/SIGTERM, and with ``--log`` writes one line per finished
request on stderr. The parts it runs with are made by :mod:`tui.cli.proxy`.
"""

from __future__ import annotations

import signal
import sys
from typing import Any

ANNOUNCE = "infertop proxy listening on "


def serve(
    config: Any, evidence: str, log: bool, sched: str = "", sink: Any = None, handoff: Any = None
) -> int:
    """Run the proxy until SIGINT/SIGTERM (the headless command); ``sink``: the ledger's
    (added to the proxy's outcomes, closed with it); ``handoff``: the OTLP exporter and
    alert rules finished requests go to (tui/cli/handoff.py)."""
    import asyncio

    from tui.proxy.server import Proxy, run_loop

    async def run() -> int:
        proxy = Proxy(config, note=lambda t: print(f"infertop proxy: {t}", file=sys.stderr))
        if sink is not None:
            proxy.outcomes.add(sink)
        if handoff is not None:
            for each in handoff.sinks:
                proxy.outcomes.add(each)
            proxy.metrics.extra.append(handoff.exposition)
        if log:
            proxy.book.on_end = _log_line
        try:
            await proxy.start()
        except OSError as e:
            print(f"infertop: error: cannot listen on {config.listen_host}:{config.listen_port}: "
                  f"{e.strerror or e}", file=sys.stderr)  # fmt: skip
            return 1
        print(ANNOUNCE + proxy.url, flush=True)
        print(
            f"infertop proxy: {proxy.url} → {config.kind} at {config.upstream} ({evidence}); "
            f"metrics at {proxy.url}/infertop/metrics; watch: infertop --watch {proxy.url}",
            file=sys.stderr,
            flush=True,
        )
        if sched:
            print(f"infertop proxy: scheduler slice: {sched}", file=sys.stderr, flush=True)
        ledger = f"ledger: {sink.path}" if sink is not None else "ledger: off"
        print(f"infertop proxy: {ledger}", file=sys.stderr, flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        await proxy.close()
        return 0

    from tui.core.pauses import settle_heap

    settle_heap()  # start-up's objects frozen: the collections that follow scan the proxy's
    return int(run_loop(run()) or 0)


def _log_line(rec: Any) -> None:
    from tui.core.safe_text import terminal_label
    from tui.core.table import ms_text, tps_text
    from tui.proxy.columns import tokens_text

    r = rec.row()
    line = (
        f"{r.id} {r.client} {r.method} {r.route} {r.status or '-'} {r.state} "
        f"model={r.model or '-'} in={tokens_text(r.prompt_tokens)} "
        f"out={tokens_text(r.output_tokens, r.output_estimated)} TTFT={ms_text(r.ttft_ms)} "
        f"tok/s={tps_text(r.tps)} e2e={ms_text(r.e2e_ms)}"
        + (f" error={r.error}" if r.error else "")
    )
    print(terminal_label(line, 1000), file=sys.stderr, flush=True)
