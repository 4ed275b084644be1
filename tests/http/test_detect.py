"""Auto-detection from a URL (real llama-server and vLLM are in their own test files)."""

from __future__ import annotations

import pytest

from tui.engines.base import EngineError
from tui.engines.detect import detect_server, spec_from_url
from tui.engines.registry import create_engine


def test_pace_server_is_generic_openai(pace: str) -> None:
    d = detect_server(pace)
    assert d.kind == "openai" and d.models == ["pace"]
    assert "openai at" in d.describe() and "pace" in d.describe()


def test_ollama_emulator_is_ollama(ollama_emu) -> None:
    url, _ = ollama_emu
    d = detect_server(url + "/")
    assert d.kind == "ollama" and d.models == ["smollm2:135m"] and d.version
    spec = spec_from_url(url)
    assert spec.kind == "ollama" and spec.model == "smollm2:135m" and spec.url == url


def test_spec_from_url_builds_a_working_engine(pace: str) -> None:
    spec = spec_from_url(pace + "/v1/")
    assert spec.kind == "openai" and spec.url == pace and spec.model == "pace"
    assert type(create_engine(spec)).__name__ == "OpenAICompatEngine"


def test_explicit_kind_skips_probing(closed_port_url: str) -> None:
    spec = spec_from_url(closed_port_url, model="x", kind="vllm")
    assert spec.kind == "vllm" and spec.model == "x"
    with pytest.raises(EngineError, match="unknown engine kind 'nope'"):
        spec_from_url(closed_port_url, kind="nope")


def test_nothing_listening(closed_port_url: str) -> None:
    with pytest.raises(EngineError, match="connection refused"):
        detect_server(closed_port_url, timeout=2)


def test_a_web_page_is_not_an_llm_server(faults: str) -> None:
    with pytest.raises(EngineError, match="not an LLM server infertop recognises"):
        detect_server(faults + "/html", timeout=2)


def test_not_a_url() -> None:
    with pytest.raises(EngineError, match="not an http"):
        detect_server("ftp://example.com")
