"""InfertopApp and ``create_app``: the one factory the CLI and the tests use."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual.app import App
from textual.binding import Binding
from textual.notifications import SeverityLevel
from textual.worker import Worker, WorkerState

from tui.app.commands import EngineCommands, GgufCommands
from tui.app.discovery import PortOwners
from tui.app.keys import checked_keymap
from tui.app.ledger_commands import LedgerCommands
from tui.app.ledger_link import AppLedger, thread_note
from tui.app.listeners import ListenerWatch
from tui.app.messages import ModelsListed, ServersFound, SideNote, TelemetrySampled
from tui.app.screens.chat import ChatScreen
from tui.app.screens.chat_engines import EngineChosen
from tui.app.screens.fleet import FleetScreen, FleetSource
from tui.app.state import UIState, default_state_path, load_state, save_state
from tui.app.textual_private import decide
from tui.app.themes import builtin_theme_dir, load_themes, user_theme_dir
from tui.chat.catalog import Catalog, is_discovered_name
from tui.chat.core import ChatCore
from tui.chat.hardware import HardwareWatch
from tui.config import Config
from tui.core.pauses import GIL_SWITCH_INTERVAL_S
from tui.core.safe_text import markup_safe, terminal_label, terminal_safe
from tui.core.session import SessionRecorder, default_session_path
from tui.engines.placement import ui_engine_spec
from tui.fleet.build import NoFleet, adopt_endpoint, build_fleet
from tui.telemetry.sampler import TelemetrySample

if TYPE_CHECKING:
    from tui.app.app_api import DiscoveryHost
    from tui.app.screens.requests import RequestsFeed, RequestsScreen
    from tui.engines.files.gguf_scan import GgufFile, GgufScan
    from tui.engines.servers.port_owner import PortOwner
    from tui.fleet.rows import EndpointRow


class InfertopApp(App[None]):
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
        if engine is not None and engine in config.engines:  # infertop --url: that one
            initial = engine
        else:
            initial = remembered if remembered in config.engines else config.default_engine
        self.core = ChatCore(
            config,
            lambda event: self.chat.post_core_event(event),
            initial=initial,
            recorder=recorder if record_session else None,
            host_spec=ui_engine_spec,
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

    def _open_ledger(self, ledger: Path | None, config: Config) -> None:
        """The request ledger: every answer (and bench request) kept, numbers only."""
        self.ledger = AppLedger(ledger, config.ledger)
        sink = self.ledger.open(thread_note(self))
        if sink is not None:
            self.core.outcomes.add(sink)
        elif self.ledger.error:
            self.startup_notes.append((self.ledger.error, "warning"))

    def _themes_and_keys(self, config: Config) -> None:
        """Ours and the user's themes, and the user's keys (what is wrong with either is
        said at start)."""
        registered, notes = load_themes(self, self.theme_dirs, self.state.theme or config.ui.theme)
        self.our_themes += registered
        keymap, key_notes = checked_keymap(config.ui.keys)
        self.startup_notes += [(n, "warning") for n in notes + key_notes]
        if keymap:
            self.set_keymap(keymap)

    def _attach_handoff(self, handoff: Any) -> None:
        """OTLP export and alert rules (tui/cli/handoff.py): their sinks take every
        finished answer, each request gets its trace context, an alert is a line here."""
        from tui.core.trace_context import TraceMode

        for sink in handoff.sinks:
            self.core.outcomes.add(sink)
        mode: TraceMode = "propagate" if handoff.propagate else "record"
        self.core.trace = mode if handoff.recording else "off"
        exporter = handoff.exporter
        if exporter is not None and exporter.capture_content:
            from tui.otel.spans import answer_json, messages_json

            def tap(rid: str, msgs: list[dict[str, str]], text: str, finish: str | None) -> None:
                exporter.attach_content(rid, messages_json(msgs), answer_json(text, finish))

            self.core.content_tap = tap
        if exporter is not None:
            exporter.note = lambda text: self.post_message(SideNote(text, False))
        if handoff.notifier is not None:
            handoff.notifier.on_line = lambda text, bell: self.post_message(SideNote(text, bell))

    def on_side_note(self, msg: SideNote) -> None:
        self.notify(msg.text, severity="warning", timeout=10)
        if msg.bell:
            self.bell()

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

    def _start_discovery(self) -> None:
        from tui.app.discovery import discover_in_thread
        from tui.engines.servers.discovery import loopback_urls

        skip = loopback_urls(list(self.config.engines.values()))
        self.run_worker(
            lambda: discover_in_thread(self.config.discovery, skip, self.post_message),
            thread=True,
            group="discovery",
            exclusive=True,
            exit_on_error=False,
            description="discover local servers",
        )

    def rediscover(self) -> None:
        """The palette's "Discover local servers again": a server started since is added
        (the ones known stay as they are)."""
        if any(w.group == "discovery" and not w.is_finished for w in self.workers):
            return
        self.discovery_done = False
        self.rediscovering = True
        self._start_discovery()

    def on_servers_found(self, msg: ServersFound) -> None:
        from tui.app.discovery import found_note
        from tui.engines.servers.discovery import FOUND

        added = self.catalog.add_found(self.config, msg.findings)
        self.listeners.found |= {f.port for f in msg.findings if f.status == FOUND}
        self.discovery_done = True
        if added:
            self.notify(found_note(added), timeout=6)
        elif self.rediscovering:
            self.notify("no new local server found", timeout=3)
        self.rediscovering = False
        self._take_remembered()

    def on_port_owners(self, msg: PortOwners) -> None:
        self.port_owners.update(msg.owners)

    def _take_remembered(self) -> None:
        """After discovery (or when it failed): slot A on the server used last if it was
        found again on a port the user's own process listens on, else its engine loads
        as usual (a server found there under another owner is named in a notification,
        and used only once the user chooses it)."""
        name, self.awaiting_remembered = self.awaiting_remembered, None
        if name is None:
            return
        if name in self.config.engines and not self.chat.busy:
            owner = self.port_owners.get(int(name.rsplit(":", 1)[1]))
            if owner is not None and owner.is_yours():
                self.chat.use_engine("A", name)
                self.listeners.trust(owner)  # the user's own: each prompt checks it still is
                return
            from tui.app.discovery import remembered_note

            self.notify(remembered_note(name, owner), severity="warning", timeout=12)
        self.chat.ensure_loaded("A")

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.group == "discovery" and event.state == WorkerState.ERROR:
            self.discovery_done = True
            self._take_remembered()  # never left waiting on a discovery that failed

    def on_models_listed(self, msg: ModelsListed) -> None:
        self.catalog.models[msg.engine] = msg.models

    # -- GGUF files on this machine ----------------------------------------------------
    def scan_ggufs(self) -> GgufScan:
        """Scan the GGUF folders (blocking, bounded: in a thread) and keep the result."""
        from tui.engines.files.gguf_scan import scan_ggufs

        self.gguf_scan = scan_ggufs(self.config.discovery.gguf_roots())
        return self.gguf_scan

    def open_gguf(self, found: GgufFile) -> None:
        """Slot A runs ``found`` in-process (an engine ``gguf:NAME`` joins the config)."""
        from tui.chat.catalog import gguf_engine

        name = gguf_engine(self.config, found.path, found.name)
        self.chat.use_engine("A", name)
        if self.chat.slot_engine["A"] == name:
            self.notify(f"loading {found.name} ({found.details()}) in-process…", timeout=4)

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

    def on_engine_chosen(self, msg: EngineChosen) -> None:
        self.remember(engine=msg.engine)

    # -- themes, state, bench ----------------------------------------------------------
    def remember(self, engine: str | None = None, theme: str | None = None) -> None:
        if engine:
            self.state.engine = engine
        if theme:
            self.state.theme = theme
        save_state(self.state_path, UIState(self.state.engine, self.state.theme))

    def action_next_theme(self) -> None:
        names = self.our_themes or sorted(self.available_themes)
        i = names.index(self.theme) if self.theme in names else -1
        self.theme = names[(i + 1) % len(names)]
        self.notify(f"theme: {self.theme}", timeout=2)

    def watch_theme(self, theme: str) -> None:
        if self.is_running:
            self.remember(theme=theme)

    def action_toggle_help(self) -> None:
        """F1: the app's keys, grouped, as remapped (tui/app/screens/help.py)."""
        from tui.app.screens.help import HelpScreen

        if isinstance(self.screen, HelpScreen):
            self.screen.dismiss(None)
            return
        bound: dict[str, str] = {}
        for key, active in self.active_bindings.items():
            if active.binding.id and active.binding.id not in bound:
                bound[active.binding.id] = key
        self.push_screen(HelpScreen(bound))

    def action_bench(self) -> None:
        try:
            from tui.app.screens.bench import BenchScreen
        except ImportError:
            self.notify("bench screen not available", severity="warning")
            return
        self.push_screen(BenchScreen(self.config))

    # -- the fleet ---------------------------------------------------------------------
    def action_fleet(self) -> None:
        """F3: the fleet screen (kept while the chat is shown, so F3 returns to it)."""
        if isinstance(self.screen, FleetScreen):
            return
        if self.fleet_source is None:
            try:
                self.fleet_source = build_fleet(self.config)
            except NoFleet as e:
                self.notify(str(e), severity="warning", timeout=8)
                return
            self._own_fleet = True
        if not self.is_screen_installed("fleet"):
            self.install_screen(FleetScreen(self.fleet_source, self.fleet_interval_s), "fleet")
        self.push_screen("fleet")

    def on_fleet_screen_endpoint_chosen(self, msg: FleetScreen.EndpointChosen) -> None:
        self.open_endpoint(msg.row)

    def on_fleet_screen_back_to_chat(self, msg: FleetScreen.BackToChat) -> None:
        self.show_chat()

    def show_chat(self) -> None:
        """Back from the fleet to the chat (its engine loads now if it has not)."""
        if isinstance(self.screen, FleetScreen):
            self.pop_screen()
        self.chat.ensure_loaded("A")

    def open_endpoint(self, row: EndpointRow) -> None:
        """Enter on a fleet row: slot A of the chat talks to that endpoint now (its spec
        joins the running config), so our TTFT shows beside the server's."""
        if row.url is None:
            self.notify(f"{row.name}: no URL known for this endpoint", severity="warning")
            return
        if self.chat.busy:
            self.notify("an answer is still streaming — Esc cancels it first", severity="warning")
            return
        name = adopt_endpoint(self.config, self.fleet_source, row).name
        if isinstance(self.screen, FleetScreen):
            self.pop_screen()
        if self.chat.slot_engine["A"] == name:
            self.chat.ensure_loaded("A")  # already this slot's engine (not loaded: fleet mode)
        else:
            self.chat.use_engine("A", name)
        kind = self.config.engines[name].kind
        self.notify(f"chat on {name} ({kind}) — F3 returns to the fleet", timeout=5)


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
    enabled`` in config) and ``ledger`` (the request ledger's file: every answer kept
    there, the usage and history screens read it; None: off).
    """
    return InfertopApp(config, **kwargs)


def default_state_file() -> Path:
    """The CLI's remembered-state file: $INFERTOP_STATE, else the per-user default."""
    return Path(os.environ.get("INFERTOP_STATE", default_state_path()))
