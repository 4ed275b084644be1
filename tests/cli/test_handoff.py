"""The front ends' OTLP and alert flags (tui/cli/handoff.py): every mistake one line,
export asked for without the SDK installed says how to get it, a malformed rules file
stops ``infertop proxy`` naming the rule, and config's ``[otel]`` / ``[[alerts]]`` are
checked at load."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from tui.cli.common import CLIError
from tui.cli.handoff import build_handoff
from tui.config import Config, ConfigError, load_config


def _args(**kw) -> argparse.Namespace:  # type: ignore[no-untyped-def]
    base = {"otlp": None, "trace_propagation": False, "capture_content": False, "alerts": None}
    return argparse.Namespace(**(base | kw))


def test_export_without_the_sdk_says_how_to_get_it(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http.trace_exporter", None)
    with pytest.raises(CLIError, match=r"pip install 'infertop\[otel\]'"):
        build_handoff(_args(otlp="http://127.0.0.1:4318"), Config(), note=print)


def test_flag_mistakes_are_one_line(monkeypatch) -> None:
    with pytest.raises(CLIError, match="--otlp 'ftp://x': an http"):
        build_handoff(_args(otlp="ftp://x"), Config(), note=print)
    with pytest.raises(CLIError, match="--capture-content goes with --otlp"):
        build_handoff(_args(capture_content=True), Config(), note=print)
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    h = build_handoff(
        _args(otlp="http://127.0.0.1:4318", trace_propagation=True), Config(), note=print
    )
    assert h.exporter is None and h.propagate and h.recording  # off, but propagation stands
    h.close()


def test_a_malformed_rules_file_stops_the_proxy_naming_the_rule(tmp_path, cli_env) -> None:
    rules = tmp_path / "alerts.toml"
    rules.write_text('[[alerts]]\nname = "slow"\nmetric = "ttft"\nabove = "2s"\n')
    r = subprocess.run(
        [sys.executable, "-m", "tui", "proxy", "--upstream", "http://127.0.0.1:9", "--kind",
         "openai", "--listen", "127.0.0.1:0", "--alerts", str(rules)],
        capture_output=True, text=True, env=cli_env, timeout=60,
    )  # fmt: skip
    assert r.returncode == 2
    (line,) = r.stderr.strip().splitlines()
    assert line == (
        f"infertop: error: {rules}: rule 'slow' (alerts[1]): key 'above': must be a finite "
        "number (got '2s')"
    )


def test_config_otel_and_alerts_are_checked_at_load(tmp_path) -> None:
    f = tmp_path / "c.toml"
    f.write_text('[otel]\nendpoint = "http://127.0.0.1:4318"\ntrace_propagation = true\n'
                 '[[alerts]]\nname = "q"\nmetric = "requests_waiting"\nabove = 4\n')  # fmt: skip
    cfg = load_config(f)
    assert cfg.otel.trace_propagation and cfg.alerts[0].metric == "requests_waiting"
    for body, message in [
        ('[otel]\nendpont = "x"\n', "key 'otel.endpont': unknown key"),
        ("[otel]\ntimeout_s = 0\n", "key 'otel.timeout_s': must be > 0"),
        ('[[alerts]]\nname = "x"\nmetric = "ttft"\n', "rule 'x' (alerts[1]): key 'above'"),
        ('[alerting]\nbell = "yes"\n', "key 'alerting.bell'"),
    ]:
        f.write_text(body)
        with pytest.raises(ConfigError) as e:
            load_config(f)
        assert str(f) in str(e.value) and message in str(e.value), str(e.value)
