"""Every use of Textual's private names, in one place, taken only on a Textual it fits.

The UI is cheap to watch partly because it reaches into Textual: a compositor that renders
a partial update region by region (``compositor.py`` here, built on Textual's private
``textual._compositor``: the UI thread's CPU while an answer streams about halved,
docs/performance.md#watching), and three counters Textual keeps for itself. Any Textual
release may rename them. pyproject pins the one they were tested on (``TESTED``), but a
user's environment can hold another, and a renamed name must not stop the app. So nothing
else in ``tui`` touches a private Textual name (tests/app/test_textual_private.py checks),
and each use here is taken only while the **fast paths** are on:

- **on** when the running Textual is ``TESTED`` and every private name used here is there
  with the shape this code expects (:func:`check`);
- ``INFERTOP_TEXTUAL_PRIVATE=0`` turns them off (a bug in a fast path: the app draws with
  Textual's own code); ``=1`` turns them on with another Textual, if the names are there
  (at the user's risk); unset or empty: as the first point says.

Off, each caller takes Textual's public behaviour: Textual's own compositor, Textual's
styles cache for every line of the cheap text widgets, a Markdown segment's height asked
of Markdown on every layout, and "the user scrolled away" read from the pane's scroll
position. The screen shows the same; the UI costs more CPU while an answer streams.

The decision is made at app start (:func:`decide`, called by ``InfertopApp``), or at the
first use where no app made it (a widget's test), and kept for the process; nothing is
read or probed at import. ``infertop doctor`` prints :meth:`FastPaths.summary`.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from textual.app import App
from textual.css.styles import RenderStyles
from textual.screen import Screen
from textual.widget import Widget

TESTED = "8.2.8"  # the Textual these fast paths were written and tested on (pyproject pin)
SWITCH = "INFERTOP_TEXTUAL_PRIVATE"  # 0: off; 1: on with any Textual that has the names


@dataclass(frozen=True)
class FastPaths:
    """Whether the private fast paths are on, with which Textual, and why."""

    on: bool
    version: str  # the running Textual's version
    reason: str  # why, in a few words: "tested version", "INFERTOP_TEXTUAL_PRIVATE=0", ...

    def summary(self) -> str:
        """One line for ``infertop doctor``."""
        if self.on:
            return f"Textual {self.version}: private fast paths on ({self.reason})"
        return (
            f"Textual {self.version}: fast paths off ({self.reason}), "
            "using Textual's own compositor"
        )


def textual_version() -> str:
    """The installed Textual's version ("unknown" when its metadata is missing)."""
    try:
        return importlib.metadata.version("textual")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def check(environ: Mapping[str, str] | None = None, version: str | None = None) -> FastPaths:
    """Whether the fast paths can be on here: the switch in ``environ`` (default
    ``os.environ``), the running Textual's ``version`` (default: installed), and the
    private names present (:func:`missing_private`). Never raises."""
    env = os.environ if environ is None else environ
    version = textual_version() if version is None else version
    switch = env.get(SWITCH, "").strip()
    if switch == "0":
        return FastPaths(False, version, f"{SWITCH}=0")
    note = "" if switch in ("", "1") else f"; {SWITCH}={switch!r} is not 0 or 1, ignored"
    forced = switch == "1"
    if version != TESTED and not forced:
        return FastPaths(False, version, f"tested on {TESTED}{note}")
    missing = missing_private()
    if missing is not None:
        return FastPaths(False, version, f"{missing}{note}")
    if version != TESTED:
        return FastPaths(True, version, f"{SWITCH}=1; tested on {TESTED}")
    return FastPaths(True, version, f"tested version{note}")


def missing_private() -> str | None:
    """The first private name used here that the running Textual lacks, or has in
    another shape (a method's parameters, an attribute's type), said in a few words;
    None when every one is there. Imports ``textual._compositor``; never raises."""
    try:
        for probe in (_probe_compositor, _probe_widget):
            missing = probe()
            if missing is not None:
                return missing
    except Exception as e:  # a probe that cannot even look: the same answer, off
        return f"probing Textual's private names failed: {type(e).__name__}: {e}"
    return None


