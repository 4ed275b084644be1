"""The in-process vLLM engine (AsyncLLM), run inside the vLLM venv (it has vLLM; we don't)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.support import real_servers as servers

SCRIPT = Path(__file__).resolve().parents[1] / "support" / "vllm_inprocess_check.py"
pytestmark = [pytest.mark.engine, pytest.mark.vllm, pytest.mark.timeout(900)]


def test_in_process_vllm_streams_with_exact_counts_and_truth(tmp_path) -> None:
    if os.environ.get("INFERTOP_SKIP_VLLM") == "1":
        servers.unavailable("vLLM in-process", "INFERTOP_SKIP_VLLM=1")
    py, model = servers.vllm_python(), servers.vllm_model_dir()
    if not py.is_file() or not (model / "config.json").is_file():
        servers.unavailable("vLLM in-process", "run scripts/setup-test-servers.sh")
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    env["PYTHONPATH"] = str(SCRIPT.parents[2])  # tui from this tree: the vLLM venv lacks it
    out = subprocess.run(
        [str(py), str(SCRIPT), str(model)],
        capture_output=True,
        text=True,
        timeout=500,
        env=env,
        cwd=tmp_path,
    )
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
    assert out.returncode == 0 and lines, out.stderr[-3000:]
    res = json.loads(lines[-1][len("RESULT ") :])
    m, truth = res["metrics"], res["truth"]
    assert res["load_ms"] > 1000  # a real model load
    # it ran in infertop's worker process, so a crash in vLLM's code cannot end infertop
    assert res["worker_pid"] not in (None, res["own_pid"])
    assert m["output_tokens"] == 16 and m["output_tokens_source"] == "usage"
    assert all(k is not None and k >= 1 for k in res["chunk_tokens"])
    assert sum(res["chunk_tokens"]) == 16 and not m["itl_token_estimated"]
    assert truth is not None and truth["source"] == "vllm request stats"
    assert truth["output_tokens"] == 16 and truth["prompt_tokens"] == m["prompt_tokens"]
    assert 0 < truth["prompt_ms"] <= m["ttft_ms"]
    assert 0.7 < m["decode_tps_vs_engine"] < 1.3
    assert res["cancel_end"] == "Finished" and res["cancel_reason"] == "cancelled"
    assert res["cancel_chunks"] < 50
