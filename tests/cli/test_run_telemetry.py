"""``infertop run --telemetry SOURCE`` and ``infertop --telemetry SOURCE``: the hardware
line and the "hardware" JSON object, over a real SSH link (a real sshd on loopback, the
real agent), from config's ``telemetry``, and bad sources refused in one line."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.support.sshd_server import BARE_PATH, HOST_ALIAS, VENV_BIN, Sshd

pytestmark = pytest.mark.e2e

SYNTH = (
    'default_engine = "s"\n[telemetry]\ninterval_s = 0.2\n'
    '[engines.s]\nkind = "synthetic"\noptions = { tokens_per_s = 40 }\n'
)


def _run(cmd, env, *args):  # type: ignore[no-untyped-def]
    return subprocess.run([*cmd, *args], env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture
def remote(tmp_path, cli_env):  # type: ignore[no-untyped-def]
    """A real sshd; the environment's PATH finds our `ssh` (with its config) first."""
    server = Sshd(tmp_path / "sshd", f"{VENV_BIN}:{BARE_PATH}")
    server.start()
    env = dict(cli_env, PATH=f"{server.client()}:{cli_env['PATH']}")
    yield env
    server.stop()


def test_run_prints_the_remote_hardware_line_and_json(infertop_cmd, remote, tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text(SYNTH)
    src = f"ssh://{HOST_ALIAS}"
    args = ("--config", str(cfg), "run", "--prompt", "hi", "--max-tokens", "40")
    proc = _run(infertop_cmd, remote, *args, "--telemetry", src)
    assert proc.returncode == 0, proc.stderr
    *_, last, energy = proc.stdout.strip().splitlines()
    assert last.startswith(f"hardware ({HOST_ALIAS} via ssh, "), last
    assert "CPU mean" in last and "RAM" in last and "0 samples" not in last
    assert energy.startswith("energy")  # this loopback host has no GPU or readable RAPL
    proc = _run(infertop_cmd, remote, *args, "--telemetry", src, "--json")
    assert proc.returncode == 0, proc.stderr
    hw = json.loads(proc.stdout)["hardware"]
    assert hw["source"] == f"{HOST_ALIAS} via ssh" and hw["samples"] >= 2
    assert hw["cpu_percent_peak"] is not None and hw["ram_total_bytes"] > 0
    assert hw["gpu_status"] in ("ok", "absent")
    # the engine's own `telemetry` in config is used when --telemetry is not given
    cfg.write_text(SYNTH + f'telemetry = "{src}"\n')
    proc = _run(infertop_cmd, remote, *args, "--json")
    assert json.loads(proc.stdout)["hardware"]["source"] == f"{HOST_ALIAS} via ssh"


def test_run_without_a_source_has_null_hardware(infertop_cmd, cli_env, tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text(SYNTH)
    proc = _run(
        infertop_cmd, cli_env, "--config", str(cfg), "run", "--prompt", "hi", "--max-tokens",
        "3", "--json",
    )  # fmt: skip
    assert proc.returncode == 0 and json.loads(proc.stdout)["hardware"] is None


@pytest.mark.parametrize("where", ["run", "ui"])
def test_a_bad_source_is_one_line(infertop_cmd, cli_env, tmp_path, where):
    cfg = tmp_path / "c.toml"
    cfg.write_text(SYNTH)
    if where == "run":
        args = ["--config", str(cfg), "run", "--prompt", "hi", "--telemetry", "gpu-box"]
    else:
        args = ["--config", str(cfg), "--telemetry", "ssh://-oProxyCommand=x"]
    proc = _run(infertop_cmd, cli_env, *args)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--telemetry" in lines[0] and "expected" in lines[0], lines


def test_fleet_takes_url_endpoints_hardware_over_ssh(infertop_cmd, remote, tmp_path):
    """``infertop fleet --url U --telemetry ssh://HOST --once --json``: the row carries the
    remote host's CPU and RAM from the real agent over a real SSH link (and its GPUs: none
    on this machine, so an empty list, not null)."""
    from tests.support import fleet_fixture

    server = fleet_fixture.FixtureFleet([fleet_fixture.Profile("vllm", 0)]).start()
    try:
        proc = _run(
            infertop_cmd, remote, "fleet", "--url", server.urls[0], "--telemetry",
            f"ssh://{HOST_ALIAS}", "--once", "--json", "--gap", "0.3",
        )  # fmt: skip
    finally:
        server.stop()
    assert proc.returncode == 0, proc.stderr
    (row,) = json.loads(proc.stdout)["endpoints"]
    assert row["up"] and row["hardware"] == f"{HOST_ALIAS} via ssh", row
    assert row["hardware_error"] is None and row["host_cpu_pct"] is not None
    assert 0 < row["host_mem_pct"] < 100
    assert row["gpus"] == [] or all(g["mem_total_mib"] > 0 for g in row["gpus"])
