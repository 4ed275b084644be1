"""The fleet screen: snapshots at 80×24 and 200×50 (fixed rows), sorting, a down
endpoint among live ones, and Enter → the chat on that endpoint (Pilot, against fixture
endpoints served over HTTP from this process)."""

from __future__ import annotations

import copy

import pytest
from textual.widgets import Static

from tests.app.app_support import SYNTH, gen
from tests.support import fleet_fixture as ff
from tests.support.prometheus_server import free_port
from tui.app.screens.chat import ChatScreen
from tui.app.screens.fleet import FleetScreen
from tui.app.widgets.conversation import Conversation
from tui.app.widgets.engine_bar import EngineBar
from tui.app.widgets.fleet_table import FleetTable
from tui.app.widgets.server_panel import ServerPanel
from tui.fleet.poller import Fleet, fleet_endpoints
from tui.fleet.rows import FleetSnapshot


class FixedFleet:
    """Always the same rows (the real code's numbers from fixture text at fixed times)."""

    def __init__(self) -> None:
        self.rows = ff.fixed_rows()
        self.refreshes = 0

    def refresh(self) -> FleetSnapshot:
        self.refreshes += 1
        return FleetSnapshot(rows=copy.deepcopy(self.rows), took_s=0.012, scrapes=len(self.rows))


@pytest.fixture(scope="module")
def endpoints():  # type: ignore[no-untyped-def]
    fx = ff.FixtureFleet([ff.Profile("vllm", i) for i in range(3)]).start()
    try:
        yield fx
    finally:
        fx.stop()


def _table(app) -> FleetTable:  # type: ignore[no-untyped-def]
    return app.screen.query_one(FleetTable)


def _names(app) -> list[str]:  # type: ignore[no-untyped-def]
    t = _table(app)
    return [t.cell_text(i, "name") for i in range(t.row_count)]


async def _shown(pilot, wait_for) -> None:  # type: ignore[no-untyped-def]
    app = pilot.app
    await wait_for(pilot, lambda: isinstance(app.screen, FleetScreen) and _table(app).row_count > 0)
    await pilot.pause(0.1)


def _snapshot_app(make_config, build_app):  # type: ignore[no-untyped-def]
    return build_app(
        make_config('default_engine = "synth"\n' + gen() + SYNTH),
        fleet=FixedFleet(),
        fleet_interval_s=2.0,
    )


def test_fleet_80x24(snap_compare, make_config, build_app, wait_for):
    app = _snapshot_app(make_config, build_app)
    assert snap_compare(app, terminal_size=(80, 24), run_before=lambda p: _shown(p, wait_for))


def test_fleet_200x50(snap_compare, make_config, build_app, wait_for):
    app = _snapshot_app(make_config, build_app)

    async def run(pilot) -> None:  # type: ignore[no-untyped-def]
        await _shown(pilot, wait_for)
        await pilot.press("down", "down")  # the detail line follows the highlighted row

    assert snap_compare(app, terminal_size=(200, 50), run_before=run)


async def test_sorting_by_keys_and_header(make_config, build_app, wait_for) -> None:
    app = _snapshot_app(make_config, build_app)
    async with app.run_test(size=(200, 50)) as pilot:
        await _shown(pilot, wait_for)
        screen = app.screen
        assert isinstance(screen, FleetScreen)
        assert _names(app) == sorted(_names(app), key=str.lower)  # by name at first
        while screen.sort_key != "gen_tps":
            await pilot.press("s")
        rows = {r.name: r for r in screen.rows}
        tps = [rows[n].gen_tps for n in _names(app)]
        known = [v for v in tps if v is not None]
        assert known == sorted(known, reverse=True) and tps[-1] is None  # largest first
        await pilot.press("r")
        tps = [rows[n].gen_tps for n in _names(app)]
        assert [v for v in tps if v is not None] == sorted(known) and tps[-1] is None
        assert "tok/s▲" in _table(app)._header
        # a click on a header sorts by that column
        x = sum(w + 2 for _, w in _table(app).columns[:2])
        await pilot.click(FleetTable, offset=(x + 2, 0))
        assert screen.sort_key == "kind"
        await pilot.press("S")
        assert screen.sort_key == "state"
        assert _names(app)[-1] == "gpu3-vllm0"  # the down one sorts after every up one
        await pilot.click(FleetTable, offset=(3, 1 + 7))  # a click on a row highlights it
        row = screen.highlighted_row()
        assert row is not None and row.name == "gpu3-vllm0"
        assert str(screen.query_one("#fleet-detail", Static).render()).startswith("gpu3-vllm0")


