"""ChatBuild: the chat screen's view of the background build of llama.cpp for this CPU.

While the build runs (tui/engines/files/tuned_build.py; its state: build_state.py) a line
above the footer says where it is — the build's own step counter, the time elapsed, its
log's path — read once a second from the build's state file. When it ends:

- **done**: the app says so, the engine ``local`` (llama.cpp built for this CPU, on the
  default model) joins the engine list when config came from the built-in defaults, and
  slot A moves to it from the built-in ``prebuilt`` engine for the next prompt (after
  the answer streaming now, if one is). The prebuilt engine stays in the list: prebuilt
  vs tuned is an A/B of its own.
- **failed**: the app says why, with the log's path; the line stays, and the prebuilt
  engine keeps answering.

Every answer that streamed while the build ran carries the "disturbed: a build was
compiling" mark: the chat core asks the same state (``BuildWatch.disturbance``).

A mixin of :class:`~tui.app.screens.chat.ChatScreen`, as ChatEngines is.
"""

from __future__ import annotations

from rich.text import Text
from textual.timer import Timer
from textual.widgets import Static

from tui.app.screens.chat_engines import ChatEngines
from tui.core.safe_text import terminal_label
from tui.engines.base import EngineSpec
from tui.engines.files.build_state import BuildState, BuildWatch
from tui.engines.inprocess.llama_builds import PREBUILT_KIND, TUNED_KIND

POLL_S = 1.0
BUILTIN_PREBUILT, BUILTIN_TUNED = "prebuilt", "local"


class ChatBuild(ChatEngines):
    build_watch: BuildWatch | None = None
    build_state: BuildState | None = None  # as last read
    build_switch_pending = False  # the build is ready; slot A moves after this answer
    _build_timer: Timer | None = None

    def follow_build(self) -> None:
        """At mount: follow a build that runs now; say if the last one failed (while the
        prebuilt engine it would have replaced runs)."""
        state = self.build_watch.state() if self.build_watch is not None else None
        if state is None:
            return
        self.build_state = state
        if state.running():
            self._show_build(state)
            self._build_timer = self.set_interval(POLL_S, self.build_tick)
        elif state.phase == "failed" and self._on_prebuilt():
            self._build_failed(state)

    def build_tick(self) -> None:
        """Timer: read the state; show it, and act on its end."""
        state = self.build_watch.state() if self.build_watch is not None else None
        if state is None:
            return
        self.build_state = state
        if state.running():
            self._show_build(state)
            return
        if self._build_timer is not None:
            self._build_timer.stop()
            self._build_timer = None
        if state.phase == "done":
            self._built(state)
            return
        self._build_failed(state)

    def _build_failed(self, state: BuildState) -> None:
        """Why, with its log, on the line and in a notification; the prebuilt stays."""
        self._show_build(state, failed=True)
        text = terminal_label(state.describe(), 2000) + " — the prebuilt llama.cpp stays"
        self.notify(text, severity="error", timeout=20, markup=False)

    def build_turn_ended(self) -> None:
        """A turn ended: a switch that waited for it happens now."""
        if self.build_switch_pending and not self.core.busy:
            self.build_switch_pending = False
            if self._on_prebuilt():
                self.use_engine("A", BUILTIN_TUNED)

    # -- the end ------------------------------------------------------------------------
    def _built(self, state: BuildState) -> None:
        self.set_class(False, "-building")
        engines = self.core.config.engines
        prebuilt = engines.get(BUILTIN_PREBUILT)
        if prebuilt is not None and prebuilt.kind == PREBUILT_KIND and BUILTIN_TUNED not in engines:
            # the built-in engines, the tuned one first, as a fresh start lists them
            tuned = EngineSpec(name=BUILTIN_TUNED, kind=TUNED_KIND, model="default")
            rest = dict(engines)
            engines.clear()
            engines.update({BUILTIN_TUNED: tuned, **rest})
        moves = self._on_prebuilt() and BUILTIN_TUNED in engines
        then = (
            f"the next prompt runs on it (engine {BUILTIN_TUNED}); the prebuilt one stays "
            "in the engine list (Ctrl+N, A/B)"
            if moves
            else "engines of kind llamacpp can run now"
        )
        text = terminal_label(f"{state.describe()} — {then}", 2000)
        self.notify(text, severity="information", timeout=20, markup=False)
        if moves:
            self.build_switch_pending = True
            self.build_turn_ended()

    def _on_prebuilt(self) -> bool:
        """Slot A runs the built-in prebuilt engine (the one a finished build replaces)."""
        name = self.core.slot_engine.get("A")
        spec = self.core.config.engines.get(name) if name else None
        return spec is not None and name == BUILTIN_PREBUILT and spec.kind == PREBUILT_KIND

    def _show_build(self, state: BuildState, failed: bool = False) -> None:
        text = state.describe()
        if not failed:
            text += " · the prebuilt llama.cpp answers meanwhile"
        line = self.query_one("#build-line", Static)
        line.update(Text(terminal_label(text, 2000)))  # a path may hold "[": no markup
        line.set_class(failed, "-failed")
        self.set_class(True, "-building")
