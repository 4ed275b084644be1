"""The alert engine on a clock the test sets: a rule fires once when its window's value
crosses the threshold and resolves once when it is back past the second level; a value
inside the band changes nothing; cooldown, min_samples, error rate, floors, gauges; the
events' JSON, the JSONL log (private), the exposition; a webhook that hangs or fails
holds up nothing."""

from __future__ import annotations

import json
import os
import stat
import threading
import time
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.support.made_outcomes import metrics, outcome
from tui.alerts.engine import AlertEngine
from tui.alerts.notify import Notifier, Webhook
from tui.alerts.rules import AlertingSettings, parse_rules

T0 = 1_000_000.0


def _rules(**kw):
    table = {"name": "slow", "metric": "ttft", "above": 1000, "resolve_below": 600, "window_s": 10}
    table.update(kw)
    return parse_rules([table], "t.toml")


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def _ended(n: int, at: float, ttft_ms: float, **kw):
    return replace(outcome(n, **kw), metrics=metrics(ttft_ms=ttft_ms), t0_wall=at - 1.0)


def _engine(rules, clock):
    events = []
    return AlertEngine(rules, events.append, upstream="http://up:8080", clock=clock), events


def test_fires_once_and_resolves_once_with_hysteresis() -> None:
    clock = Clock()
    eng, events = _engine(_rules(min_samples=4), clock)
    eng.publish(_ended(1, T0, 400))
    eng.evaluate()
    # slow requests: fires once (from the fourth value on), naming the slow ones, not the fast one
    for n, t in enumerate((1500, 1700, 1600), 2):
        clock.now += 1
        eng.publish(_ended(n, clock.now, t))
        eng.evaluate()
    assert [e.kind for e in events] == ["firing"]
    assert events[0].request_ids == ("r2", "r3", "r4") and events[0].upstream == "http://up:8080"
    assert events[0].value > 1000 and eng.status["slow"].state == "firing"
    # the slow ones leave the window; values inside the band (600..1000) resolve nothing
    clock.now += 11
    for n in range(5, 9):
        eng.publish(_ended(n, clock.now, 800))
        eng.evaluate()
    assert [e.kind for e in events] == ["firing"]
    # below the second level: resolves, once
    clock.now += 11
    for n in range(9, 12):
        eng.publish(_ended(n, clock.now, 300))
        eng.evaluate()
    assert [e.kind for e in events] == ["firing", "resolved"]
    assert eng.status["slow"].fired == 1 and eng.status["slow"].resolved == 1


def test_a_value_inside_the_band_never_fires() -> None:
    clock = Clock()
    eng, events = _engine(_rules(), clock)
    for n in range(50):
        clock.now += 0.5
        eng.publish(_ended(n, clock.now, 600 + (n % 5) * 100))  # 600..1000, never above
        eng.evaluate()
    assert events == [] and eng.status["slow"].value is not None


def test_cooldown_and_min_samples() -> None:
    clock = Clock()
    eng, events = _engine(_rules(min_samples=2, cooldown_s=30), clock)
    eng.publish(_ended(1, clock.now, 5000))
    eng.evaluate()
    assert events == []  # one sample of two
    eng.publish(_ended(2, clock.now, 5000))
    eng.evaluate()
    assert [e.kind for e in events] == ["firing"]
    clock.now += 11  # the window empties: resolved (nothing says it is still slow)
    eng.evaluate()
    assert [e.kind for e in events] == ["firing", "resolved"] and events[1].value is None
    clock.now += 5
    eng.publish(_ended(3, clock.now, 5000))
    eng.publish(_ended(4, clock.now, 5000))
    eng.evaluate()
    assert len(events) == 2  # within the cooldown
    clock.now += 26
    eng.publish(_ended(5, clock.now, 5000))
    eng.publish(_ended(6, clock.now, 5000))
    eng.evaluate()
    assert [e.kind for e in events] == ["firing", "resolved", "firing"]


