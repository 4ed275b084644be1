"""``infertop run --telemetry URL`` prints J/token with its source, here from a DCGM
exporter fixture whose energy counter grows at a steady 300 W (DCGM needs an NVIDIA GPU:
the page is written from its documented field names)."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from tests.support.exporter_fixtures import MetricsServer, dcgm_page

WATTS = 300.0
CONFIG = (
    'default_engine = "s"\n[telemetry]\ninterval_s = 0.2\n'
    '[engines.s]\nkind = "synthetic"\noptions = { tokens_per_s = 20 }\n'
)


class SteadyDcgm(MetricsServer):
    """GPU 0's DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION grows at WATTS; GPU 1 is idle at 0 W."""

    started = time.monotonic()

    @property  # type: ignore[override]
    def page(self) -> str:
        mj = 5_000_000 + int((time.monotonic() - self.started) * WATTS * 1000)
        return dcgm_page(energy_mj=(mj, 1_000_000))

    @page.setter
    def page(self, value: str) -> None:
        pass


@pytest.fixture
def dcgm():  # type: ignore[no-untyped-def]
    server = SteadyDcgm("").start()
    yield server
    server.stop()


@pytest.mark.timing
def test_run_prints_j_per_token_from_the_counter(infertop_cmd, cli_env, tmp_path, dcgm):
    cfg = tmp_path / "c.toml"
    cfg.write_text(CONFIG)
    args = [
        *infertop_cmd,
        "--config",
        str(cfg),
        "run",
        "--prompt",
        "hi",
        "--max-tokens",
        "40",
        "--telemetry",
        dcgm.url,
    ]
    proc = subprocess.run(
        [*args, "--json"], env=cli_env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    energy = out["energy"]
    assert energy is not None and not energy["estimated"]
    by = {d["domain"]: d for d in energy["domains"]}
    busy = by["GPU0 NVIDIA H100 80GB HBM3"]
    assert busy["method"] == "counter"
    assert busy["source"] == "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"
    assert by["GPU1 NVIDIA H100 80GB HBM3"]["joules"] == 0.0
    # the window is the request's e2e (~2 s): 300 W × e2e ÷ output tokens, give or take
    # the exporter's answer time at the readings around each end of the window (each is
    # stamped when its answer is read, its counter taken when it was asked): a few ms on
    # an idle machine, up to a couple of hundred on a loaded one, so 25 %; the slips this
    # guards against (mJ for J, per request for per token, the wrong window) are far more
    e2e_s = out["e2e_ms"] / 1000
    assert energy["window_s"] == pytest.approx(e2e_s, rel=1e-6)
    want = WATTS * e2e_s / out["output_tokens"]
    assert energy["j_per_token"] == pytest.approx(want, rel=0.25)
    assert energy["tokens_per_j"] == pytest.approx(1 / energy["j_per_token"])
    text = subprocess.run(args, env=cli_env, capture_output=True, text=True, timeout=120)
    assert text.returncode == 0, text.stderr
    line = text.stdout.strip().splitlines()[-1]
    assert line.startswith("energy ") and "J/token" in line and "tokens/J" in line
    assert "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION" in line and "(estimate)" not in line
