"""The fleet at scale: 200 endpoints read through a real Prometheus, headless and on screen.

Workload: one helper process (tests/support/fleet_fixture.py) serves 200 vLLM-like
/metrics on 200 loopback ports (counters and histograms grow with every scrape) plus 25
DCGM-exporter fixtures (8 GPUs each); a real Prometheus (Debian's 2.42) scrapes all 225
every second. Each endpoint is shown to Prometheus as ``node-HHH:80NN`` (25 hosts × 8
endpoints), each DCGM exporter as ``node-HHH:9400`` with ``Hostname="node-HHH"``, so
GPUs join endpoints by host as on a real cluster.

Measured:
- fleet refresh (headless): wall time of ``Fleet.refresh()`` for all 200 rows (HTTP
  requests to Prometheus per refresh, and the same 200 endpoints scraped directly by
  infertop, for comparison);
- the UI: ``infertop fleet --prometheus URL`` running in a real terminal (tmux, 200×50,
  refresh every second, sorted by tok/s so every refresh reorders the table): the time
  to put each snapshot in the table, the time of each frame (Textual's screen update:
  layout, compositor, write to the terminal), the app's CPU and the load average;
- that the workload happened: 225 targets up in Prometheus, 200 rows with numbers (tok/s,
  TTFT, KV cache, 8 GPUs each), and the screen showing them.

    .venv/bin/python -m benchmarks.fleet_prometheus [--endpoints 200] [--ui-s 20]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import smoke

ROOT = Path(__file__).resolve().parents[1]

PER_HOST = 8  # endpoints (and GPUs) per host


def _pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def _stats(values: list[float]) -> str:
    return (
        f"median {statistics.median(values):.1f} ms, p90 {_pct(values, 0.9):.1f}, "
        f"max {max(values):.1f} (n={len(values)})"
    )


def ui_child(out_path: str, argv: list[str]) -> int:
    """Run ``infertop fleet`` (this process, in the terminal) with timing hooks: every
    FleetScreen frame and every snapshot applied; written to ``out_path`` at exit."""
    from tui.__main__ import main
    from tui.app.screens.fleet import FleetScreen

    frames: list[float] = []
    applies: list[float] = []
    refreshes: list[float] = []
    rows: list[int] = []
    timer_update = FleetScreen._on_timer_update
    show = FleetScreen.show_snapshot

    def timed_frame(self):  # type: ignore[no-untyped-def]
        t0 = time.perf_counter()
        timer_update(self)
        if self.rows:
            frames.append((time.perf_counter() - t0) * 1000)

    def timed_show(self, snapshot):  # type: ignore[no-untyped-def]
        t0 = time.perf_counter()
        show(self, snapshot)
        applies.append((time.perf_counter() - t0) * 1000)
        refreshes.append(snapshot.took_s * 1000)
        rows.append(len(snapshot.rows))

    FleetScreen._on_timer_update = timed_frame  # type: ignore[method-assign]
    FleetScreen.show_snapshot = timed_show  # type: ignore[method-assign]
    try:
        return main(argv)
    finally:
        Path(out_path).write_text(
            json.dumps({"frames": frames, "applies": applies, "refreshes": refreshes, "rows": rows})
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--endpoints", type=int, default=200)
    ap.add_argument("--refreshes", type=int, default=20, help="headless refreshes timed")
    ap.add_argument("--ui-s", type=float, default=20.0, help="seconds of the UI measured")
    ap.add_argument("--window", type=float, default=10.0)
    smoke.add_flag(ap)
    args = ap.parse_args()
    if args.smoke:  # two hosts of endpoints, a short window (rate() needs two scrapes in it)
        args.endpoints, args.refreshes, args.ui_s, args.window = 2 * PER_HOST, 2, 1.0, 3.0
    from benchmarks.ui_common import TmuxApp, cpu_share
    from tests.support import prometheus_server as ps
    from tui.fleet.columns import fit_columns
    from tui.fleet.poller import Fleet, fleet_endpoints

    n, hosts = args.endpoints, (args.endpoints + PER_HOST - 1) // PER_HOST
    work = Path(tempfile.mkdtemp(prefix="infertop-fleet-bench-"))
    load0 = os.getloadavg()
    helper = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.support.fleet_fixture",
            "--vllm",
            str(n),
            "--dcgm-hosts",
            str(hosts),
            "--gpus",
            str(PER_HOST),
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    prom = None
    try:
        assert helper.stdout is not None
        ports = json.loads(helper.stdout.readline())
        endpoints = [f"127.0.0.1:{p}" for p in ports["vllm"]]
        names = [{"instance": f"node-{i // PER_HOST:03d}:{8000 + i % PER_HOST}"} for i in range(n)]
        dcgm = [f"127.0.0.1:{p}" for p in ports["dcgm"]]
        dcgm_names = [{"instance": f"node-{h:03d}:9400"} for h in range(hosts)]
        jobs = [ps.Job("vllm", endpoints, names), ps.Job("dcgm", dcgm, dcgm_names)]
        prom = ps.start_prometheus(jobs, work)
        t0 = time.monotonic()
        targets = ps.wait_targets_up(prom.url, n + hosts, timeout_s=60)
        up = sum(1 for t in targets if t["health"] == "up")
        print(
            f"workload: {n} vLLM-like endpoints + {hosts} DCGM exporters ({PER_HOST} GPUs each) "
            f"on loopback, one helper process; Prometheus {prom.url} scraping every 1 s: "
            f"{up} of {len(targets)} targets up after {time.monotonic() - t0:.1f} s"
        )
        time.sleep(args.window + 1)  # the whole window holds scrapes: rate() is not cut short

        fleet = Fleet([], prom.url, window_s=args.window)
        took, snap = [], None
        for _ in range(args.refreshes):
            snap = fleet.refresh()
            took.append(snap.took_s * 1000)
        fleet.close()
        assert snap is not None
        full = [
            r
            for r in snap.rows
            if r.up
            and r.gen_tps is not None
            and r.ttft_p50_ms is not None
            and r.kv_cache_pct is not None
            and r.gpus is not None
            and len(r.gpus) == PER_HOST
        ]
        first = snap.rows[0]
        print(
            f"fleet refresh through Prometheus, {len(snap.rows)} rows: {_stats(took)}; "
            f"{snap.queries} HTTP requests per refresh (targets + one query per column)"
        )
        print(
            f"  rows with numbers (up, tok/s, TTFT p50, KV %, {PER_HOST} GPUs): {len(full)} of "
            f"{len(snap.rows)}; e.g. {first.name}: {first.gen_tps:.1f} tok/s, "
            f"TTFT p50 {first.ttft_p50_ms:.1f} ms, GPU util {first.gpu_util_pct:.0f} %"
        )

        out = work / "ui.json"
        cfg = work / "c.toml"
        cfg.write_text('default_engine = "s"\n[engines.s]\nkind = "synthetic"\n')
        env = {"XDG_STATE_HOME": str(work / "state"), "XDG_DATA_HOME": str(work / "data")}
        child = [
            "-c",
            "import sys; from benchmarks import fleet_prometheus as f; "
            "sys.exit(f.ui_child(sys.argv[1], sys.argv[2:]))",
            str(out),
            "--config",
            str(cfg),
            "fleet",
            "--prometheus",
            prom.url,
            "--window",
            str(args.window),
            "--interval",
            "1",
        ]
        app = TmuxApp([], size=(200, 50), env=env, python_args=child)
        try:
            app.wait(lambda s: f"{n} endpoints" in s, 60)
            shown_cols = [c.key for c, _ in fit_columns(200 - 2)]
            app.keys(*["s"] * shown_cols.index("gen_tps"))  # sort by tok/s, largest first
            app.wait(lambda s: "tok/s▼" in s, 30)
            time.sleep(2.0)
            share = cpu_share(app.pid, args.ui_s)
            load = os.getloadavg()
            shown = app.screen()
        finally:
            app.close()
        deadline = time.monotonic() + 10
        while not out.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        ui = json.loads(out.read_text())
        print(
            f"UI (infertop fleet in tmux, 200x50, refresh every 1 s, sorted by tok/s), "
            f"{len(ui['applies'])} refreshes of {max(ui['rows'])} rows:"
        )
        print(f"  refresh inside the app (a worker thread): {_stats(ui['refreshes'])}")
        print(f"  putting a snapshot in the table (UI thread): {_stats(ui['applies'])}")
        print(f"  frame (layout + compositor + terminal write): {_stats(ui['frames'])}")
        print(
            f"  app CPU over {args.ui_s:.0f} s: {share * 100:.0f} % of one core; load average "
            f"{load[0]:.2f} (before the run {load0[0]:.2f}; {os.cpu_count()} cores)"
        )
        lines = [ln for ln in shown.splitlines() if ln.strip()]
        print("  screen (first rows):")
        for ln in lines[:5]:
            print("    " + ln[:150].rstrip())

        direct = Fleet(fleet_endpoints([f"http://{e}" for e in endpoints], {}))
        direct_took = []
        for _ in range(5):
            s = direct.refresh()
            direct_took.append(s.took_s * 1000)
        direct.close()
        up_direct = sum(1 for r in s.rows if r.up)
        print(
            f"for comparison, the same {n} endpoints scraped directly by infertop "
            f"(16 threads, {n} HTTP requests per refresh after detection): "
            f"{_stats(direct_took[1:])}; {up_direct} up; first refresh (with detection) "
            f"{direct_took[0]:.0f} ms"
        )
        if args.smoke:
            smoke.check(up == n + hosts, f"{up} of {n + hosts} targets up")
            smoke.check(len(full) == n, f"{len(full)} of {n} rows with every number")
            smoke.check(ui["applies"] and max(ui["rows"]) == n, f"the UI showed {ui['rows']}")
            smoke.check(up_direct == n, f"{up_direct} of {n} up when scraped directly")
            smoke.passed(f"{n} endpoints through Prometheus, in the UI and directly")
    finally:
        if prom is not None:
            prom.stop()
        helper.terminate()
        helper.wait(10)


if __name__ == "__main__":
    main()