async def test_down_endpoint_among_live_ones(endpoints, make_config, build_app, wait_for) -> None:
    down = f"http://127.0.0.1:{free_port()}"
    fleet = Fleet(fleet_endpoints([*endpoints.urls, down], {}), timeout_s=1.0)
    app = build_app(
        make_config('default_engine = "synth"\n' + gen() + SYNTH), fleet=fleet, fleet_interval_s=0.2
    )
    try:
        async with app.run_test(size=(120, 30)) as pilot:
            await _shown(pilot, wait_for)
            screen = app.screen
            assert isinstance(screen, FleetScreen)
            await wait_for(pilot, lambda: len(screen.apply_ms) >= 3, 30)
            rows = {r.url: r for r in screen.rows}
            assert not rows[down].up and "connection refused" in rows[down].error
            assert all(rows[u].up and rows[u].gen_tps for u in endpoints.urls)
            scrapes = [e.scrapes for e in endpoints.endpoints]
            await wait_for(pilot, lambda: len(screen.apply_ms) >= 5, 30)
            assert all(e.scrapes > s for e, s in zip(endpoints.endpoints, scrapes))
            t = _table(app)
            state = [t.cell_text(i, "state") for i in range(t.row_count)]
            assert state.count("down") == 1 and state.count("up") == 3
            await pilot.press(*["down"] * _names(app).index(down.removeprefix("http://")))
            detail = str(screen.query_one("#fleet-detail", Static).render())
            assert "DOWN: connection refused" in detail
    finally:
        fleet.close()


async def test_enter_opens_the_chat_on_that_endpoint(
    endpoints, make_config, build_app, wait_for
) -> None:
    fleet = Fleet(fleet_endpoints(endpoints.urls, {}))
    cfg = make_config(
        'default_engine = "synth"\n' + gen(8) + SYNTH + "[telemetry]\ninterval_s = 0.2\n"
    )
    app = build_app(cfg, fleet=fleet, fleet_interval_s=0.5, telemetry=True)
    target = endpoints.urls[1].removeprefix("http://")
    try:
        async with app.run_test(size=(120, 36)) as pilot:
            await _shown(pilot, wait_for)
            assert app.chat.host("A").state == "idle"  # nothing loaded behind the fleet
            await pilot.press(*["down"] * _names(app).index(target), "enter")
            assert isinstance(app.screen, ChatScreen)
            assert app.chat.slot_engine["A"] == target
            spec = app.config.engines[target]
            assert (spec.kind, spec.url) == ("vllm", endpoints.urls[1])
            bar = app.chat.query_one(EngineBar)
            await wait_for(pilot, lambda: "ready" in bar.plain(), 30)
            assert await app.chat.submit_text("hello fleet")
            await wait_for(pilot, lambda: not app.chat.busy, 30)
            conv = app.chat.query_one("#conv-A", Conversation)
            assert "tok0 tok1" in conv.turns[-1].source
            await wait_for(pilot, lambda: app.core.last_metrics["A"] is not None, 10)
            m = app.core.last_metrics["A"]
            assert m is not None and m.ttft_ms is not None and m.output_tokens == 8
            panel = app.chat.query_one(ServerPanel)  # the server's own numbers beside ours
            await wait_for(pilot, lambda: "KV cache" in panel.text, 30)
            await pilot.press("f3")
            assert isinstance(app.screen, FleetScreen)
            before = len(app.screen.apply_ms)
            await wait_for(pilot, lambda: len(app.screen.apply_ms) > before, 30)
    finally:
        fleet.close()


async def test_f3_joins_each_engines_own_hardware(endpoints, make_config, build_app, wait_for):
    """F3 is built from config by the same builder as ``infertop fleet``: an engine whose
    config names a ``telemetry`` source shows that source's GPUs on its row (a DCGM
    exporter page written from its documented names, served over HTTP)."""
    from tests.support.exporter_fixtures import MetricsServer, dcgm_page

    dcgm = MetricsServer(dcgm_page()).start()
    url = endpoints.urls[0]
    cfg = make_config(
        'default_engine = "synth"\n'
        + gen(8)
        + SYNTH
        + f'[engines.box]\nkind = "vllm"\nurl = "{url}"\ntelemetry = "{dcgm.url}"\n'
        + "[fleet]\ninterval_s = 0.5\n"
    )
    app = build_app(cfg)
    try:
        async with app.run_test(size=(120, 36)) as pilot:
            await pilot.press("f3")
            await _shown(pilot, wait_for)
            screen = app.screen
            assert isinstance(screen, FleetScreen) and _names(app) == ["box"]
            detail = screen.query_one("#fleet-detail", Static)
            await wait_for(pilot, lambda: "2 GPUs on dcgm" in str(detail.render()), 30)
            assert "NVIDIA H100 80GB HBM3" in str(detail.render())
    finally:
        dcgm.stop()
