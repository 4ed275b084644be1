"""Why a request took the time it took: its breakdown, and one verdict naming the limit.

**The breakdown** (:class:`Breakdown`, ms unless it says tokens), from the request's
metrics (tui/core/metrics.py), the engine's own account (:class:`EngineTruth`) and what
the measuring place saw around it (:class:`Seen`):

- queue: waiting for a slot or a place in the batch. The engine's own figure where it
  gives one (vLLM: ``metrics.queue_time_ms`` per request, or its /metrics queue-time
  histogram for a request that ran alone) — source "engine"; else TTFT − the engine's
  prefill time — source "before prefill": the wait, the request's trip to the engine and
  its tokenizing together (the engine does not split them);
- prefill: the engine's prefill time; its prompt tokens split into those read from the
  prefix cache (llama-server ``cache_n``; vLLM ``cached_tokens``; Responses
  ``cached_tokens``; Messages ``cache_read_input_tokens``) and those computed;
- decode: the engine's decode time (first to last token), else the client's;
- transport: e2e − queue − prefill − decode where the queue is the engine's (the trips
  there and back, tokenizing, the stream's last bytes); with a "before prefill" queue
  only the part after the first token (e2e − TTFT − decode);
- speculation: drafted and accepted tokens (tui/core/spec.py).

**The verdict**: the first rule that holds, in this order (thresholds below; the same
list is in docs/engine-inside.md):

1. failed / cancelled: the request did not finish;
2. preempted: the engine preempted it (vLLM, where one request is attributed): "preempted 2×";
3. queued: queue ≥ QUEUE_MIN_MS and ≥ QUEUE_SHARE of TTFT, and the queue is the
   engine's own or another request was in flight through this place when it was sent:
   "queued 1.8 s behind 1 busy slot (-np 1)". A "before prefill" wait that long with no
   other request seen is "slow-start" (network, tokenizing, or another client's load);
4. prefill-bound: TTFT ≥ PROMPT_SHARE of e2e and the engine timed the prefill: "prefill-
   bound: 3,904 of 4,000 prompt tokens computed, 96 from cache";
5. cache-hit: at least CACHE_HIT_SHARE of the prompt and CACHE_HIT_MIN tokens came from
   the cache: "cache hit: 3.9k of 4k reused, TTFT 0.12 s";
6. spec-slower: it drafted, and its decode tok/s is below the same engine's without
   speculation (where measured): "draft acceptance 31 %: speculation slower than none";
   spec-low: it drafted and kept under SPEC_LOW of the drafts (no baseline to compare);
7. decode-shared: other requests through this place decoded beside its decode (first
   token to end; one that waited in a queue meanwhile did not): "decode shared with 7
   other requests";
8. decode-bound: what is left when the decode took most of the time.
9. unknown: the engine said nothing that tells queue from prefill, and the TTFT is most
   of the request: "no verdict: …" — never a guess.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Final, Literal, get_args

from tui.core.events import EngineTruth
from tui.core.metrics import RequestMetrics
from tui.core.spec import SpecCounts, from_timings, pct

VerdictKind = Literal[
    "failed",
    "cancelled",
    "preempted",
    "queued",
    "slow-start",
    "prefill-bound",
    "cache-hit",
    "spec-slower",
    "spec-low",
    "decode-shared",
    "decode-bound",
    "unknown",
]
VERDICT_KINDS: Final[tuple[VerdictKind, ...]] = get_args(VerdictKind)  # in that order
QueueSource = Literal["engine", "before prefill"]

QUEUE_MIN_MS: Final = 100.0  # a wait shorter than this is no queue worth naming
QUEUE_SHARE: Final = 0.25  # … nor one under this share of the TTFT
PROMPT_SHARE: Final = 0.5  # TTFT this share of e2e or more: the prompt side is the limit
CACHE_HIT_SHARE: Final = 0.5  # of the prompt read from the cache …
CACHE_HIT_MIN: Final = 256  # … and at least this many tokens
SPEC_LOW: Final = 0.5  # draft acceptance under this: most drafted tokens wasted


@dataclass(frozen=True, slots=True)
class Seen:
    """What the measuring place saw around the request, besides its own stream.

    ``others_at_send``: other generation requests to the same engine in flight through
    this place when it was sent; ``others_max``: the most of them decoding at once while
    it decoded (first token to end: tui/core/overlap.py; None: not known).
    ``slots_total``: the engine's parallel slots (llama-server ``-np``, from /props).
    ``preemptions``: times the engine preempted this request, where it says.
    ``spec_baseline_tps``: decode tok/s of the same engine without speculation, where
    measured (bench ``--compare-spec``)."""

    others_at_send: int | None = None
    others_max: int | None = None
    slots_total: int | None = None
    preemptions: int | None = None
    spec_baseline_tps: float | None = None


@dataclass(frozen=True, slots=True)
class Breakdown:
    """Where the request's time went (see the module docstring); None = not known."""

    e2e_ms: float | None = None
    ttft_ms: float | None = None
    queue_ms: float | None = None
    queue_source: QueueSource | None = None
    prefill_ms: float | None = None
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    computed_tokens: int | None = None
    decode_ms: float | None = None
    transport_ms: float | None = None
    output_tokens: int | None = None
    decode_tps: float | None = None
    drafted: int | None = None
    accepted: int | None = None

    @property
    def acceptance(self) -> float | None:
        if not self.drafted or self.accepted is None:
            return None
        return self.accepted / self.drafted

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class Verdict:
    """One line naming the request's limit (``kind`` for tables and counts, ``text`` for
    people) and the breakdown it was read from."""

    kind: VerdictKind
    text: str
    breakdown: Breakdown

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "text": self.text, **self.breakdown.to_dict()}


