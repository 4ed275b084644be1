"""The request ledger with real traffic: a real llama-server and a real vLLM, two keyed
clients (the official ``openai`` and ``anthropic`` SDKs), ``curl`` without a key,
infertop's own ``run`` and a short ``bench`` — the proxy (the real command, its own
process) restarted, and once killed with SIGKILL mid-request, between them.

Then ``infertop usage --by client,upstream --json`` must give, per client and server,
the requests that finished (each once; the one in flight at the SIGKILL is the only one
missing) and prompt/output token totals equal to the sums of the servers' own ``usage``
for them; ``PRAGMA integrity_check`` ok; and no key, prompt or answer text anywhere in
the database file, its WAL, ``/infertop/metrics`` or the proxy's log (their bytes are
searched).
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from tests.support.proxy_process import ProxyProcess, start_proxy_process

pytestmark = pytest.mark.engine

KEY_A = "sk-alice-LEDGER-SECRET-71"
KEY_B = "sk-bob-LEDGER-SECRET-72"
MAX_TOKENS = 10
Totals = dict[tuple[str, str], list[int]]  # (client, upstream) -> [requests, prompt, output]


def _prompt(tag: str) -> str:
    return f"Tell me about the zebra number {tag} in one line."


class Traffic:
    """The requests sent, and what the server said each used (its own ``usage``)."""

    def __init__(self, upstream: str, model: str) -> None:
        self.upstream, self.model = upstream, model
        self.expected: Totals = defaultdict(lambda: [0, 0, 0])
        self.texts: list[str] = []  # prompts and answers: none may reach the ledger

    def add(self, client: str, prompt: int, output: int) -> None:
        row = self.expected[(client, self.upstream)]
        row[0] += 1
        row[1] += prompt
        row[2] += output

    def openai_sdk(self, proxy: ProxyProcess, tag: str) -> None:
        prompt = _prompt(tag)
        client = openai.OpenAI(base_url=proxy.url + "/v1", api_key=KEY_A, max_retries=0)
        stream = client.chat.completions.create(
            model=self.model,
            messages=[{"role": "user", "content": prompt}],
            max_tokens=MAX_TOKENS,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
        )
        text, usage = "", None
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                text += chunk.choices[0].delta.content
            if chunk.usage is not None:
                usage = chunk.usage
        assert usage is not None
        self.texts += [prompt, text]
        self.add("alice", usage.prompt_tokens, usage.completion_tokens)

    def anthropic_sdk(
        self, proxy: ProxyProcess, tag: str, who: str, max_tokens: int = MAX_TOKENS
    ) -> None:
        prompt = _prompt(tag)
        client = anthropic.Anthropic(base_url=proxy.url, api_key=KEY_B, max_retries=0)
        with client.messages.stream(
            model=self.model,
            max_tokens=max_tokens,
            messages=[{"role": "user", "content": prompt}],
            extra_body={"temperature": 0},
        ) as stream:
            text = "".join(stream.text_stream)
            final = stream.get_final_message()
        u = final.usage
        prompt_n = u.input_tokens + (u.cache_read_input_tokens or 0)
        prompt_n += u.cache_creation_input_tokens or 0
        self.texts += [prompt, text]
        self.add(who, prompt_n, u.output_tokens)

    def curl(self, proxy: ProxyProcess, tag: str) -> None:
        prompt = _prompt(tag)
        body = json.dumps(
            {
                "model": self.model,
                "messages": [{"role": "user", "content": prompt}],
                "max_tokens": MAX_TOKENS,
                "temperature": 0,
                "stream": True,
                "stream_options": {"include_usage": True},
            }
        )
        out = subprocess.run(
            ["curl", "-sN", "-H", "Content-Type: application/json", "-d", body,
             proxy.url + "/v1/chat/completions"],
            capture_output=True, text=True, timeout=120, check=True,
        ).stdout  # fmt: skip
        objs = [json.loads(x[6:]) for x in out.splitlines() if x.startswith("data: {")]
        usage = [o["usage"] for o in objs if o.get("usage")][-1]
        text = "".join(
            (o["choices"][0]["delta"].get("content") or "") for o in objs if o.get("choices")
        )
        self.texts += [prompt, text]
        self.add("curl", usage["prompt_tokens"], usage["completion_tokens"])


def _usage(
    env: dict[str, str], ledger: Path, config: Path
) -> dict[tuple[str, str], dict[str, Any]]:
    r = subprocess.run(
        [sys.executable, "-m", "tui", "--config", str(config), "usage", "--ledger", str(ledger),
         "--since", "1d", "--by", "client,upstream", "--json"],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    return {(g["client"], g["upstream"]): g for g in json.loads(r.stdout)["groups"]}


def _own(
    env: dict[str, str], server: str, ledger: Path, config: Path, out: Path, t: Traffic
) -> None:
    """infertop's own: one `run` and a short `bench`, straight to the server."""
    base = [sys.executable, "-m", "tui", "--config", str(config)]
    prompt = _prompt("own-run")
    r = subprocess.run(
        [*base, "run", "--url", server, "--prompt", prompt, "--max-tokens", str(MAX_TOKENS),
         "--temperature", "0", "--json", "--ledger", str(ledger)],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["output_tokens_source"] == "usage", got
    t.texts += [prompt, got["text"]]
    t.add("infertop", got["prompt_tokens"], got["output_tokens"])
    r = subprocess.run(
        [*base, "bench", "--url", server, "--runs", "2", "--warmup", "0", "--max-tokens", "8",
         "--prompt-tokens", "16", "--concurrency", "1", "--energy", "off", "--out", str(out),
         "--ledger", str(ledger)],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    for e in json.loads((out / "report.json").read_text())["engines"]:
        for rec in e["records"]:
            m = rec["metrics"]
            assert m["output_tokens_source"] == "usage", m
            t.add("infertop", m["prompt_tokens"], m["output_tokens"])


def _rows(ledger: Path) -> int:
    if not ledger.exists():
        return 0
    con = sqlite3.connect(str(ledger), timeout=10)
    try:
        return int(con.execute("SELECT COUNT(*) FROM requests").fetchone()[0])
    except sqlite3.OperationalError:  # (no table yet)
        return 0
    finally:
        con.close()


def _one_server(
    env: dict[str, str], server: str, model: str, ledger: Path, config: Path, tmp: Path
) -> tuple[Traffic, list[bytes]]:
    t = Traffic(server, model)
    base = _rows(ledger)
    log = tmp / f"proxy-{server.rsplit(':', 1)[1]}.log"
    args = ("--config", str(config), "--ledger", str(ledger))
    metrics: list[bytes] = []
    # 1: both keyed clients; then a clean restart
    p = start_proxy_process(server, env, log, *args)
    t.openai_sdk(p, "a1")
    t.anthropic_sdk(p, "b1", "bob")
    metrics.append(httpx.get(p.url + "/infertop/metrics", timeout=10).content)
    assert p.stop() == 0
    # 2: curl and the openai SDK; then a long request cut by SIGKILL while it streams
    p = start_proxy_process(server, env, log, *args)
    t.curl(p, "c1")
    t.openai_sdk(p, "a2")
    metrics.append(httpx.get(p.url + "/infertop/metrics", timeout=10).content)
    # the four that ended are committed (the writer's thread does it within milliseconds of
    # each request's end; under a heavy load, later): then only the one in flight can be lost
    deadline = time.monotonic() + 30
    while _rows(ledger) < base + 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _rows(ledger) == base + 4
    cut: list[BaseException] = []
    first = threading.Event()

    def long_one() -> None:
        client = anthropic.Anthropic(base_url=p.url, api_key=KEY_B, max_retries=0)
        try:
            with client.messages.stream(
                model=model,
                max_tokens=400,
                messages=[{"role": "user", "content": _prompt("killed") + " Then count to 300."}],
            ) as stream:
                for _ in stream.text_stream:
                    first.set()
        except Exception as e:  # noqa: BLE001 - the proxy was killed under it
            cut.append(e)
        first.set()

    th = threading.Thread(target=long_one)
    th.start()
    assert first.wait(120)
    p.stop(kill=True)
    th.join(60)
    assert cut, "the request in flight at the SIGKILL should have been cut"
    # 3: back up; the anthropic SDK and curl again
    p = start_proxy_process(server, env, log, *args)
    t.anthropic_sdk(p, "b2", "bob")
    t.curl(p, "c2")
    metrics.append(httpx.get(p.url + "/infertop/metrics", timeout=10).content)
    assert p.stop() == 0
    _own(env, server, ledger, config, tmp / f"bench-{server.rsplit(':', 1)[1]}", t)
    return t, metrics


def test_usage_per_client_equals_the_servers_own_usage(
    llama_server, vllm_server, cli_env, tmp_path
) -> None:
    env = dict(cli_env)
    fp = subprocess.run(
        [sys.executable, "-m", "tui", "usage", "--fingerprint"],
        input=KEY_A, capture_output=True, text=True, env=env, timeout=60, check=True,
    ).stdout.strip()  # fmt: skip
    fp_b = subprocess.run(
        [sys.executable, "-m", "tui", "usage", "--fingerprint"],
        input=KEY_B, capture_output=True, text=True, env=env, timeout=60, check=True,
    ).stdout.strip()  # fmt: skip
    config = tmp_path / "config.toml"
    config.write_text(f'[clients]\n"{fp}" = "alice"\n')
    ledger = tmp_path / "ledger.sqlite3"
    expected: Totals = {}
    texts: list[str] = []
    metrics: list[bytes] = []
    for server, model in ((llama_server.url, "smollm2"), (vllm_server.url, "smollm2")):
        t, m = _one_server(env, server, model, ledger, config, tmp_path)
        for (who, up), row in t.expected.items():
            expected[(fp_b if who == "bob" else who, up)] = row
        texts += t.texts
        metrics += m
    got = _usage(env, ledger, config)
    assert set(got) == set(expected), (sorted(got), sorted(expected))
    for key, (n, prompt, output) in expected.items():
        g = got[key]
        assert (g["requests"], g["prompt_tokens"], g["output_tokens"]) == (n, prompt, output), key
        assert g["output_estimated"] == 0 and g["failed"] == 0
    con = sqlite3.connect(str(ledger))
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    rows = con.execute("SELECT COUNT(*) FROM requests").fetchone()[0]
    assert rows == sum(n for n, _p, _o in expected.values())  # none twice, none lost but one
    con.close()
    # the bytes: no key, no prompt, no answer — in the file, its WAL, the metrics, the logs
    blobs = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("ledger")}
    blobs |= {p.name: p.read_bytes() for p in tmp_path.glob("proxy-*.log")}
    blobs |= {f"metrics-{i}": m for i, m in enumerate(metrics)}
    needles = [KEY_A, KEY_B] + [x for x in texts if len(x.strip()) >= 12]
    assert len(needles) > 10
    for name, blob in blobs.items():
        for needle in needles:
            assert needle.encode() not in blob, f"{needle[:30]!r} found in {name}"
    assert f'client="{fp_b}"'.encode() in metrics[-1] or b'client="other"' in metrics[-1]
