"""InfertopApp and ``create_app``: the one factory the CLI and the tests use."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import sys
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual.app import App
from textual.binding import Binding
from textual.command import Hit, Hits, Provider

from tui.app.engine_host import EngineHost
from tui.app.messages import TelemetrySampled
from tui.app.screens.chat import ChatScreen
from tui.app.screens.fleet import FleetScreen, FleetSource
from tui.app.state import UIState, default_state_path, load_state, save_state
from tui.app.themes import DEFAULT_THEME, builtin_theme_dir, load_theme_dirs, user_theme_dir
from tui.config import Config
from tui.core.live import LiveRequest
from tui.core.metrics import RequestMetrics
from tui.core.pauses import GIL_SWITCH_INTERVAL_S
from tui.core.safe_text import terminal_safe
from tui.core.session import SessionRecorder, default_session_path, session_record
from tui.engines.base import GenerationRequest
from tui.engines.placement import ui_engine_spec
from tui.telemetry.roofline import peak_source_label, roofline
from tui.telemetry.sampler import THIS_MACHINE, LocalSource, TelemetrySample, TelemetrySampler
from tui.telemetry.sources import LOCAL, HardwareSource, SourceError, open_source, parse_source

if TYPE_CHECKING:
    from tui.fleet.rows import EndpointRow

# binding ids a user may remap in [ui.keys] (id -> key)
BINDING_IDS = (
    "cancel",
    "next_engine",
    "ab",
    "panels",
    "clear",
    "theme",
    "bench",
    "fleet",
    "help",
    "quit",
)


class EngineCommands(Provider):
    """Command palette: pick the engine for slot A or B, toggle A/B."""

    async def search(self, query: str) -> Hits:
        app = self.app
        assert isinstance(app, InfertopApp)
        matcher = self.matcher(query)
        for name, spec in app.config.engines.items():
            for slot in ("A", "B"):
                text = f"Engine {slot}: {name} ({spec.kind})"
                score = matcher.match(text)
                if score > 0:
                    yield Hit(
                        score, matcher.highlight(text), partial(app.chat.use_engine, slot, name)
                    )
        text = "Toggle A/B mode"
        if matcher.match(text) > 0:
            yield Hit(matcher.match(text), matcher.highlight(text), app.chat.action_toggle_ab)


class InfertopApp(App):
    CSS_PATH = "app.tcss"
    TITLE = "infertop"
    COMMANDS = App.COMMANDS | {EngineCommands}
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
        watch: Any = None,
    ) -> None:
        super().__init__()
        self.record_session = record_session
        self.autoplay = list(autoplay or [])
        self.config = config
        self.state_path = state_path
        self.state = load_state(state_path)
        self.theme_dirs = (
            theme_dirs if theme_dirs is not None else [builtin_theme_dir(), user_theme_dir()]
        )
        self.our_themes: list[str] = []
        self._switch_interval = sys.getswitchinterval()
        # a ./infertop.toml skipped as untrusted says so (and names `infertop trust`)
        self.startup_notes: list[tuple[str, str]] = [(n, "warning") for n in config.notices]
        self.recorder = SessionRecorder(session_path or default_session_path(config.session_dir))
        self._record_error_shown = False
        self.hosts: dict[str, EngineHost] = {}
        self.telemetry_enabled = telemetry
        remembered = self.state.engine
        if engine is not None and engine in config.engines:  # infertop --url: that one
            self.initial_engine = engine
        else:
            self.initial_engine = (
                remembered if remembered in config.engines else config.default_engine
            )
        # whose hardware: slot A's engine's `telemetry`, else --telemetry, else this machine
        self.telemetry_source = telemetry_source
        self.hardware_key = self.hardware_for(self.initial_engine)
        self.sampler = TelemetrySampler(
            interval_s=config.telemetry.interval_s,
            gpu=config.telemetry.gpu,
            on_sample=self._on_sample,
            source=self._open_hardware(self.hardware_key),
        )
        self.chat = ChatScreen()
        # `infertop fleet` starts on the fleet screen; the chat loads an engine only when
        # one is picked there (or the chat is shown)
        self.fleet_source = fleet
        self.fleet_interval_s = fleet_interval_s or config.fleet.interval_s
        self.start_on_fleet = fleet is not None
        # `infertop --watch URL` / `proxy --ui`: the requests view of a proxy, on top
        self.watch_url = watch
        self.requests_screen: Any = None
        self.load_on_start = fleet is None and watch is None
        self._own_fleet = False
        self._load_themes()
        self._apply_keys()

    # -- start / stop ----------------------------------------------------------------
    def _load_themes(self) -> None:
        loaded = load_theme_dirs(self.theme_dirs)
        for theme in loaded.themes:
            self.register_theme(theme)
            self.our_themes.append(theme.name)
        for err in loaded.errors:
            self.startup_notes.append((f"{err} — using the default theme instead", "warning"))
        wanted = self.state.theme or self.config.ui.theme
        if wanted in self.available_themes:
            self.theme = wanted
        else:
            fallback = DEFAULT_THEME if DEFAULT_THEME in self.available_themes else "textual-dark"
            if wanted:
                self.startup_notes.append(
                    (f"theme {wanted!r} not found — using {fallback}", "warning")
                )
            self.theme = fallback

    def _apply_keys(self) -> None:
        keys = dict(self.config.ui.keys)
        unknown = sorted(k for k in keys if k not in BINDING_IDS)
        for k in unknown:
            keys.pop(k)
            self.startup_notes.append(
                (f"ui.keys: unknown binding id {k!r} (known: {', '.join(BINDING_IDS)})", "warning")
            )
        if keys:
            self.set_keymap(keys)

    def notify(self, message: str, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        """Textual's notify, terminal-safe: a notification often quotes a server or a
        model (an engine's error, a finish reason)."""
        super().notify(terminal_safe(message), *args, **kwargs)

    def on_mount(self) -> None:
        # The engine threads stamp tokens; a thread woken by a token must get the GIL
        # from the UI thread first (see tui/core/pauses.py).
        self._switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
        self.push_screen(self.chat)
        if self.start_on_fleet:
            self.action_fleet()
        if self.watch_url is not None:
            from tui.app.screens.requests import RequestsScreen

            self.requests_screen = RequestsScreen(self.watch_url)
            self.push_screen(self.requests_screen)
        for text, severity in self.startup_notes:
            self.notify(text, severity=severity, timeout=8)  # type: ignore[arg-type]
        if self.telemetry_enabled:
            self.call_after_refresh(self._start_sampler)

    def _start_sampler(self) -> None:
        self.run_worker(
            self.sampler.run,
            thread=True,
            group="telemetry",
            exclusive=True,
            exit_on_error=False,
            description="hardware sampler",
        )

    async def on_unmount(self) -> None:
        sys.setswitchinterval(self._switch_interval)
        await asyncio.to_thread(self.sampler.stop)  # a remote link closes its ssh
        if self._own_fleet and self.fleet_source is not None:
            close = getattr(self.fleet_source, "close", None)
            if close is not None:
                await asyncio.to_thread(close)
        await asyncio.gather(*(asyncio.to_thread(h.close) for h in self.hosts.values()))

    def _on_sample(self, sample: TelemetrySample) -> None:
        """Called in the sampler thread: only posts a message."""
        self.chat.post_message(TelemetrySampled(sample))
        if self.requests_screen is not None:
            self.requests_screen.post_message(TelemetrySampled(sample))

    # -- whose hardware ----------------------------------------------------------------
    def hardware_for(self, engine: str | None) -> str:
        """The hardware source shown with ``engine`` in slot A (a source name)."""
        spec = self.config.engines.get(engine) if engine else None
        if spec is not None and spec.telemetry:
            return spec.telemetry
        return self.telemetry_source or LOCAL

    def _open_hardware(self, name: str) -> HardwareSource | None:
        """None (this machine, the sampler's default) for local; nothing connects yet."""
        try:
            spec = parse_source(name)
        except SourceError as e:  # config and --telemetry were checked: only by hand
            self.startup_notes.append((f"{e} — showing this machine", "warning"))
            return None
        if spec.kind == LOCAL:
            return None
        t = self.config.telemetry
        return open_source(spec, t.interval_s, t.gpu)

    def follow_engine(self, engine: str) -> None:
        """Slot A now uses ``engine``: show its hardware source if that is another."""
        key = self.hardware_for(engine)
        if key == self.hardware_key:
            return
        self.hardware_key = key
        t = self.config.telemetry
        source = self._open_hardware(key) or LocalSource(t.gpu)
        self.sampler.switch_source(source)

    # -- engines ---------------------------------------------------------------------
    def host(self, name: str) -> EngineHost:
        if name not in self.hosts:
            self.hosts[name] = EngineHost(ui_engine_spec(self.config.engines[name]))
        return self.hosts[name]

    def release_host(self, name: str) -> None:
        """Close an engine no slot uses any more (in a thread: closing may block)."""
        host = self.hosts.pop(name, None)
        if host is not None:
            self.run_worker(
                host.close,
                thread=True,
                group=f"close-{name}",
                exit_on_error=False,
                description=f"close engine {name}",
            )

    def watch_pid(self, pid: int | None) -> None:
        self.sampler.pid = pid

    async def record(
        self,
        slot: str,
        name: str,
        request: GenerationRequest,
        live: LiveRequest,
        metrics: RequestMetrics,
    ) -> None:
        if not self.record_session:
            return
        host = self.hosts.get(name)
        info = host.info() if host else None
        rec = session_record(
            engine=name,
            kind=self.config.engines[name].kind,
            model=info.model if info else str(self.config.engines[name].model),
            messages=request.messages,
            params=request.params(),
            timeline=live.timeline,
            metrics=metrics,
            request_id=request.request_id,
            slot=slot,
        )
        try:
            await asyncio.to_thread(self.recorder.append, rec)
        except OSError as e:
            if not self._record_error_shown:
                self._record_error_shown = True
                self.notify(
                    f"session log not written ({self.recorder.path}): {e.strerror}",
                    severity="error",
                )

    def roofline_text(
        self, name: str | None, m: RequestMetrics | None, sample: TelemetrySample
    ) -> str | None:
        if name is None or m is None or m.decode_tps is None:
            return None
        spec = self.config.engines[name]
        size = _model_bytes(self.hosts.get(name), spec)
        nvml_peak, peak_source = None, "nvml"
        # the sampled GPU runs this engine: a local llama.cpp offloading layers, or a
        # server on the remote host whose hardware is shown (its NVML peak, from the
        # agent; DCGM and nvitop report none: then config's, or no percentage)
        remote = sample.source != THIS_MACHINE
        on_gpu = spec.url is not None if remote else spec.n_gpu_layers != 0
        if on_gpu and sample.gpu.gpus:
            nvml_peak = sample.gpu.gpus[0].peak_bandwidth_bps
            peak_source = peak_source_label(sample.gpu.gpus[0])
        config_peak = self.config.telemetry.peak_bandwidth_gbs
        roof = roofline(size, m.decode_tps, nvml_peak, config_peak, peak_source)
        return None if roof is None else roof.describe()

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
        self.push_screen(BenchScreen())

    # -- the fleet ---------------------------------------------------------------------
    def action_fleet(self) -> None:
        """F3: the fleet screen (kept while the chat is shown, so F3 returns to it)."""
        if isinstance(self.screen, FleetScreen):
            return
        if self.fleet_source is None:
            try:
                self.fleet_source = fleet_from_config(self.config)
            except ValueError as e:
                self.notify(str(e), severity="warning", timeout=8)
                return
            self._own_fleet = True
        if not self.is_screen_installed("fleet"):
            self.install_screen(FleetScreen(self.fleet_source, self.fleet_interval_s), "fleet")
        self.push_screen("fleet")

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
        from tui.fleet.poller import spec_for_row  # httpx: not on the start-up path

        spec_for = getattr(self.fleet_source, "engine_spec_for", None)
        spec = spec_for(row) if spec_for is not None else spec_for_row(row)
        existing = self.config.engines.get(spec.name)
        if existing is not None and existing.url != spec.url:  # the name is another's
            spec = dataclasses.replace(spec, name=f"{spec.name} (fleet)")
            existing = self.config.engines.get(spec.name)
        if existing is None:
            self.config.engines[spec.name] = spec
        name = spec.name
        if isinstance(self.screen, FleetScreen):
            self.pop_screen()
        if self.chat.slot_engine["A"] == name:
            self.chat.ensure_loaded("A")  # already this slot's engine (not loaded: fleet mode)
        else:
            self.chat.use_engine("A", name)
        self.notify(f"chat on {name} ({spec.kind}) — F3 returns to the fleet", timeout=5)


def fleet_from_config(config: Config) -> FleetSource:
    """The fleet the config describes (F3 in the plain TUI); ValueError when none."""
    from tui.fleet.poller import Fleet, fleet_endpoints

    endpoints = fleet_endpoints(config.fleet.urls, config.engines)
    if not endpoints and not config.fleet.prometheus:
        raise ValueError(
            "no fleet to show: add [fleet] urls or prometheus to config, give engines a "
            "url, or run `infertop fleet --url URL`"
        )
    return Fleet(
        endpoints,
        config.fleet.prometheus,
        window_s=config.fleet.window_s,
        timeout_s=config.fleet.timeout_s,
    )


def _model_bytes(host: EngineHost | None, spec) -> int | None:  # type: ignore[no-untyped-def]
    info = host.info() if host else None
    if info is not None:
        size = info.parameters.get("model_bytes")
        if isinstance(size, int):
            return size
    if spec.kind == "llamacpp":
        from tui.engines.default_model import resolve_model_path

        try:
            return resolve_model_path(spec.model).stat().st_size
        except Exception:
            return None
    return None


def create_app(
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
    watch: Any = None,
) -> InfertopApp:
    """Build the app exactly as the ``infertop`` command does (tests pass temp paths).

    ``state_path`` defaults to the platform state dir when the CLI passes it; tests pass
    a temporary file (or None to remember nothing). ``telemetry_source``: the
    ``--telemetry`` source, shown for engines that name none in config. ``fleet``:
    start on the fleet screen reading it (``infertop fleet``). ``engine``: start on that
    configured engine (``infertop --url``), not the remembered one. ``watch``: start on
    the requests view of the proxy at that URL (``infertop --watch``), or of a feed
    (tui/app/screens/requests.py, RequestsFeed: tests).
    """
    return InfertopApp(
        config,
        session_path=session_path,
        state_path=state_path,
        theme_dirs=theme_dirs,
        telemetry=telemetry,
        record_session=record_session,
        autoplay=autoplay,
        telemetry_source=telemetry_source,
        fleet=fleet,
        fleet_interval_s=fleet_interval_s,
        engine=engine,
        watch=watch,
    )


def default_state_file() -> Path:
    """The CLI's remembered-state file: $INFERTOP_STATE, else the per-user default."""
    return Path(os.environ.get("INFERTOP_STATE", default_state_path()))
