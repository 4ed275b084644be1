"""laid_out_size (tui/app/widgets/sizes.py) is Textual's ``Widget.size`` without the
compositor lookup: the same for every widget that the last layout placed on real
screens, while an answer streams, after it, after a resize and after a scroll. (A hidden
widget is in no layout: ``size`` says 0, ``laid_out_size`` its last size; nothing draws
it.)"""

from __future__ import annotations

from textual.errors import NoWidget

from tests.app.app_support import gen
from tui.app.widgets.conversation import TailText
from tui.app.widgets.sizes import laid_out_size

ONE = '[engines.s1]\nkind = "synthetic"\noptions = { tokens_per_s = 400 }\n'


def mismatches(app) -> list[str]:  # type: ignore[no-untyped-def]
    out = []
    for widget in app.screen.walk_children(with_self=True):
        try:
            app.screen.find_widget(widget)
        except NoWidget:
            continue  # hidden: placed by no layout
        if laid_out_size(widget) != widget.size:
            out.append(f"{widget!r}: {laid_out_size(widget)} != {widget.size}")
    return out


async def test_the_laid_out_size_is_the_widgets_size(build_app, make_config, wait_for) -> None:  # type: ignore[no-untyped-def]
    app = build_app(make_config('default_engine = "s1"\n' + gen(300) + ONE), telemetry=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert not mismatches(app)
        await app.screen.submit_text("Tell me a story about a lighthouse keeper and the sea.")
        await wait_for(pilot, lambda: len(app.screen.query_one(TailText).lines) > 5, 60)
        assert not mismatches(app)  # mid-stream: the tail box a pane high
        await wait_for(pilot, lambda: not app.screen.busy, 60)
        await pilot.pause()
        assert not mismatches(app)
        checked = len(list(app.screen.walk_children(with_self=True)))
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        assert not mismatches(app)
        app.screen.query_one("#conv-A").scroll_home(animate=False)  # a scroll, no layout
        await pilot.pause()
        assert not mismatches(app)
        await pilot.press("ctrl+o")  # A/B: two panes
        await pilot.pause()
        assert not mismatches(app)
    assert checked > 20