def verdict_from_dict(d: object) -> Verdict | None:
    """Back from :meth:`Verdict.to_dict` (untrusted: the kind must be one of ours; the
    numbers must be numbers; the text is cut to 300 characters)."""
    if not isinstance(d, dict) or d.get("kind") not in VERDICT_KINDS:
        return None
    text = d.get("text")
    if not isinstance(text, str):
        return None

    def number(key: str) -> Any:
        v = d.get(key)
        if isinstance(v, bool) or not isinstance(v, int | float) or v != v:
            return None
        return v

    src = d.get("queue_source")
    b = Breakdown(
        **{f.name: number(f.name) for f in fields(Breakdown) if f.name != "queue_source"},
        queue_source=src if src in ("engine", "before prefill") else None,
    )
    return Verdict(d["kind"], text[:300], b)


def seconds(ms: float) -> str:
    """1,834 ms → "1.8 s"; under a second, "120 ms"."""
    return f"{ms / 1000:.1f} s" if ms >= 1000 else f"{ms:.0f} ms"


def spec_of(truth: EngineTruth | None) -> SpecCounts | None:
    """This request's drafted/accepted counts from the engine's report (llama-server's
    ``draft_n`` / ``draft_n_accepted``; vLLM's per-request acceptance, made into the same
    names by tui/engines/dialects/vllm_request.py)."""
    return None if truth is None else from_timings(truth.raw)


def _int(v: object) -> int | None:
    if isinstance(v, bool) or not isinstance(v, int | float) or v != v or v < 0:
        return None
    return int(v)


def breakdown(m: RequestMetrics, truth: EngineTruth | None) -> Breakdown:
    """The request's breakdown (see the module docstring)."""
    raw = truth.raw if truth is not None else {}
    prefill = truth.prompt_ms if truth is not None else None
    queue: float | None = None
    source: QueueSource | None = None
    engine_queue = raw.get("queue_ms")
    if isinstance(engine_queue, int | float) and not isinstance(engine_queue, bool):
        if engine_queue == engine_queue and engine_queue >= 0:
            queue, source = float(engine_queue), "engine"
    if queue is None and prefill is not None and m.ttft_ms is not None:
        queue, source = max(0.0, m.ttft_ms - prefill), "before prefill"
    prompt = truth.prompt_tokens if truth is not None and truth.prompt_tokens is not None else None
    if prompt is None:
        prompt = m.prompt_tokens
    cached = truth.cached_tokens if truth is not None else None
    computed = truth.prompt_eval_tokens if truth is not None else None
    if computed is None and prompt is not None and cached is not None:
        computed = max(0, prompt - cached)
    if cached is None and prompt is not None and computed is not None and computed <= prompt:
        cached = prompt - computed
    engine_decode = truth.decode_ms if truth is not None else None
    decode = engine_decode if engine_decode is not None else m.decode_ms
    transport = None  # (only against the engine's own decode time)
    if m.e2e_ms is not None and engine_decode is not None:
        if source == "engine" and prefill is not None and queue is not None:
            transport = max(0.0, m.e2e_ms - queue - prefill - engine_decode)
        elif m.ttft_ms is not None:
            transport = max(0.0, m.e2e_ms - m.ttft_ms - engine_decode)
    spec = from_timings(raw)
    return Breakdown(
        e2e_ms=m.e2e_ms,
        ttft_ms=m.ttft_ms,
        queue_ms=queue,
        queue_source=source,
        prefill_ms=prefill,
        prompt_tokens=prompt,
        cached_tokens=cached,
        computed_tokens=computed,
        decode_ms=decode,
        transport_ms=transport,
        output_tokens=m.output_tokens,
        decode_tps=m.decode_tps,
        drafted=None if spec is None else int(spec.drafted),
        accepted=None if spec is None else int(spec.accepted),
    )


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def _queued(b: Breakdown, seen: Seen) -> str:
    assert b.queue_ms is not None
    text = f"queued {seconds(b.queue_ms)}"
    ahead = seen.others_at_send
    if ahead:
        if seen.slots_total:
            busy = min(ahead, seen.slots_total)
            text += f" behind {_plural(busy, 'busy slot')} (-np {seen.slots_total})"
        else:
            text += f" behind {_plural(ahead, 'other request')}"
    elif b.queue_source == "engine":
        text += " (the engine's queue time)"
    return text


