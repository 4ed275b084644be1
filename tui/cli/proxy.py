"""``infertop proxy``: watch other clients' inference by standing between them and a server.

Headless by default (no Textual import): it forwards, measures and exports until
Ctrl+C. ``--ui`` also opens the requests view in this terminal — the proxy then runs as
a child process of its own, so drawing the screen never holds up a byte being forwarded
(one Python process would share one GIL between them). Details: docs/proxy.md.
"""

from __future__ import annotations

import argparse
import ipaddress
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tui.cli.common import CLIError, fail
from tui.cli.ledger_args import add_ledger_arguments

DEFAULT_LISTEN = "127.0.0.1:8800"
PROXY_SLICE_MS = 0.1  # tui/core/sched_slice.py says why
ANNOUNCE = "infertop proxy listening on "

EPILOG = """\
Point your clients at the proxy instead of the server (OPENAI_BASE_URL=http://127.0.0.1:8800/v1,
OLLAMA_HOST=http://127.0.0.1:8800, ...). Every request and answer passes unchanged, each
read of the answer at once. The proxy's own routes: /infertop/metrics (Prometheus),
/infertop/events and /infertop/requests/ID (the requests view: the proxy's own user on
this machine only, by a loopback Host, never a web page). Limits: past --max-clients,
or past --max-clients-per-address of one client (a local user on loopback, an address
otherwise), the connection idle the longest is closed to make room (503 when none is);
request bodies held at once stay within --body-budget-mb (half of it per client), the
body stalled the longest dropped to make room.
Watch from another terminal, or a laptop through an ssh tunnel: infertop --watch URL.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    from tui.engines.kinds import kind_names

    p.epilog = EPILOG
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument("--upstream", required=True, metavar="URL", help="the server (http://)")
    p.add_argument(
        "--listen",
        default=DEFAULT_LISTEN,
        metavar="HOST:PORT",
        help=f"where clients connect (default {DEFAULT_LISTEN}; port 0: any free one)",
    )
    p.add_argument(
        "--public",
        action="store_true",
        help="allow a --listen address beyond loopback: anyone who can reach it can then "
        "use the upstream through the proxy (the requests view stays loopback-only)",
    )
    p.add_argument(
        "--kind",
        choices=kind_names(lambda k: k.http),
        help="the upstream's kind (default: detected, as run --url)",
    )
    p.add_argument(
        "--events",
        metavar="FILE",
        help="append one JSON line per finished request (the session log's format, "
        "text withheld; 0600)",
    )
    p.add_argument("--ui", action="store_true", help="also open the requests view here")
    p.add_argument("--telemetry", metavar="SOURCE", help="with --ui: whose hardware the view shows")
    p.add_argument("--log", action="store_true", help="one line per finished request on stderr")
    p.add_argument(
        "--no-engine-truth",
        action="store_true",
        help="vLLM: never read its /metrics (by default read only while no request passes)",
    )
    p.add_argument(
        "--slice-ms",
        type=float,
        default=PROXY_SLICE_MS,
        metavar="MS",
        help=f"the scheduler slice to ask Linux 6.12+ for, so a woken proxy passes bytes on at "
        f"once (default {PROXY_SLICE_MS:g}; 0: the kernel's default)",
    )
    p.add_argument(
        "--max-body-mb", type=float, default=32.0, metavar="MB", help="one request's body (32)"
    )
    p.add_argument(
        "--body-budget-mb",
        type=float,
        default=256.0,
        metavar="MB",
        help="the request bodies held at once, all clients together, finished or not (one "
        "client: half of it); past it the body stalled the longest is dropped (default 256)",
    )
    p.add_argument("--max-clients", type=int, default=1024, metavar="N", help="default 1024")
    p.add_argument(
        "--max-clients-per-address",
        type=int,
        metavar="N",
        help="connections of one client: on loopback one local user, else one address (an "
        "IPv6 /64 counts as one); default: half of --max-clients",
    )
    from tui.cli.handoff import add_alert_arguments, add_otel_arguments

    add_otel_arguments(p, own_requests=False)
    add_alert_arguments(p)
    p.add_argument(
        "--read-timeout",
        type=float,
        default=600.0,
        metavar="S",
        help="longest wait for the upstream's answer to begin, and between its reads (default 600)",
    )
    add_ledger_arguments(p)
    p.add_argument(
        "--energy",
        metavar="SOURCE",
        help="the hardware serving the upstream, read for the ledger's joules per client: "
        "'local', ssh://[user@]host or an exporter URL (default: none: usage shows no "
        "joules); a sampler thread in the proxy",
    )
    p.add_argument(
        "--top-clients",
        type=int,
        metavar="N",
        help="clients /infertop/metrics names apart, by tokens; the rest are 'other' "
        "(default: [ledger] top_clients, 10; 0: no per-client series)",
    )


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` or ``[V6]:PORT`` → (host, port); CLIError naming what is wrong."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isascii() or not port.isdigit() or int(port) > 65535:
        raise CLIError(f"--listen {text!r}: expected HOST:PORT")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    return host or "127.0.0.1", int(port)


def is_loopback_host(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def upstream_url(text: str) -> str:
    parts = urlsplit(text.strip())
    if parts.scheme != "http" or not parts.hostname:
        raise CLIError(f"--upstream {text!r}: an http:// URL (https upstreams are not proxied)")
    if "@" in parts.netloc:
        raise CLIError("--upstream: no credentials in the URL (clients send their own)")
    base = f"http://{parts.netloc}{parts.path}".rstrip("/")
    return base[:-3] if base.endswith("/v1") else base


def detect(url: str, kind: str | None) -> tuple[str, str | None, str]:
    """(kind, version, one line of evidence) of the upstream, as ``run --url`` finds it."""
    if kind is not None:
        return kind, None, "given with --kind"
    from tui.engines.base import EngineError
    from tui.engines.servers.detect import detect_server

    try:
        found = detect_server(url)
    except EngineError as e:
        raise CLIError(f"--upstream: {e} (or name it with --kind)", 1) from None
    return found.kind, found.version, "; ".join(found.evidence)


def build_config(args: argparse.Namespace, cfg: Any = None) -> tuple[Any, str]:
    from tui.config import Config
    from tui.proxy.server import ProxyConfig

    cfg = cfg if cfg is not None else Config()

    host, port = parse_listen(args.listen)
    if not is_loopback_host(host) and not args.public:
        raise CLIError(
            f"--listen {args.listen}: beyond loopback, anyone who can reach it can use the "
            "upstream through the proxy; add --public if that is what you want"
        )
    if not 0 < args.max_body_mb <= 4096 or not 0 < args.read_timeout <= 86_400:
        raise CLIError("--max-body-mb and --read-timeout must be positive and sane")
    if not args.max_body_mb <= args.body_budget_mb <= 65_536:
        raise CLIError("--body-budget-mb: at least --max-body-mb (and at most 65536)")
    per_address = args.max_clients_per_address
    if per_address is not None and per_address < 1:
        raise CLIError("--max-clients-per-address: at least 1")
    if not 0 <= args.slice_ms <= 100:
        raise CLIError(f"--slice-ms {args.slice_ms:g}: from 0.1 to 100 (0: the kernel's default)")
    top = cfg.ledger.top_clients if args.top_clients is None else args.top_clients
    if not 0 <= top <= 1000:
        raise CLIError(f"--top-clients {top}: from 0 to 1000")
    url = upstream_url(args.upstream)
    kind, version, evidence = detect(url, args.kind)
    config = ProxyConfig(
        upstream=url,
        kind=kind,
        version=version,
        listen_host=host,
        listen_port=port,
        read_timeout=args.read_timeout,
        stall_timeout=args.read_timeout,
        max_body=int(args.max_body_mb * 1024 * 1024),
        body_budget=int(args.body_budget_mb * 1024 * 1024),
        max_clients=max(1, args.max_clients),
        max_per_address=per_address,
        events_path=args.events,
        engine_truth=not args.no_engine_truth,
        find_processes=cfg.ledger.processes,
        top_clients=top,
    )
    return config, evidence


def main(args: argparse.Namespace) -> int:
    from tui.cli.common import load

    try:
        cfg = load(args)
        config, evidence = build_config(args, cfg)
    except CLIError as e:
        return fail(str(e), e.code)
    if args.ui:
        return _with_ui(args, config, cfg)
    from tui.cli.handoff import build_handoff, note_line
    from tui.cli.ledger_args import client_keys, open_ledger, say
    from tui.core.sched_slice import request_slice

    slice_ns = round(args.slice_ms * 1e6)  # first: the threads made after inherit it
    sched = (
        request_slice(slice_ns).describe() if slice_ns else "the kernel's default (--slice-ms 0)"
    )
    note = say("infertop proxy")
    try:
        handoff = build_handoff(
            args,
            cfg,
            note=note_line("infertop proxy"),
            on_line=_alert_line,
            upstream=config.upstream,
            own_requests=False,
        )
    except CLIError as e:
        return fail(str(e), e.code)
    config.trace = "propagate" if handoff.propagate else "record" if handoff.recording else "off"
    config.client_keys = client_keys(cfg, note)
    sink = open_ledger(args, cfg, note)
    try:
        energy = _energy_feed(args.energy, cfg, sink, config.upstream, note)
    except CLIError as e:
        handoff.close()
        return fail(str(e), e.code)
    try:
        return serve(config, evidence, log=args.log, sched=sched, sink=sink, handoff=handoff)
    finally:
        if energy is not None:
            energy[0].stop()
            energy[1].stop()
        handoff.close()


def _alert_line(text: str, bell: bool) -> None:
    from tui.core.safe_text import terminal_label

    print(f"infertop proxy: {terminal_label(text, 1000)}", file=sys.stderr, flush=True)


def _energy_feed(source: str | None, cfg: Any, sink: Any, upstream: str, note: Any) -> Any:
    """--energy: a sampler of that hardware and the feed of its energy into the ledger
    (tui/ledger/energy_feed.py), started; None without --energy or a ledger."""
    if not source:
        return None
    if sink is None:
        note("--energy: no ledger to keep the energy in (it is off)")
        return None
    from tui.ledger.energy_feed import EnergyFeed, track_window
    from tui.telemetry.sampler import TelemetrySampler
    from tui.telemetry.sources import SourceError, open_source, parse_source

    try:
        spec = parse_source(source)
    except SourceError as e:
        raise CLIError(f"--energy: {e}") from None
    t = cfg.telemetry
    sampler = TelemetrySampler(t.interval_s, source=open_source(spec, t.interval_s, t.gpu))
    sampler.start()
    track = sampler.energy
    feed = EnergyFeed(sink, lambda: upstream, track_window(track), track.latest_t)
    feed.start()
    note(f"energy: {spec.label} sampled every {t.interval_s:g} s for the ledger's joules")
    return sampler, feed


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


def child_argv(args: argparse.Namespace, config: Any) -> list[str]:
    """The headless proxy this ``--ui`` run starts (the kind already detected)."""
    from tui.core.child_python import python_argv

    argv = [
        "proxy",
        "--upstream",
        config.upstream,
        "--listen",
        args.listen,
        "--kind",
        config.kind,
        "--max-body-mb",
        str(args.max_body_mb),
        "--body-budget-mb",
        str(args.body_budget_mb),
        "--max-clients",
        str(config.max_clients),
        "--read-timeout",
        str(args.read_timeout),
        "--slice-ms",
        str(args.slice_ms),
    ]
    if args.public:
        argv.append("--public")
    if args.max_clients_per_address is not None:
        argv += ["--max-clients-per-address", str(args.max_clients_per_address)]
    if args.events:
        argv += ["--events", str(Path(args.events).expanduser().resolve())]
    if args.no_engine_truth:
        argv.append("--no-engine-truth")
    if getattr(args, "config", None):
        argv = ["--config", str(Path(args.config).expanduser().resolve()), *argv]
    if args.no_ledger:
        argv.append("--no-ledger")
    elif args.ledger:
        argv += ["--ledger", str(Path(args.ledger).expanduser().resolve())]
    argv += ["--top-clients", str(config.top_clients)]
    if args.otlp:
        argv += ["--otlp", args.otlp]
    if args.trace_propagation:
        argv.append("--trace-propagation")
    if args.alerts:
        argv += ["--alerts", str(Path(args.alerts).expanduser().resolve())]
    return python_argv("tui", *argv)


def _with_ui(args: argparse.Namespace, config: Any, cfg: Any) -> int:
    from tui.core.child_python import child_env, neutral_cwd

    log_path = proxy_log_path()
    log_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        child = subprocess.Popen(
            child_argv(args, config),
            stdout=subprocess.PIPE,
            stderr=log,
            stdin=subprocess.DEVNULL,
            env=child_env(),
            cwd=neutral_cwd(),
        )
    try:
        url = _announced(child)
        if url is None:
            return fail(f"the proxy did not start (its log: {log_path})", 1)
        from tui.cli.ui import engine_log_path, prepare_terminal_ui

        prepare_terminal_ui()
        from tui.app.app import create_app, default_state_file
        from tui.app.terminal import engine_stderr_to
        from tui.cli.ledger_args import ledger_path

        app = create_app(
            cfg,
            state_path=default_state_file(),
            telemetry_source=args.telemetry,
            watch=url,
            ledger=ledger_path(args, cfg),  # the proxy's: the usage screen reads its rows
        )
        with engine_stderr_to(engine_log_path()):
            app.run()
        return int(app.return_code or 0)
    finally:
        if child.poll() is None:
            child.terminate()
            try:
                child.wait(10)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait(5)


def _announced(child: subprocess.Popen[bytes], timeout_s: float = 30.0) -> str | None:
    """The URL the child proxy prints once it listens (None: it exited or took too long)."""
    import threading

    found: list[str] = []

    def read() -> None:
        assert child.stdout is not None
        for raw in child.stdout:
            line = raw.decode("utf-8", "replace").strip()
            if line.startswith(ANNOUNCE):
                found.append(line[len(ANNOUNCE) :])
                return

    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(timeout_s)
    return found[0] if found else None


def proxy_log_path() -> Path:
    import platformdirs

    return Path(platformdirs.user_state_dir("infertop")) / "proxy.log"
