"""Counting the screen's layouts in a UI test, from a quiet screen (``tests.app.screen_quiet``).

A test that says "this costs no layout" counts the calls of the screen's
``_refresh_layout`` over the code under test. What came before it (a mount, a box given
a new height) may still be on its way to a layout: the widget marks itself, its idle
hands a Layout message to the screen, the screen lays out on its update timer — three
hops, each a turn of the event loop later, and on a loaded 2-core runner one pause, or
a screen whose own flags are clear, is not the end of them (CI saw the tail box's new
height, asked before the count began, laid out inside it). So the count starts from
quiet: nothing pending on the screen or on any widget, and no layout, over several
pauses in a row.

Textual's private names are read here, in a test, not in ``tui``
(tui/app/textual_private fences the app's).
"""

from __future__ import annotations

from typing import Any

from textual.screen import Screen

CALM_PAUSES = 3  # pauses in a row with nothing pending and no layout
MOST_PAUSES = 500  # 10 s of 20 ms pauses: a screen that never goes quiet is a failure


def count_layouts(monkeypatch: Any, pilot: Any) -> list[int]:
    """A list that gets one item per layout of the app's screen class from now on."""
    screen = type(pilot.app.screen)
    real = screen._refresh_layout
    layouts: list[int] = []

    def counted(self, *a, **k):  # type: ignore[no-untyped-def]
        layouts.append(1)
        return real(self, *a, **k)

    monkeypatch.setattr(screen, "_refresh_layout", counted)
    return layouts


def pending(screen: Screen[Any]) -> bool:
    """Whether the screen or any widget on it has a layout, scroll, repaint, style
    refresh or after-refresh callback still to do."""
    if (
        screen._layout_required
        or screen._scroll_required
        or screen._repaint_required
        or screen._dirty_widgets
        or screen._callbacks
    ):
        return True
    return any(
        w._layout_required
        or w._scroll_required
        or w._repaint_required
        or w._refresh_styles_required
        for w in screen.walk_children()
    )


async def quiet(pilot: Any, layouts: list[int]) -> None:
    """Pause until the screen is quiet (see the module's docstring), then empty
    ``layouts`` (from :func:`count_layouts`): what it counts next is what comes after."""
    calm = 0
    for _ in range(MOST_PAUSES):
        before = len(layouts)
        await pilot.pause(0.02)
        calm = calm + 1 if len(layouts) == before and not pending(pilot.app.screen) else 0
        if calm >= CALM_PAUSES:
            layouts.clear()
            return
    raise AssertionError(f"the screen never went quiet ({len(layouts)} layouts)")


async def layouts_from_quiet(monkeypatch: Any, pilot: Any) -> list[int]:
    """Count the screen's layouts from the moment it is quiet."""
    layouts = count_layouts(monkeypatch, pilot)
    await quiet(pilot, layouts)
    return layouts
