"""The chat screen's compositor (tui/app/textual_private/compositor.py) sends the terminal
exactly what Textual's own compositor would, for every partial update: the frames a real stream
makes, and random dirty regions over real screens (one pane, A/B, the narrow layout
with the panels shown over the chat, a notification on top).

Both are computed from the same compositor state: ours as the screen calls it, then
Textual's (``Compositor.render_partial_update`` with Textual's ``_get_renders``) for the
same dirty regions, each rendered to what the terminal is told: the text and style
written at each position. (Textual's also moves the cursor to a region's right edge and
writes nothing there, when a widget starts at that edge; ours does not: such a move
changes nothing on screen, so writes of no text are left out of the comparison.)
"""

from __future__ import annotations

import functools
import random

import pytest
from textual._compositor import Compositor

from tests.app.app_support import gen
from tui.app.textual_private.compositor import CroppedCompositor

TWO = (
    '[engines.s1]\nkind = "synthetic"\noptions = { tokens_per_s = 400 }\n'
    '[engines.s2]\nkind = "synthetic"\noptions = { tokens_per_s = 300 }\n'
)
PROMPT = "Tell me a story about a lighthouse keeper and the sea."

pytestmark = pytest.mark.fast_paths  # the cropped compositor itself


def writes(update, console) -> list[tuple[int, int, str]] | None:  # type: ignore[no-untyped-def]
    """(row, column, the text with its styles as escapes) of each write ``update`` makes."""
    if update is None:
        return None
    out: list[tuple[int, int, list[str]]] = []
    for segment in update.__rich_console__(console, console.options):
        if segment.control:
            (_, x, y), *_ = segment.control  # a move_to
            out.append((y, x, []))
        elif segment.text and segment.text != "\n":
            out[-1][2].append(repr((segment.text, segment.style)))
    return [(y, x, "".join(parts)) for y, x, parts in out if parts]


def textual_update(comp: CroppedCompositor, dirty: set) -> list | None:  # type: ignore[type-arg]
    """What Textual's own compositor writes for ``dirty``."""
    comp._dirty_regions = set(dirty)
    comp._get_renders = functools.partial(Compositor._get_renders, comp)  # type: ignore[method-assign]
    try:
        update = Compositor.render_partial_update(comp)
    finally:
        del comp._get_renders
    return writes(update, comp_console[0])


comp_console: list = []  # type: ignore[type-arg]


def ours(comp: CroppedCompositor, dirty: set) -> list | None:  # type: ignore[type-arg]
    comp._dirty_regions = set(dirty)
    return writes(comp.render_partial_update(), comp_console[0])


def random_regions(rng: random.Random, width: int, height: int) -> set:  # type: ignore[type-arg]
    from textual.geometry import Region

    out = set()
    for _ in range(rng.randint(1, 4)):
        if rng.random() < 0.5:  # a line or two, as a stream dirties them
            w, h = rng.randint(1, width), rng.randint(1, 2)
        else:
            w, h = rng.randint(1, width), rng.randint(1, height)
        out.add(Region(rng.randint(0, width - w), rng.randint(0, height - h), w, h))
    return out


def check_random(app, rng: random.Random, n: int) -> int:  # type: ignore[no-untyped-def]
    comp = app.screen._compositor
    assert isinstance(comp, CroppedCompositor)
    comp_console[:] = [app.console]
    width, height = app.size
    checked = 0
    for _ in range(n):
        dirty = random_regions(rng, width, height)
        expected = textual_update(comp, dirty)
        assert ours(comp, dirty) == expected, sorted(dirty)
        checked += expected is not None
    return checked


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_same_bytes_as_textual(build_app, make_config, wait_for, size) -> None:  # type: ignore[no-untyped-def]
    app = build_app(make_config('default_engine = "s1"\n' + gen(400) + TWO), telemetry=True)
    frames: list[tuple[list | None, list | None]] = []  # type: ignore[type-arg]
    async with app.run_test(size=size) as pilot:
        comp = app.screen._compositor
        comp_console[:] = [app.console]
        real = comp.render_partial_update

        def both() -> object:  # every frame the app draws: Textual's answer, then ours
            dirty = set(comp._dirty_regions)
            frames.append((textual_update(comp, dirty), None))
            comp._dirty_regions = dirty
            update = real()
            frames[-1] = (frames[-1][0], writes(update, app.console))
            return update

        comp.render_partial_update = both
        await app.screen.submit_text(PROMPT)
        await wait_for(pilot, lambda: not app.screen.busy, 60)
        del comp.render_partial_update
        rng = random.Random(size[0])
        assert check_random(app, rng, 150) > 100
        app.screen.query_one("#conv-A").scroll_home(animate=False)  # a scroll, no layout:
        await pilot.pause()  # the compositor's index of widgets by row is made anew
        assert check_random(app, rng, 150) > 100
        await pilot.press("ctrl+o")  # A/B: two panes
        await app.screen.submit_text(PROMPT)
        await wait_for(pilot, lambda: not app.screen.busy, 60)
        app.notify("a notification on top of the screen", timeout=30)
        await pilot.pause()
        assert check_random(app, rng, 150) > 100
        if size == (80, 24):
            await pilot.press("f2")  # the panels over the chat
            await pilot.pause()
            assert check_random(app, rng, 150) > 100
    drawn = [f for f in frames if f[0] is not None]
    assert len(drawn) > 10  # the stream drew frames: each compared
    assert all(ours == theirs for theirs, ours in frames)
