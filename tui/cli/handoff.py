"""What each front end hands finished requests to, from its arguments and config: OTLP
export (tui/otel) and alert rules (tui/alerts). Shared by ``proxy``, ``run``, ``bench``
and the TUI, so ``--otlp``, ``--trace-propagation``, ``--capture-content`` and
``--alerts`` mean one thing everywhere.

``--otlp URL`` (or ``[otel] endpoint``) turns export on: ``URL`` is a collector's
OTLP/HTTP base URL, or ``env`` for the standard ``OTEL_EXPORTER_OTLP_*`` variables;
``OTEL_SDK_DISABLED=true`` turns it off whatever else says. ``--trace-propagation`` (or
``[otel] trace_propagation``) sends a W3C ``traceparent`` with each request. Rules come
from ``[[alerts]]`` in config, or ``--alerts FILE`` (``[alerting]`` and ``[[alerts]]``),
which replaces them.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tui.cli.common import CLIError
from tui.config import Config
from tui.core.outcome import OutcomeSink

OTLP_HELP = (
    "export each finished request as an OpenTelemetry GenAI span, and GenAI metrics, to "
    "this OTLP/HTTP collector (e.g. http://127.0.0.1:4318; Phoenix: http://127.0.0.1:6006), "
    "or 'env' for the OTEL_EXPORTER_OTLP_* variables (default: [otel] endpoint; off). "
    "Needs: pip install 'infertop[otel]'"
)


def add_otel_arguments(p: argparse.ArgumentParser, own_requests: bool = True) -> None:
    """``--otlp`` and ``--trace-propagation``; with ``own_requests`` (the chat and run:
    requests the user typed) also ``--capture-content``."""
    p.add_argument("--otlp", metavar="URL", help=OTLP_HELP)
    p.add_argument(
        "--trace-propagation",
        action="store_true",
        help="send a W3C traceparent with each request "
        + (
            "(forwarded requests get one naming the proxy's span; a client's own trace is "
            "continued; off by default: the proxy changes no byte)"
            if not own_requests
            else "so the engine's own span joins infertop's trace"
        )  # fmt: skip
        + " (default: [otel] trace_propagation)",
    )
    if own_requests:
        p.add_argument(
            "--capture-content",
            action="store_true",
            help="with --otlp: put your prompt and the answer on the request's span "
            "(default: [otel] capture_content; off: numbers only)",
        )


def add_alert_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--alerts",
        metavar="FILE",
        help="alert rules ([alerting] and [[alerts]] tables; README 'Alerts') evaluated "
        "over the traffic, in place of config's [[alerts]]",
    )


def otlp_endpoint(args: argparse.Namespace, cfg: Config) -> str | None:
    from tui.otel.export import sdk_disabled

    endpoint = getattr(args, "otlp", None) or cfg.otel.endpoint
    if endpoint is None or sdk_disabled():
        return None
    return str(endpoint)


def trace_propagation(args: argparse.Namespace, cfg: Config) -> bool:
    return bool(getattr(args, "trace_propagation", False) or cfg.otel.trace_propagation)


@dataclass
class Handoff:
    """The sinks a front end adds to its Outcomes, and what it closes at the end."""

    exporter: Any = None  # tui.otel.export.OtelExporter
    alerts: Any = None  # tui.alerts.engine.AlertEngine
    notifier: Any = None  # tui.alerts.notify.Notifier
    gauges: Any = None  # tui.alerts.gauges.EngineGauges
    propagate: bool = False
    closers: list[Callable[[], None]] = field(default_factory=list)

    @property
    def sinks(self) -> list[OutcomeSink]:
        return [s for s in (self.exporter, self.alerts) if s is not None]

    @property
    def recording(self) -> bool:
        """Requests need trace ids (for spans, or to propagate)."""
        return self.exporter is not None or self.propagate

    def exposition(self) -> str:
        """The exporter's and the alerts' series for /infertop/metrics."""
        parts = [x.exposition() for x in (self.exporter, self.alerts, self.notifier) if x]
        return "".join(parts)

    def close(self) -> None:
        for close in (
            *(self.closers),
            *(x.close for x in (self.gauges, self.alerts, self.notifier) if x is not None),
        ):
            try:
                close()
            except Exception:  # noqa: BLE001 - closing must not fail the command
                pass
        if self.exporter is not None:
            self.exporter.close()


def note_line(prefix: str) -> Callable[[str], None]:
    from tui.core.safe_text import terminal_label

    def note(text: str) -> None:
        print(f"{prefix}: {terminal_label(text, 2000)}", file=sys.stderr, flush=True)

    return note


def build_handoff(
    args: argparse.Namespace,
    cfg: Config,
    *,
    note: Callable[[str], None],
    on_line: Callable[[str, bool], None] | None = None,
    upstream: str | None = None,
    own_requests: bool = True,
    alerts: bool = True,
) -> Handoff:
    """The exporter and the alert engine the arguments and config ask for (CLIError,
    one line, for what cannot be had). ``upstream``: the server the requests go to (the
    engine's /metrics for the engine's rules, and named in alert events)."""
    h = Handoff(propagate=trace_propagation(args, cfg))
    endpoint = otlp_endpoint(args, cfg)
    if endpoint is not None:
        from tui.otel.export import OtelExporter, OtelUnavailable

        capture = own_requests and bool(
            getattr(args, "capture_content", False) or cfg.otel.capture_content
        )
        try:
            h.exporter = OtelExporter(
                endpoint,
                capture_content=capture,
                metric_interval_s=cfg.otel.metric_interval_s,
                timeout_s=cfg.otel.timeout_s,
                note=note,
            )
        except OtelUnavailable as e:
            raise CLIError(str(e)) from None
    elif getattr(args, "capture_content", False):
        raise CLIError("--capture-content goes with --otlp (or [otel] endpoint)")
    if alerts:
        _alerts(h, args, cfg, note, on_line, upstream)
    return h


def _alerts(
    h: Handoff,
    args: argparse.Namespace,
    cfg: Config,
    note: Callable[[str], None],
    on_line: Callable[[str, bool], None] | None,
    upstream: str | None,
) -> None:
    from tui.alerts.rules import RuleError, load_rules_file

    rules, settings = cfg.alerts, cfg.alerting
    path = getattr(args, "alerts", None)
    if path:
        try:
            rules, settings = load_rules_file(path)
        except RuleError as e:
            raise CLIError(str(e)) from None
    if not rules:
        return
    from tui.alerts.engine import AlertEngine
    from tui.alerts.notify import Notifier

    h.notifier = Notifier(settings, on_line)
    h.alerts = AlertEngine(rules, h.notifier, upstream=upstream)
    if h.alerts.needs_engine:
        if upstream is None or not upstream.startswith("http"):
            note("alerts: rules on the engine's numbers need a server URL; they stay quiet")
        else:
            from tui.alerts.gauges import EngineGauges

            h.gauges = EngineGauges(upstream, h.alerts, note=note)
            h.gauges.start()
    if h.alerts.needs_hardware:
        _hardware(h, cfg)
    h.alerts.start()


def _hardware(h: Handoff, cfg: Config) -> None:
    """A sampler of this machine's GPUs for the hardware rules (the TUI feeds its own
    sampler's samples instead)."""
    from tui.telemetry.sampler import TelemetrySampler

    sampler = TelemetrySampler(
        max(cfg.telemetry.interval_s, 1.0), gpu=True, on_sample=h.alerts.hardware
    )
    sampler.start()
    h.closers.append(sampler.stop)
