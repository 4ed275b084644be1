"""InfertopApp and ``create_app``: the one factory the CLI and the tests use.

The app here is its screens, its start and stop (the sampler, the GIL's switch
interval, a crash said on the restored terminal) and the one notify filter; its other
parts are its bases, one job each: the engines found on this machine and slot A's engine
at start (tui/app/found_engines.py), the fleet screen (tui/app/fleet_link.py), themes,
keys and the remembered state (tui/app/preferences.py), and where finished answers go
besides the screen — ledger, OTLP export, alerts (tui/app/outcome_sinks.py).
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual.app import App
from textual.binding import Binding
from textual.notifications import SeverityLevel

from tui.app.commands import EngineCommands, GgufCommands
from tui.app.fleet_link import FleetLink
from tui.app.found_engines import FoundEngines
from tui.app.ledger_commands import LedgerCommands
from tui.app.listeners import ListenerWatch
from tui.app.messages import TelemetrySampled
from tui.app.outcome_sinks import OutcomeSinks
from tui.app.preferences import Preferences
from tui.app.screens.chat import ChatScreen
from tui.app.screens.fleet import FleetSource
from tui.app.state import default_state_path, load_state
from tui.app.textual_private import decide
from tui.app.themes import builtin_theme_dir, user_theme_dir
from tui.chat.catalog import Catalog, is_discovered_name
from tui.chat.core import ChatCore
from tui.chat.hardware import HardwareWatch
from tui.config import Config
from tui.core.pauses import GIL_SWITCH_INTERVAL_S
from tui.core.safe_text import markup_safe, terminal_label, terminal_safe
from tui.core.session import SessionRecorder, default_session_path
from tui.engines.files.build_state import BuildWatch
from tui.engines.placement import ui_engine_spec
from tui.telemetry.sampler import TelemetrySample

if TYPE_CHECKING:
    from tui.app.app_api import DiscoveryHost
    from tui.app.screens.requests import RequestsFeed, RequestsScreen
    from tui.engines.files.gguf_scan import GgufScan
    from tui.engines.servers.port_owner import PortOwner


class InfertopApp(FoundEngines, FleetLink, Preferences, OutcomeSinks):
    CSS_PATH = "app.tcss"
    TITLE = "infertop"
    COMMANDS = App.COMMANDS | {EngineCommands, GgufCommands, LedgerCommands}
    BINDINGS = [
        Binding("ctrl+q", "quit", "Quit", id="quit", priority=True, show=False),
        Binding("ctrl+t", "next_theme", "Theme", id="theme", priority=True),
        Binding("b", "bench", "Bench", id="bench"),
        Binding("f3", "fleet", "Fleet", id="fleet", priority=True, show=False),
        Binding("f1", "toggle_help", "Keys", id="help", priority=True),
    ]

    def __init__(
        self,
        config: Config,
        *,
        session_path: Path | None = None,
        state_path: Path | None = None,
        theme_dirs: list[Path] | None = None,
        telemetry: bool = True,
        record_session: bool = True,
        autoplay: list[str] | None = None,
        telemetry_source: str | None = None,
        fleet: FleetSource | None = None,
        fleet_interval_s: float | None = None,
        engine: str | None = None,
        watch: str | RequestsFeed | None = None,
        discover: bool | None = None,
        ledger: Path | None = None,
        build_watch: BuildWatch | None = None,
        handoff: Any = None,
    ) -> None:
        super().__init__()
        # Textual's private names used only on the Textual they fit, else its own code
        self.fast_paths = decide()  # (tui/app/textual_private; `infertop doctor` says which)
        self.config = config
        # servers found on this machine, their models (tui/app/discovery.py)
        self.catalog = Catalog()
        self.discovery_on = config.discovery.enabled if discover is None else discover
        self.discovery_done = False
        self.rediscovering = False  # the palette asked again: say when nothing is new
        self.gguf_scan: GgufScan | None = None  # GGUF files found (palette: Open GGUF)
        self.state_path = state_path
        self.state = load_state(state_path)
        self.theme_dirs = (
            theme_dirs if theme_dirs is not None else [builtin_theme_dir(), user_theme_dir()]
        )
        self.our_themes: list[str] = []
        self._switch_interval = sys.getswitchinterval()
        # a ./infertop.toml skipped as untrusted says so (and names `infertop trust`)
        self.startup_notes: list[tuple[str, SeverityLevel]] = [
            (n, "warning") for n in config.notices
        ]
        recorder = SessionRecorder(session_path or default_session_path(config.session_dir))
        self.telemetry_enabled = telemetry
        remembered = self.state.engine
        initial = self._initial_engine(config, engine, remembered)
        # llama.cpp compiling for this CPU: its progress on the chat screen, and the mark
        # on every answer it ran beside (tui/engines/files/build_state.py)
        build_watch = BuildWatch() if build_watch is None else build_watch
        self.core = ChatCore(
            config,
            lambda event: self.chat.post_core_event(event),
            initial=initial,
            recorder=recorder if record_session else None,
            host_spec=ui_engine_spec,
            disturbance=build_watch.disturbance,
        )
        self._open_ledger(ledger, config)
        self.handoff = handoff
        if handoff is not None:
            self._attach_handoff(handoff)
        # whose hardware: slot A's engine's `telemetry`, else --telemetry, else this machine
        notes: list[str] = []
        self.hardware = HardwareWatch(config, telemetry_source, initial, self._on_sample, notes)
        self.startup_notes += [(n, "warning") for n in notes]
        # the engine used last was a server discovery found (kind:port): slot A waits for
        # discovery (a second or so) before loading, and takes that server if it is back
        # and its port's listener is the user's own (anyone may listen on a free port)
        self.awaiting_remembered: str | None = None
        self.port_owners: dict[int, PortOwner] = {}  # where discovery found servers
        # ... and whose listener each prompt to one is sent to (tui/app/listeners.py)
        self.listeners = ListenerWatch()
        if (
            self.discovery_on
            and fleet is None
            and watch is None
            and engine is None
            and remembered is not None
            and remembered not in config.engines
            and is_discovered_name(remembered)
        ):
            self.awaiting_remembered = remembered
        load_on_start = fleet is None and watch is None and not self.awaiting_remembered
        self.chat = ChatScreen(
            self.core,
            self.hardware,
            telemetry=telemetry,
            load_on_start=load_on_start,
            autoplay=autoplay,
            build_watch=build_watch,
        )
        # `infertop fleet` starts on the fleet screen; the chat loads an engine only when
        # one is picked there (or the chat is shown)
        self.fleet_source = fleet
        self.fleet_interval_s = fleet_interval_s or config.fleet.interval_s
        self.start_on_fleet = fleet is not None
        # `infertop --watch URL` / `proxy --ui`: the requests view of a proxy, on top
        self.requests_feed = watch
        self.requests_screen: RequestsScreen | None = None
        self._own_fleet = False
        self._themes_and_keys(config)

    # -- start / stop ----------------------------------------------------------------
    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        """Textual's notify, through the one text filter: a notification often quotes a
        server or a model (an engine's error, a finish reason), so its text is made
        terminal-safe and its brackets escaped (tui/core/safe_text.py): shown as it is,
        no markup read in it (a server's "overloaded [/]" was a tag that stopped the
        app). Every widget's and screen's notify comes here. ``markup=False``: the text
        is not read as markup at all (then it is only made terminal-safe)."""
        text = markup_safe(message) if markup else terminal_safe(message)
        super().notify(
            text, title=terminal_label(title), severity=severity, timeout=timeout, markup=markup
        )

    def run(self, *args: Any, **kwargs: Any) -> None:
        """Textual's run; when the UI stops on an error (exit code not 0), the terminal,
        restored, says so and names the log with the traceback (tui/app/terminal.py):
        stderr goes to the engines' log while the UI runs, and the app would just be
        gone."""
        result = super().run(*args, **kwargs)
        if self.return_code:
            from tui.app.terminal import say_crash
            from tui.app.textual_private import app_error

            say_crash(self.return_code, app_error(self))
        return result

    def on_mount(self) -> None:
        # The engine threads stamp tokens; a thread woken by a token must get the GIL
        # from the UI thread first (see tui/core/pauses.py).
        self._switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
        self.push_screen(self.chat)
        if self.start_on_fleet:
            self.action_fleet()
        if self.requests_feed is not None:
            from tui.app.screens.requests import RequestsScreen

            self.requests_screen = RequestsScreen(self.requests_feed)
            self.push_screen(self.requests_screen)
        for text, severity in self.startup_notes:
            self.notify(text, severity=severity, timeout=8)
        if self.telemetry_enabled:
            self.call_after_refresh(self._start_sampler)
        if self.discovery_on:
            self.call_after_refresh(self._start_discovery)

    def _start_sampler(self) -> None:
        self.ledger.start_energy(self.hardware.sampler.energy, self.core)
        self.run_worker(
            self.hardware.sampler.run,
            thread=True,
            group="telemetry",
            exclusive=True,
            exit_on_error=False,
            description="hardware sampler",
        )

    async def on_unmount(self) -> None:
        sys.setswitchinterval(self._switch_interval)
        await asyncio.to_thread(self.hardware.sampler.stop)  # a remote link closes its ssh
        if self._own_fleet and self.fleet_source is not None:
            close = getattr(self.fleet_source, "close", None)
            if close is not None:
                await asyncio.to_thread(close)
        await self.core.close()
        await asyncio.to_thread(self.ledger.stop_energy)
        await asyncio.to_thread(self.core.outcomes.close)

    def _on_sample(self, sample: TelemetrySample) -> None:
        """Called in the sampler thread: only posts a message (and hands the sample to
        the hardware alert rules, which only append it)."""
        if self.handoff is not None and self.handoff.alerts is not None:
            self.handoff.alerts.hardware(sample)
        self.chat.post_message(TelemetrySampled(sample))
        if self.requests_screen is not None:
            self.requests_screen.post_message(TelemetrySampled(sample))

    # -- bench -------------------------------------------------------------------------
    def action_bench(self) -> None:
        try:
            from tui.app.screens.bench import BenchScreen
        except ImportError:
            self.notify("bench screen not available", severity="warning")
            return
        self.push_screen(BenchScreen(self.config))


if TYPE_CHECKING:  # the palette and the chat screen reach the app as this type
    _discovery_host: type[DiscoveryHost] = InfertopApp


def create_app(config: Config, **kwargs: Any) -> InfertopApp:
    """Build the app exactly as the ``infertop`` command does (tests pass temp paths).

    Keywords are InfertopApp's: ``session_path``, ``state_path`` (the CLI passes the
    platform state file; tests a temporary one, or None to remember nothing),
    ``theme_dirs``, ``telemetry``, ``record_session``, ``autoplay``,
    ``telemetry_source`` (``--telemetry``: shown for engines that name none),
    ``fleet`` (start on the fleet screen reading it: ``infertop fleet``),
    ``fleet_interval_s``, ``engine`` (start on that engine: ``infertop --url``) and
    ``watch`` (start on the requests view of the proxy at that URL: ``infertop --watch``,
    ``proxy --ui``; or of a feed, tui/app/screens/requests.py's RequestsFeed: tests) and
    ``discover`` (probe local servers after the first paint; None: ``[discovery]
    enabled`` in config), ``ledger`` (the request ledger's file: every answer kept
    there, the usage and history screens read it; None: off) and ``build_watch`` (the
    background build shown and marked; None: this environment's,
    tui/engines/files/build_state.py).
    """
    return InfertopApp(config, **kwargs)


def default_state_file() -> Path:
    """The CLI's remembered-state file: $INFERTOP_STATE, else the per-user default."""
    return Path(os.environ.get("INFERTOP_STATE", default_state_path()))