def _probe_compositor() -> str | None:
    try:
        module = importlib.import_module("textual._compositor")
    except ImportError:
        return "no textual._compositor"
    compositor, chops = getattr(module, "Compositor", None), getattr(module, "ChopsUpdate", None)
    if not isinstance(compositor, type) or not isinstance(chops, type):
        return "textual._compositor has no Compositor or ChopsUpdate"
    for name, params in (  # as seen on the class (a classmethod's bound: no cls)
        ("_get_renders", ["self", "crop"]),
        ("_regions_to_spans", ["regions"]),
        ("render_partial_update", ["self"]),
    ):
        if _params(getattr(compositor, name, None)) != params:
            return f"Compositor.{name} is not ({', '.join(p for p in params if p != 'self')})"
    for name in ("cuts", "visible_widgets"):
        if not isinstance(getattr(compositor, name, None), property):
            return f"Compositor.{name} is not a property"
    if _params(chops) != ["chops", "spans", "chop_ends"]:
        return "ChopsUpdate is not (chops, spans, chop_ends)"
    instance = compositor()
    if not isinstance(getattr(instance, "_dirty_regions", None), set):
        return "Compositor has no _dirty_regions set"
    if not isinstance(getattr(Screen(), "_compositor", None), compositor):
        return "Screen has no _compositor"
    return None


def _probe_widget() -> str | None:
    widget = Widget()
    for what, value in (
        ("RenderStyles._cache_key", getattr(widget.styles, "_cache_key", None)),
        ("Widget._layout_updates", getattr(widget, "_layout_updates", None)),
        ("Widget._nodes._updates", getattr(getattr(widget, "_nodes", None), "_updates", None)),
    ):
        if type(value) is not int:
            return f"no int {what}"
    if type(getattr(widget, "_anchor_released", None)) is not bool:
        return "no bool Widget._anchor_released"
    return None


def _params(function: object) -> list[str] | None:
    if not callable(function):
        return None
    return list(inspect.signature(function).parameters)


_decided: FastPaths | None = None  # the process's decision: decide(), or the first use


def decide(environ: Mapping[str, str] | None = None) -> FastPaths:
    """Make (again) and keep the process's decision (:func:`check`): at app start."""
    global _decided
    _decided = check(environ)
    return _decided


def fast_paths() -> FastPaths:
    """The process's decision, made now if no app start made it."""
    return _decided if _decided is not None else decide()


# -- the private uses, each with Textual's public behaviour when the fast paths are off --


def use_cropped_compositor(screen: Screen[Any]) -> bool:
    """Give ``screen`` (before it is mounted) the cropped compositor (compositor.py)
    when the fast paths are on; True when it did. Off, it keeps Textual's own."""
    if not fast_paths().on:
        return False
    from tui.app.textual_private.compositor import CroppedCompositor

    screen._compositor = CroppedCompositor()
    return True


def styles_key(styles: RenderStyles) -> int | None:
    """Textual's count of changes to a widget's ``styles`` (it changes whenever any of
    their rules does), or None when the fast paths are off: then the caller cannot know
    its styles unchanged, and draws through Textual's styles cache."""
    return styles._cache_key if fast_paths().on else None


def children_layout_key(widget: Widget) -> tuple[int, int] | None:
    """Textual's counts of changes to ``widget``'s children and of the layouts asked of
    it (by a child, a style, a theme), or None when the fast paths are off: then a height
    cached on them cannot be trusted and the caller asks Textual each time."""
    if not fast_paths().on:
        return None
    return widget._nodes._updates, widget._layout_updates


def app_error(app: App[Any]) -> BaseException | None:
    """The exception that stopped ``app`` (Textual keeps the first for its test pilot),
    to name it on the terminal after a crash (tui/app/terminal.py). Read on any Textual,
    fast paths on or off: where the name is missing or holds something else, None (the
    terminal then says where the traceback is, without the error's line)."""
    error = getattr(app, "_exception", None)
    return error if isinstance(error, BaseException) else None


def anchor_released(widget: Widget) -> bool:
    """True when the user scrolled an anchored ``widget`` away from its end: Textual's
    own flag; with the fast paths off, from the public scroll position (not at the end:
    while anchored, every layout scrolls it back to the end, so the two agree after it)."""
    if fast_paths().on:
        return widget._anchor_released
    return widget.scroll_y < widget.max_scroll_y
