"""``infertop proxy``'s options: its parser (with the epilog saying how clients use it),
and the :class:`~tui.proxy.server.ProxyConfig` they make — each checked, with a
:class:`~tui.cli.common.CLIError` naming the option that is wrong, and the upstream's
kind detected as ``run --url`` detects it. The command itself is :mod:`tui.cli.proxy`.
"""

from __future__ import annotations

import argparse
import ipaddress
from typing import Any
from urllib.parse import urlsplit

from tui.cli.common import CLIError
from tui.cli.ledger_args import add_ledger_arguments

DEFAULT_LISTEN = "127.0.0.1:8800"
PROXY_SLICE_MS = 0.1  # tui/core/sched_slice.py says why

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
