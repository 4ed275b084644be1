"""Alert rules: parsed strictly, every mistake a one-line error naming the file, the
rule and the key; a good file gives the rules it says."""

from __future__ import annotations

import pytest

from tui.alerts.rules import AlertingSettings, RuleError, load_rules_file, parse_rules

GOOD = """
[alerting]
webhook = "http://127.0.0.1:9/hook"
log = "/tmp/alerts.jsonl"
bell = true

[[alerts]]
name = "slow-first-token"
metric = "ttft"
above = 2000
resolve_below = 1500
window_s = 30
cooldown_s = 120
min_samples = 3

[[alerts]]
name = "slow decode"
metric = "decode_tps"
below = 20
resolve_above = 25

[[alerts]]
name = "queue"
metric = "requests_waiting"
stat = "max"
above = 4
"""


def test_a_good_file(tmp_path) -> None:
    f = tmp_path / "alerts.toml"
    f.write_text(GOOD)
    rules, settings = load_rules_file(f)
    assert [r.name for r in rules] == ["slow-first-token", "slow decode", "queue"]
    ttft, decode, queue = rules
    assert (ttft.stat, ttft.direction, ttft.threshold, ttft.resolve) == ("p95", "above", 2000, 1500)
    assert (ttft.window_s, ttft.cooldown_s, ttft.min_samples) == (30, 120, 3)
    assert (decode.stat, decode.direction, decode.threshold, decode.resolve) == (
        "p50",
        "below",
        20,
        25,
    )
    assert (queue.stat, queue.resolve, queue.window_s) == ("max", 4, 60)
    assert settings == AlertingSettings(
        "http://127.0.0.1:9/hook", 5.0, 2, "/tmp/alerts.jsonl", True
    )
    assert decode.crossed(19.9) and not decode.crossed(20) and decode.recovered(25.1)


BAD = [
    ({"metric": "ttft", "above": 1}, "rule (alerts[1]): key 'name': missing"),
    (
        {"name": "a", "metric": "tfft", "above": 1},
        "rule 'a' (alerts[1]): key 'metric': must be one of",
    ),
    ({"name": "a", "metric": "ttft"}, "key 'above': set exactly one of"),
    ({"name": "a", "metric": "ttft", "above": 1, "below": 2}, "key 'above': set exactly one of"),
    ({"name": "a", "metric": "ttft", "above": "2s"}, "key 'above': must be a finite number"),
    (
        {"name": "a", "metric": "ttft", "above": float("nan")},
        "key 'above': must be a finite number",
    ),
    (
        {"name": "a", "metric": "ttft", "above": 1, "resolve_below": 2},
        "key 'resolve_below': must be at most",
    ),
    (
        {"name": "a", "metric": "ttft", "below": 5, "resolve_above": 2},
        "key 'resolve_above': must be at least",
    ),
    (
        {"name": "a", "metric": "ttft", "above": 1, "resolve_above": 2},
        "key 'resolve_above': goes with 'below'",
    ),
    ({"name": "a", "metric": "ttft", "above": 1, "window_s": 0}, "key 'window_s': must be > 0"),
    ({"name": "a", "metric": "ttft", "above": 1, "stat": "p42"}, "key 'stat': must be one of"),
    ({"name": "a", "metric": "ttft", "above": 1, "min_samples": 0}, "key 'min_samples'"),
    ({"name": "a", "metric": "ttft", "above": 1, "thresold": 3}, "key 'thresold': unknown key"),
    (
        {"name": "a", "metric": "gpu_temp", "above": 80, "upstream": "http://x"},
        "key 'upstream': applies to",
    ),
    ({"name": "a\x1b[2J", "metric": "ttft", "above": 1}, "key 'name': at most 64 printable"),
    ("not a table", "(alerts[1]): must be a table"),
]


@pytest.mark.parametrize(("table", "message"), BAD)
def test_each_mistake_is_one_line_naming_file_rule_and_key(table, message) -> None:
    with pytest.raises(RuleError) as e:
        parse_rules([table], "rules.toml")
    text = str(e.value)
    assert text.startswith("rules.toml: ") and message in text and "\n" not in text


def test_file_level_mistakes(tmp_path) -> None:
    f = tmp_path / "a.toml"
    for body, message in [
        ("[[alerts]\nname=1", "invalid TOML"),
        (
            "[alerting]\nwebhook = 'ftp://x'\n[[alerts]]\nname='a'\nmetric='ttft'\nabove=1",
            "alerting.webhook",
        ),
        (
            "[[alerts]]\nname='a'\nmetric='ttft'\nabove=1\n[[alerts]]\nname='a'\nmetric='itl'\nabove=1",
            "rule 'a' (alerts[2]): key 'name': another rule",
        ),
        ("[alertz]\nx=1", "key 'alertz': unknown key"),
        ("", "no [[alerts]] rule"),
        ("alerts = 3", "must be an array of tables"),
    ]:
        f.write_text(body)
        with pytest.raises(RuleError) as e:
            load_rules_file(f)
        assert str(e.value).startswith(str(f)) and message in str(e.value), str(e.value)
        assert "\n" not in str(e.value)
    with pytest.raises(RuleError, match="cannot read"):
        load_rules_file(tmp_path / "missing.toml")
