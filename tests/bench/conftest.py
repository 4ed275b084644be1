"""Bench test fixtures: the pace engine registered as kind "pace"."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def pace_kind():
    from tests.bench import pace_engine
    from tui.engines.registry import register, unregister

    register("pace", "tests.bench.pace_engine:PaceEngine", "test pace engine", pace_engine.OPTIONS)
    yield
    unregister("pace")


@pytest.fixture
def pace_server_url():
    """The issue-3 pace server (OpenAI SSE, known timing) factory: url(**PaceConfig)."""
    from tests.support import pace_server

    stops = []

    def start(**kw) -> str:
        port, _server, stop = pace_server.start_in_thread(pace_server.PaceConfig(**kw))
        stops.append(stop)
        return f"http://127.0.0.1:{port}"

    yield start
    for stop in stops:
        stop()


@pytest.fixture
def one_thread_config(tmp_path) -> Path:
    """A config file whose default engine is the embedded model in process, as with no
    config, but on one thread: asked for every core of a small machine, llama.cpp's
    threads spin at barriers and it collapses (to a few tok/s) whenever anything else
    runs; on one thread it slows in proportion to the load."""
    path = tmp_path / "one-thread.toml"
    path.write_text(
        'default_engine = "local"\n'
        '[engines.local]\nkind = "llamacpp"\nmodel = "default"\nn_threads = 1\n'
    )
    return path
