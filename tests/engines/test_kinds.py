"""The engine-kind registry (tui/engines/kinds.py): one descriptor per kind, true to the
classes that implement them, and the places that treat kinds alike asking it."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import pytest

from tui.config import ConfigError, parse_config
from tui.engines.base import EngineError, EngineSpec
from tui.engines.http.http_engine import HttpStreamEngine
from tui.engines.kinds import (
    EngineKind,
    engine_class,
    engine_kind,
    find_kind,
    kind_names,
    kinds,
    register,
    unregister,
)
from tui.engines.registry import runs_in_worker

TOML = Path("test.toml")


@pytest.mark.parametrize("kind", [k.name for k in kinds()])
def test_each_kind_names_the_class_that_implements_it(kind):
    cls = engine_class(kind)
    assert cls.kind == kind
    desc = engine_kind(kind)
    # an HTTP kind is a client of a server; no in-process kind is
    assert issubclass(cls, HttpStreamEngine) == desc.http
    assert not (desc.http and desc.in_process)
    assert not desc.isolated_by_default or desc.in_process
    assert not (desc.metrics or desc.recognised) or desc.http


def test_the_facts_the_old_lists_held():
    """The kind lists that were typed in several modules, now read from the registry."""
    assert kind_names(lambda k: k.http) == ("anthropic", "llama-server", "ollama", "openai", "vllm")
    llama = ("llamacpp", "llamacpp-prebuilt")  # the two builds (tui/engines/inprocess/llama_builds)
    assert kind_names(lambda k: k.in_process) == (*llama, "synthetic", "vllm-inprocess")
    assert kind_names(lambda k: k.isolated_by_default) == (*llama, "vllm-inprocess")
    assert kind_names(lambda k: k.recognised) == ("llama-server", "ollama", "vllm")
    assert kind_names(lambda k: k.metrics) == ("llama-server", "vllm")
    assert kind_names(lambda k: k.n_ctx_from_spec) == llama
    assert kind_names(lambda k: bool(k.serial)) == llama
    assert kind_names(lambda k: bool(k.cold_restart)) == (*llama, "vllm-inprocess")


def test_a_descriptor_cannot_be_changed_behind_the_registry():
    desc = engine_kind("openai")
    with pytest.raises(dataclasses.FrozenInstanceError):
        desc.http = False  # type: ignore[misc]
    with pytest.raises(TypeError):
        desc.options["new"] = (str,)  # type: ignore[index]


def test_an_unknown_kind_is_an_error_naming_the_known_ones():
    assert find_kind("nope") is None
    with pytest.raises(
        EngineError, match=r"unknown engine kind 'nope' \(known kinds: anthropic, llama"
    ):
        engine_kind("nope")
    with pytest.raises(EngineError, match="unknown engine kind 'nope'"):
        engine_class("nope")


def test_register_by_name_then_by_descriptor_and_config_accepts_only_its_options():
    try:
        register(
            "extra", "tui.engines.inprocess.synthetic:SyntheticEngine", "a test kind", {"n": (int,)}
        )
        assert engine_kind("extra") == EngineKind(
            "extra", "tui.engines.inprocess.synthetic:SyntheticEngine", "a test kind", {"n": (int,)}
        )
        assert "extra" in kind_names()
        doc = 'default_engine = "e"\n[engines.e]\nkind = "extra"\noptions = {n = 3}\n'
        assert parse_config(doc, TOML).engines["e"].options == {"n": 3}
        with pytest.raises(ConfigError, match="unknown option for kind 'extra'.*accepts: n"):
            parse_config(doc.replace("n = 3", "m = 3"), TOML)
        # a descriptor replaces the kind whole: now in-process, in a worker by default
        register(
            EngineKind(
                "extra",
                "tui.engines.inprocess.synthetic:SyntheticEngine",
                options={"isolate": (bool,)},
                in_process=True,
                isolated_by_default=True,
            )
        )
        assert runs_in_worker(EngineSpec(name="e", kind="extra"))
        assert not runs_in_worker(EngineSpec(name="e", kind="extra", options={"isolate": False}))
    finally:
        unregister("extra")
    assert find_kind("extra") is None
    with pytest.raises(ConfigError, match="unknown kind 'extra'"):
        parse_config('default_engine = "e"\n[engines.e]\nkind = "extra"\n', TOML)


def test_proxy_kind_choices_are_the_http_kinds_registered_when_its_parser_is_built():
    from tui.cli import proxy

    try:
        register(
            EngineKind("extra-http", "tui.engines.http.openai_compat:OpenAICompatEngine", http=True)
        )
        p = argparse.ArgumentParser()
        proxy.add_arguments(p)
        args = p.parse_args(["--upstream", "http://127.0.0.1:1", "--kind", "extra-http"])
        assert args.kind == "extra-http"
        with pytest.raises(SystemExit):
            p.parse_args(["--upstream", "http://127.0.0.1:1", "--kind", "llamacpp"])
    finally:
        unregister("extra-http")