def judge(
    m: RequestMetrics,
    truth: EngineTruth | None,
    seen: Seen | None = None,
    state: Literal["done", "failed", "cancelled"] = "done",
) -> Verdict:
    """The request's verdict (the rules are in the module docstring)."""
    seen = seen or Seen()
    b = breakdown(m, truth)
    if state == "cancelled" or m.finish_reason == "cancelled":
        return Verdict("cancelled", "cancelled before its end", b)
    if state == "failed" or m.error:
        return Verdict("failed", "failed: no verdict on a request that did not finish", b)
    preempted = seen.preemptions
    if preempted is None and truth is not None:
        preempted = _int(truth.raw.get("preemptions"))
    if preempted:
        return Verdict("preempted", f"preempted {preempted}×", b)
    ttft = b.ttft_ms
    if ttft is None:
        return Verdict("unknown", "no verdict: no token came", b)
    if b.queue_ms is not None and b.queue_ms >= QUEUE_MIN_MS and b.queue_ms >= QUEUE_SHARE * ttft:
        if b.queue_source == "engine" or seen.others_at_send:
            return Verdict("queued", _queued(b, seen), b)
        return Verdict(
            "slow-start",
            f"slow start: {seconds(b.queue_ms)} before prefill with no other request seen "
            "(the network, tokenizing, or another client's load)",
            b,
        )
    e2e = b.e2e_ms or ttft
    if ttft >= PROMPT_SHARE * e2e:
        if b.prefill_ms is None:
            return Verdict(
                "unknown",
                f"no verdict: TTFT {seconds(ttft)} is most of the request, and the engine "
                "reported no prefill time to tell queue from prefill",
                b,
            )
        if not _cache_hit(b):
            return Verdict("prefill-bound", _prefill_text(b), b)
    if _cache_hit(b):
        assert b.cached_tokens is not None and b.prompt_tokens is not None
        return Verdict(
            "cache-hit",
            f"cache hit: {_k(b.cached_tokens)} of {_k(b.prompt_tokens)} reused, "
            f"TTFT {ttft / 1000:.2f} s",
            b,
        )
    spec = _spec_verdict(b, seen)
    if spec is not None:
        return spec
    if seen.others_max:
        return Verdict(
            "decode-shared", f"decode shared with {_plural(seen.others_max, 'other request')}", b
        )
    if b.decode_ms is None or b.output_tokens is None:
        return Verdict("unknown", "no verdict: the decode was not measured", b)
    rate = f" at {b.decode_tps:.1f} tok/s" if b.decode_tps is not None else ""
    return Verdict("decode-bound", f"decode-bound: {b.output_tokens:,} tok{rate}", b)


def _k(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else f"{n:,}"


def _cache_hit(b: Breakdown) -> bool:
    return (
        b.cached_tokens is not None
        and b.prompt_tokens is not None
        and b.prompt_tokens > 0
        and b.cached_tokens >= CACHE_HIT_MIN
        and b.cached_tokens >= CACHE_HIT_SHARE * b.prompt_tokens
    )


def _prefill_text(b: Breakdown) -> str:
    if b.computed_tokens is None or b.prompt_tokens is None:
        took = f" ({seconds(b.prefill_ms)})" if b.prefill_ms is not None else ""
        return f"prefill-bound{took}: the engine did not say how much came from cache"
    cached = b.cached_tokens or 0
    return (
        f"prefill-bound: {b.computed_tokens:,} of {b.prompt_tokens:,} prompt tokens "
        f"computed, {cached:,} from cache"
    )


def _spec_verdict(b: Breakdown, seen: Seen) -> Verdict | None:
    rate = b.acceptance
    if rate is None:
        return None
    base = seen.spec_baseline_tps
    if base is not None and b.decode_tps is not None and b.decode_tps < base:
        return Verdict(
            "spec-slower",
            f"draft acceptance {pct(rate)}: speculation slower than none "
            f"({b.decode_tps:.1f} vs {base:.1f} tok/s)",
            b,
        )
    if rate < SPEC_LOW:
        return Verdict(
            "spec-low",
            f"draft acceptance {pct(rate)}: most drafted tokens thrown away",
            b,
        )
    return None
