"""Auto-detection from a URL (real llama-server and vLLM are in their own test files)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tui.engines.base import EngineError
from tui.engines.registry import create_engine
from tui.engines.servers.detect import detect_server, spec_from_url

ROOT = Path(__file__).resolve().parents[2]


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


def _cli(args: list[str], tmp_path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, INFERTOP_CONFIG="", XDG_CONFIG_HOME=str(tmp_path))
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-m", "tui", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )


def test_doctor_url_says_what_it_found(ollama_emu, tmp_path) -> None:
    url, _ = ollama_emu
    out = _cli(["doctor", "--no-load", "--url", url], tmp_path)
    line = next(ln for ln in out.stdout.splitlines() if "server" in ln and url in ln)
    assert line.startswith("[ok]") and "ollama at" in line and "smollm2:135m" in line


def test_doctor_url_with_nothing_there(closed_port_url: str, tmp_path) -> None:
    out = _cli(["doctor", "--no-load", "--url", closed_port_url], tmp_path)
    line = next(ln for ln in out.stdout.splitlines() if closed_port_url in ln)
    assert line.startswith("[--]") and "connection refused" in line


def test_run_url_without_config(pace: str, tmp_path) -> None:
    out = _cli(
        ["run", "--url", pace, "--prompt", "one two", "--max-tokens", "5", "--json"], tmp_path
    )
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout)
    assert res["kind"] == "openai" and res["model"] == "pace"
    assert res["output_tokens"] == 5 and res["text"] == "tok0 tok1 tok2 tok3 tok4 "
    assert res["engine_truth"] is None  # a generic server reports none; nothing is invented


def test_run_url_ollama_reports_engine_truth(ollama_emu, tmp_path) -> None:
    url, _ = ollama_emu
    out = _cli(
        [
            "run",
            "--url",
            url,
            "--prompt",
            "Name a fruit.",
            "--max-tokens",
            "6",
            "--temperature",
            "0",
            "--json",
        ],
        tmp_path,
    )
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout)
    assert res["kind"] == "ollama" and res["model"] == "smollm2:135m"
    truth = res["engine_truth"]
    assert truth["source"] == "ollama durations" and truth["output_tokens"] == res["output_tokens"]
    assert res["vs_engine"]["decode_tps_ours_over_engine"] > 0
