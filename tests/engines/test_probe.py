"""The engine probe: import, load and one token in a child process; its death a finding."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tui.engines.inprocess import probe
from tui.engines.inprocess.probe import ProbeResult, read_probe, run_probe, system_info_features

ROOT = Path(__file__).resolve().parents[2]


def child_env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT))


def test_a_child_killed_by_sigill_is_reported_with_the_stage_it_reached() -> None:
    """A real child that dies of SIGILL after importing (as a bad build does)."""
    code = (
        "import json, os, signal\n"
        "print(json.dumps({'stage': 'import', 'system_info': 'CPU : AVX2 = 1 | AMX_INT8 = 1'}))\n"
        "print(json.dumps({'stage': 'load', 'load_ms': 12.5}), flush=True)\n"
        "os.write(2, b'ggml_backend_amx_mul_mat\\n')\n"
        "os.kill(os.getpid(), signal.SIGILL)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True)
    result = read_probe(done.returncode, done.stdout, done.stderr)
    assert not result.ok and result.signal == "SIGILL"
    assert result.error == (
        "died of SIGILL (Illegal instruction) while generating; "
        "last words: ggml_backend_amx_mul_mat"
    )
    assert result.system_info == "CPU : AVX2 = 1 | AMX_INT8 = 1"
    assert "rebuild" in probe.advice(result)


def test_exit_status_and_load_errors_are_read() -> None:
    r = read_probe(1, b'{"stage": "import"}\n{"stage": "error", "message": "bad file"}\n', b"")
    assert not r.ok and r.error == "failed while loading the model: bad file"
    r = read_probe(3, b"", b"Traceback...\nImportError: libgomp.so.1\n")
    assert r.error == "exited with status 3 while importing llama.cpp; last words: " + (
        "ImportError: libgomp.so.1"
    )


def test_system_info_features() -> None:
    info = "CPU : SSE3 = 1 | AVX2 = 1 | AVX512 = 1 | AMX_INT8 = 0 | OPENMP = 1 |"
    assert system_info_features(info) == {
        "SSE3": True,
        "AVX2": True,
        "AVX512": True,
        "AMX_INT8": False,
        "OPENMP": True,
    }


def test_failure_message_names_signal_cpu_and_what_to_do(monkeypatch, capsys) -> None:
    dead = ProbeResult(
        False,
        {"import": {"stage": "import", "system_info": "CPU : AVX2 = 1"}},
        signal="SIGILL",
        error="died of SIGILL (Illegal instruction) while generating",
    )
    monkeypatch.setattr(probe, "run_probe", lambda model=None, build="tuned": dead)
    assert probe.main([]) == 1
    err = capsys.readouterr().err
    assert "engine probe FAILED: llama.cpp built for this CPU died of SIGILL" in err
    assert "CPU:" in err and "llama.cpp build: CPU : AVX2 = 1" in err
    assert "What to do:" in err and "setup.sh" in err


def test_setup_runs_the_probe_before_saying_ready() -> None:
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    probe_at = setup.index(".venv/bin/python -m tui.engines.inprocess.probe")
    assert probe_at < setup.index('echo "$WANT" > "$STAMP"') < setup.index('say "ready')
    assert "exit 1" in setup[probe_at : setup.index('echo "$WANT" > "$STAMP"')]


@pytest.mark.engine
def test_probe_on_the_default_model(model_path: Path) -> None:
    result = run_probe()
    assert result.ok, result.error
    assert result.token_ms is not None and 0 < result.token_ms < 60_000
    assert result.describe().startswith("ok, 1 token in ")
    features = system_info_features(result.system_info or "")
    assert features, result.system_info
    assert not features.get("AMX_INT8", False)  # the build has no AMX path


@pytest.mark.engine
def test_probe_command_fails_cleanly_on_a_missing_model(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tui.engines.inprocess.probe",
            "--model",
            str(tmp_path / "none.gguf"),
        ],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=120,
    )
    assert done.returncode == 1
    assert "engine probe FAILED" in done.stderr and "model file not found" in done.stderr
    assert "Traceback" not in done.stderr


def test_read_probe_ok() -> None:
    lines = [
        {"stage": "import"},
        {"stage": "load", "load_ms": 3.0},
        {"stage": "token", "token_ms": 7.0},
    ]
    out = "\n".join(json.dumps(x) for x in lines).encode()
    r = read_probe(0, out, b"")
    assert r.ok and r.describe() == "ok, 1 token in 7 ms (model load 3 ms)"