def test_error_rate_floor_upstream_and_gauges() -> None:
    clock = Clock()
    rules = parse_rules(
        [
            {"name": "errors", "metric": "error_rate", "above": 0.5, "window_s": 60},
            {"name": "slow decode", "metric": "decode_tps", "below": 20, "resolve_above": 30},
            {"name": "other upstream", "metric": "ttft", "above": 1, "upstream": "http://other:1"},
            {"name": "queue", "metric": "requests_waiting", "above": 3, "stat": "max"},
            {"name": "hot", "metric": "gpu_temp", "above": 85, "window_s": 5},
        ],
        "t.toml",
    )
    eng, events = _engine(rules, clock)
    eng.publish(replace(outcome(1), metrics=metrics(decode_tps=10.0)))
    eng.publish(replace(outcome(2), state="failed", error_kind="http"))
    eng.publish(replace(outcome(3), state="failed", error_kind="connect"))
    eng.publish(replace(outcome(4), state="cancelled"))  # not judged
    for o in list(eng._outcomes):
        eng._outcomes.remove(o)
        eng.publish(replace(o, t0_wall=clock.now - 1.0))
    eng.gauge("requests_waiting", 5)

    class Gpu:
        temp_c, mem_used, mem_total = 90.0, 1, 2

    class Sample:
        class gpu:  # noqa: N801 - a stand-in for NvmlSample
            gpus = [Gpu()]

    eng.hardware(Sample())
    eng.evaluate()
    fired = {e.rule.name: e for e in events}
    assert set(fired) == {"errors", "slow decode", "queue", "hot"}
    assert fired["errors"].value == 2 / 3 and fired["errors"].request_ids == ("r2", "r3")
    assert fired["slow decode"].request_ids == ("r1",)
    text = eng.exposition()
    assert 'ALERTS{alertname="errors",alertstate="firing",metric="error_rate"} 1' in text
    assert 'infertop_alert_firing{alertname="other upstream"} 0' in text
    assert 'infertop_alert_value{alertname="queue"} 5.0' in text
    payload = fired["errors"].to_dict()
    assert json.loads(json.dumps(payload))["rule"] == "errors"
    assert {"rule", "value", "window_s", "threshold", "request_ids", "upstream"} <= set(payload)


def test_the_jsonl_log_is_private_and_the_line_is_said(tmp_path) -> None:
    lines = []
    log = tmp_path / "state" / "alerts.jsonl"
    notify = Notifier(AlertingSettings(log=str(log), bell=True), lambda t, b: lines.append((t, b)))
    clock = Clock()
    eng = AlertEngine(_rules(), notify, clock=clock)
    eng.publish(_ended(1, clock.now, 5000))
    eng.evaluate()
    assert len(lines) == 1 and lines[0][1] is True and "alert firing slow" in lines[0][0]
    rec = json.loads(log.read_text())
    assert rec["rule"] == "slow" and rec["state"] == "firing" and rec["request_ids"] == ["r1"]
    assert stat.S_IMODE(os.stat(log).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(log.parent).st_mode) == 0o700


class _Receiver:
    """A webhook receiver that hangs, fails or takes, as told."""

    def __init__(self, mode: str) -> None:
        self.got: list[dict] = []
        self.tries = 0
        receiver = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.tries += 1
                if mode == "hang":
                    time.sleep(3)
                code = 500 if mode == "500" else 204
                if code == 204:
                    receiver.got.append(json.loads(body))
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_webhook_that_hangs_or_fails_holds_up_nothing() -> None:
    for mode in ("hang", "500", "ok"):
        rx = _Receiver(mode)
        try:
            hook = Webhook(rx.url, timeout_s=0.3, retries=1)
            t0 = time.perf_counter()
            for i in range(150):  # more than its queue holds
                hook.put({"rule": "r", "n": i})
            assert time.perf_counter() - t0 < 0.1  # puts never wait on the network
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and hook.stats.sent + hook.stats.failed < 1:
                time.sleep(0.05)
            if mode == "ok":
                assert hook.stats.sent >= 1 and rx.got[0]["rule"] == "r"
            else:
                assert hook.stats.failed >= 1 and hook.stats.sent == 0
                assert rx.tries >= 2  # tried again
            assert hook.stats.dropped >= 50
        finally:
            rx.stop()
