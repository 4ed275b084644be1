"""The bench against today's APIs on the real llama-server, with a model that reasons:
an ``openai`` engine on the Responses API (``endpoint = "responses"``) and an
``anthropic`` engine (``/v1/messages``), through ``infertop bench`` as a user runs it.

SmolLM2 does not reason by itself. The server is made to: a ChatML chat template that
opens ``<think>`` for the answer (as Qwen3's does), ``--reasoning-format deepseek`` so the
server streams what comes before ``</think>`` as reasoning, and ``--reasoning-budget 6`` so
it closes the thinking after 6 tokens and the model answers. Both APIs then stream real
reasoning deltas (``response.reasoning_text.delta``; ``thinking_delta``) before the answer.
``--ignore-eos`` makes the answer certain: the bench samples at temperature 0.7, and the
model sometimes ends its turn right after the forced ``</think>`` (1 in 40 answers here,
9 tokens, all reasoning: CI met one); with end-of-generation tokens banned every answer
is the full ``MAX_TOKENS``, 6 of reasoning (at most) and the rest answer.

Checked against the server's own account: its ``llamacpp:tokens_predicted_total`` grows
by exactly the output tokens the bench reports over every request it made (calibration
included), and each request's reasoning + answer tokens are its output tokens — so no
stream's count is doubled (the Responses API repeats each text in ``*.done`` events).
The server runs with ``--api-key``: each engine's key reaches it (``Authorization`` for
the Responses API, ``x-api-key`` for Messages), and ``--cache-ram 0`` so that the second
engine, sent the same prompts, does not find them in the server's prompt cache.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.engine

# ChatML (SmolLM2's own format) with the thinking opened for the answer unless
# enable_thinking is false (the server renders both ways to learn that it thinks), and
# an earlier answer's reasoning_content written back as Qwen3's template does
THINK_TEMPLATE = (
    "{%- for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' }}"
    "{%- if message['role'] == 'assistant' and message.get('reasoning_content') %}"
    "{{ '<think>\\n' + message['reasoning_content'] + '\\n</think>\\n' }}{%- endif %}"
    "{{ message['content'] + '<|im_end|>\\n' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}"
    "{{ '<think>\\n\\n</think>\\n\\n' }}{%- else %}{{ '<think>\\n' }}{%- endif %}"
    "{%- endif %}"
)
BUDGET = 6
RUNS, MAX_TOKENS = 3, 16


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from tests.support import real_servers as servers
    from tui.engines.files.default_model import default_model_path

    model = default_model_path()
    assert model is not None
    root = tmp_path_factory.mktemp("think")
    template = root / "think.jinja"
    template.write_text(THINK_TEMPLATE)
    args = ["--jinja", "--chat-template-file", str(template), "--reasoning-format", "deepseek"]
    args += ["--reasoning-budget", str(BUDGET), "--cache-ram", "0"]
    args += ["--api-key", servers.TEST_API_KEY, "--ignore-eos"]
    with servers.running_llama_server(model, root, args, what="llama-server (reasoning)") as sp:
        yield sp


def predicted_total(url: str, key: str) -> int:
    """The server's count of every token it generated since it started."""
    req = urllib.request.Request(url + "/metrics", headers={"Authorization": f"Bearer {key}"})
    with urllib.request.urlopen(req, timeout=10) as r:
        text = r.read().decode()
    line = next(ln for ln in text.splitlines() if ln.startswith("llamacpp:tokens_predicted_total"))
    return int(float(line.split()[-1]))


def test_bench_responses_and_messages_engines_measure_reasoning(server, tmp_path, cli_env) -> None:  # type: ignore[no-untyped-def]
    from tests.support import real_servers as servers

    url = server.url  # type: ignore[attr-defined]
    cfg = tmp_path / "infertop.toml"
    cfg.write_text(
        'default_engine = "resp"\n'
        f'[engines.resp]\nkind = "openai"\nurl = "{url}"\nendpoint = "responses"\n'
        'api_key_env = "BENCH_KEY"\n'
        f'[engines.anth]\nkind = "anthropic"\nurl = "{url}"\napi_key_env = "BENCH_KEY"\n'
    )
    env = dict(cli_env, BENCH_KEY=servers.TEST_API_KEY)
    before = predicted_total(url, servers.TEST_API_KEY)
    out = tmp_path / "o"
    args = ["--engine", "resp", "--engine", "anth", "--runs", str(RUNS), "--warmup", "0"]
    args += ["--concurrency", "1", "--max-tokens", str(MAX_TOKENS), "--prompt-tokens", "64"]
    p = subprocess.run(
        [sys.executable, "-m", "tui", "--config", str(cfg), "bench", *args, "--out", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    generated = predicted_total(url, servers.TEST_API_KEY) - before
    report = json.loads((out / "report.json").read_text())

    # the server's count of what it generated is the sum of the bench's, not double it
    records = [r for e in report["engines"] for r in e["records"]]
    assert sum(r["metrics"]["output_tokens"] for r in records) == generated
    for e in report["summary"]["engines"]:
        assert (e["ok"], e["failed"]) == (RUNS, 0), e["name"]
        # a 1-token probe of a thinking model streams no text, yet the server counted
        # the prompt: calibration still uses its count
        assert e["prompt"]["method"] == "usage probe", e["name"]
    for rec in records:
        m, tl = rec["metrics"], rec["timeline"]
        assert m["output_tokens_source"] == "usage"
        assert m["output_tokens"] == tl["usage_output_tokens"]
        if rec["phase"] != "warm":
            continue
        who = f"{rec['engine']} {rec['request_id']}"
        assert m["output_tokens"] == MAX_TOKENS, who  # --ignore-eos: no early end
        chunks = [c for c in tl["chunks"] if c[1]]
        thought = [c for c in chunks if c[3:] == ["reasoning"]]
        answer = [c for c in chunks if c[3:] != ["reasoning"]]
        assert thought and answer, who  # it reasoned, then answered
        # R from the reasoning chunks (neither API counts it apart here), A = N − R
        assert m["reasoning_tokens_source"] == "chunk-count-estimate"
        assert m["reasoning_tokens"] == len(thought) <= BUDGET
        assert m["reasoning_tokens"] + m["answer_tokens"] == m["output_tokens"], who
        assert m["answer_tokens_estimated"] is True
        # no chunk repeats the text before it (a counted "*.done" event would)
        text = ""
        for c in answer:
            assert len(answer) == 1 or c[1] != text, who
            text += c[1]
        # TTFT is the first reasoning token, TTFO the first answer token, in between the
        # thinking
        t_first, t_answer = chunks[0][0] / 1e6, answer[0][0] / 1e6
        assert chunks[0] is thought[0]
        assert m["ttft_ms"] == pytest.approx(t_first) and m["ttfo_ms"] == pytest.approx(t_answer)
        assert m["thinking_ms"] == pytest.approx(m["ttfo_ms"] - m["ttft_ms"])
        assert m["ttfo_ms"] > m["ttft_ms"]

    md = (out / "report.md").read_text()
    assert "| TTFT ms | TTFO ms |" in md and "## Reasoning and answer" in md
    for name in ("resp", "anth"):
        lv = next(e for e in report["summary"]["engines"] if e["name"] == name)["levels"][0]
        r = lv["reasoning"]
        assert (r["requests"], r["answered"]) == (RUNS, RUNS)
        assert r["reasoning_tokens"] + r["answer_tokens"] == lv["output_tokens"]
        assert f"| {name} | c=1 | {RUNS} / {RUNS} |" in md
        ttfo = lv["medians"]["ttfo_ms"]["estimate"]
        line = next(ln for ln in p.stdout.splitlines() if ln.startswith(f"{name}: {RUNS} ok"))
        assert f"TTFO {ttfo:.1f} ms" in line
    assert (out / "ttfo.svg").is_file()
    assert "reasoning tokens counted from reasoning chunks" in md
    kinds = {e["name"]: (e["kind"], e["spec"]["endpoint"]) for e in report["engines"]}
    assert kinds == {"resp": ("openai", "responses"), "anth": ("anthropic", "chat")}
    assert Path(out / "report.csv").read_text().splitlines()[0].count("ttfo_ms") == 1
