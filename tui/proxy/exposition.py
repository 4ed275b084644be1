"""The proxy's Prometheus metrics (text exposition format 0.0.4), kept by hand.

Counted per (upstream, model, route); labels are bounded (:mod:`tui.proxy.routes`):

- ``infertop_proxy_requests_total`` — requests forwarded (every route); of them
  ``..._failed_total`` (the upstream failed, or answered an error status) and
  ``..._cancelled_total`` (the client went away first: its upstream request was cancelled).
- ``infertop_proxy_prompt_tokens_total`` — prompt tokens the engine reported (usage
  ``prompt_tokens``, Ollama ``prompt_eval_count``, llama-server ``timings``); requests
  whose engine reported none add nothing.
- ``infertop_proxy_output_tokens_total`` — output tokens: the engine's count where it
  gave one, else the number of chunks with text; ``..._output_tokens_estimated_total`` is
  the part that was such an estimate.
- ``infertop_proxy_reasoning_tokens_total`` — of the output tokens, those a reasoning
  model spent thinking (the engine's count where it gave one, else its reasoning
  chunks); ``..._reasoning_tokens_estimated_total`` the part that was such an estimate.
- ``infertop_proxy_ttft_seconds`` (histogram) — TTFT of streamed generation requests:
  first chunk with text (reasoning included) − request forwarded upstream.
- ``infertop_proxy_ttfo_seconds`` (histogram) — TTFO of streamed generation requests:
  first chunk of answer text or of a tool call − request forwarded upstream.
- ``infertop_proxy_itl_seconds`` (histogram) — per-token inter-token latency: each gap
  between chunks with text, spread over the tokens its chunk carries (k values of g/k).
- ``infertop_proxy_e2e_seconds`` (histogram) — request forwarded → response ended.
- ``infertop_proxy_requests_in_flight`` (gauge) — generation requests now passing through.
- ``infertop_proxy_info`` (gauge, 1) — the upstream's URL and detected kind.
- ``infertop_proxy_client_requests_total``, ``..._client_prompt_tokens_total``,
  ``..._client_output_tokens_total`` — per client (``client``: the request's client label,
  tui/core/outcome.py's ``ClientIdentity.label``), bounded by :class:`ClientLabels`: at
  most ``top_clients`` clients have series of their own, the busiest by tokens, and the
  rest are ``client="other"``; every series only grows (see ClientLabels).
- ``infertop_proxy_verdicts_total`` — generation requests ended, per verdict kind
  (``verdict``: tui/core/verdict.py's kinds, every one written from the start at 0): why
  each took its time, as the requests view and the ledger say it.

Histograms, ITL and token counters are updated when a request ends; the gauge when one
starts and ends. A (model, route)'s series are written at 0 from the moment its first
request starts: Prometheus' ``rate()`` and ``increase()`` only count growth between two
samples, so a series that first appeared already holding a request's tokens would lose
them (the client libraries' advice: initialise labelled series to 0).
No label ever holds a header, a query string or any text of a request.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from collections.abc import Callable

from tui.core.metrics import RequestMetrics
from tui.core.verdict import VERDICT_KINDS
from tui.proxy.routes import OTHER, ModelLabels, route_label
from tui.proxy.rows import RequestState

TTFT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
ITL_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 1.0, 2.5)
E2E_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0)
PREFIX = "infertop_proxy_"
Key = tuple[str, str]  # (model, route)


class Histogram:
    """Bucket counts (not cumulative until rendered), their sum and count."""

    __slots__ = ("bounds", "counts", "sum", "count")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float, n: int = 1) -> None:
        """``n`` observations of ``value`` (seconds)."""
        self.counts[bisect_left(self.bounds, value)] += n
        self.sum += value * n
        self.count += n


def escape(value: str) -> str:
    """A label value as the text format wants it (backslash, quote, newline escaped)."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


CLIENT_LABEL_CHARS = 64
TRACKED_CLIENTS = 1000  # clients whose tokens are counted apart, to rank them


def client_label_text(label: str) -> str:
    """A client label as a Prometheus label value: printable, at most
    :data:`CLIENT_LABEL_CHARS` characters (clients choose their user field)."""
    text = "".join(c if c.isprintable() else "?" for c in label[:CLIENT_LABEL_CHARS])
    return text or "unknown"


class ClientLabels:
    """Which clients have series of their own, bounded, each series only growing.

    Every client's tokens (prompt + output) are counted, for at most
    :data:`TRACKED_CLIENTS` clients (past that, the less busy half is forgotten). A client gets a
    label once it is among the ``top`` busiest by tokens: while fewer than ``top``
    labels are active, at once; otherwise when it has more tokens than the least busy
    active one, which is then *frozen* — its series stay, no longer growing, and its
    later requests count under ``other``. A counter moved between series would go
    backwards in one of them (Prometheus would read a reset), so requests counted under
    ``other`` stay there: a newly labelled client's series begins at its promotion. At
    most ``2 × top`` labels are ever made; past that, labels no longer change."""

    def __init__(self, top: int) -> None:
        self.top = top
        self.tokens: dict[str, int] = {}
        self.active: set[str] = set()
        self.made: set[str] = set()

    def _forget_half(self) -> None:
        """The tracked clients with the fewest tokens (half of them, never a labelled
        one) are forgotten: a flood of one-request clients cannot keep a busy one out."""
        idle = sorted((n, c) for c, n in self.tokens.items() if c not in self.made)
        for _n, c in idle[: len(idle) // 2 + 1]:
            del self.tokens[c]

    def label(self, client: str, tokens: int) -> str:
        """The label this request of ``client`` counts under (after adding its tokens)."""
        if self.top <= 0:
            return OTHER
        name = client_label_text(client)
        if name == OTHER:
            name = f"{OTHER}?"  # a client named "other" is not the rest
        known = self.tokens.get(name)
        if known is None and len(self.tokens) >= TRACKED_CLIENTS:
            self._forget_half()
        total = self.tokens[name] = (known or 0) + tokens
        if name in self.active:
            return name
        if name in self.made or len(self.made) >= 2 * self.top:
            return OTHER
        if len(self.active) < self.top:
            self.active.add(name)
            self.made.add(name)
            return OTHER  # this request was counted before the label existed
        least = min(self.active, key=lambda c: (self.tokens.get(c, 0), c))
        if total > self.tokens.get(least, 0):
            self.active.discard(least)
            self.active.add(name)
            self.made.add(name)
        return OTHER


class ProxyMetrics:
    """Counters, histograms and the in-flight gauge of one proxy (see the docstring)."""

    def __init__(self, upstream: str, kind: str, top_clients: int = 10) -> None:
        self.upstream = upstream
        self.kind = kind
        self.clients = ClientLabels(top_clients)
        self.client_requests: defaultdict[str, int] = defaultdict(int)
        self.client_prompt: defaultdict[str, int] = defaultdict(int)
        self.client_output: defaultdict[str, int] = defaultdict(int)
        self._labels_made = 0
        self.models = ModelLabels()
        self.requests: defaultdict[Key, int] = defaultdict(int)
        self.failed: defaultdict[Key, int] = defaultdict(int)
        self.cancelled: defaultdict[Key, int] = defaultdict(int)
        self.prompt_tokens: defaultdict[Key, int] = defaultdict(int)
        self.output_tokens: defaultdict[Key, int] = defaultdict(int)
        self.output_estimated: defaultdict[Key, int] = defaultdict(int)
        self.reasoning_tokens: defaultdict[Key, int] = defaultdict(int)
        self.reasoning_estimated: defaultdict[Key, int] = defaultdict(int)
        self.ttft: dict[Key, Histogram] = {}
        self.ttfo: dict[Key, Histogram] = {}
        self.itl: dict[Key, Histogram] = {}
        self.e2e: dict[Key, Histogram] = {}
        self.in_flight = 0
        self.verdicts: dict[str, int] = dict.fromkeys(VERDICT_KINDS, 0)
        # more series for the same page, by the parts the command adds (OTLP export's
        # counts, alert states): each returns whole lines of the text format
        self.extra: list[Callable[[], str]] = []

    def key(self, model: str | None, path: str) -> Key:
        return self.models.label(model), route_label(path)

    def other_request(self, path: str, failed: bool, cancelled: bool) -> None:
        """A request that is not generation (a model list, a health check, ...)."""
        key = ("(none)", route_label(path))
        self.requests[key] += 1
        if cancelled:
            self.cancelled[key] += 1
        elif failed:
            self.failed[key] += 1

    def generation_started(self, model: str | None, path: str) -> None:
        """A generation request started: its (model, route) series exist from now, at 0
        if nothing was counted under them yet."""
        key = self.key(model, path)
        for series in (
            self.requests,
            self.failed,
            self.cancelled,
            self.prompt_tokens,
            self.output_tokens,
            self.output_estimated,
            self.reasoning_tokens,
            self.reasoning_estimated,
        ):
            series[key] += 0
        _hist(self.ttft, key, TTFT_BUCKETS)
        _hist(self.ttfo, key, TTFT_BUCKETS)
        _hist(self.itl, key, ITL_BUCKETS)
        _hist(self.e2e, key, E2E_BUCKETS)

    def generation_ended(
        self,
        model: str | None,
        path: str,
        state: RequestState,
        streamed: bool,
        m: RequestMetrics,
        client: str | None = None,
    ) -> None:
        """A generation request ended (``state``: done, failed or cancelled); ``client``
        its client's label (None: not counted per client)."""
        if client is not None:
            tokens = (m.prompt_tokens or 0) + (m.output_tokens or 0)
            who = self.clients.label(client, tokens)
            if len(self.clients.made) != self._labels_made:  # a new label: its series at 0
                self._labels_made = len(self.clients.made)
                for c in self.clients.made:
                    for series in (self.client_requests, self.client_prompt, self.client_output):
                        series[c] += 0
            self.client_requests[who] += 1
            self.client_prompt[who] += m.prompt_tokens or 0
            self.client_output[who] += m.output_tokens or 0
        key = self.key(model, path)
        self.requests[key] += 1
        if state == RequestState.CANCELLED:
            self.cancelled[key] += 1
        elif state == RequestState.FAILED:
            self.failed[key] += 1
        if m.prompt_tokens is not None:
            self.prompt_tokens[key] += m.prompt_tokens
        if m.output_tokens:
            self.output_tokens[key] += m.output_tokens
            if m.output_tokens_estimated:
                self.output_estimated[key] += m.output_tokens
        if m.reasoning_tokens:
            self.reasoning_tokens[key] += m.reasoning_tokens
            if m.reasoning_tokens_source == "chunk-count-estimate":
                self.reasoning_estimated[key] += m.reasoning_tokens
        if streamed and m.ttft_ms is not None:
            _hist(self.ttft, key, TTFT_BUCKETS).observe(m.ttft_ms / 1000.0)
        if streamed and m.ttfo_ms is not None:
            _hist(self.ttfo, key, TTFT_BUCKETS).observe(m.ttfo_ms / 1000.0)
        if m.itl_token_ms:
            h = _hist(self.itl, key, ITL_BUCKETS)
            for v, n in zip(m.itl_token_ms, m.itl_token_weights):
                h.observe(v / 1000.0, n)  # a gap's value, once per token it stands for
        if m.e2e_ms is not None:
            _hist(self.e2e, key, E2E_BUCKETS).observe(m.e2e_ms / 1000.0)

    def verdict_given(self, kind: str) -> None:
        """A generation request's verdict (one of tui/core/verdict.py's kinds)."""
        if kind in self.verdicts:
            self.verdicts[kind] += 1

    def render(self) -> bytes:
        """Every series, in the text exposition format."""
        up = f'upstream="{escape(self.upstream)}"'
        out: list[str] = []

        def labels(key: Key) -> str:
            return f'{up},model="{escape(key[0])}",route="{escape(key[1])}"'

        out += _head("info", "gauge", "The upstream this proxy forwards to, and its kind.")
        out.append(f'{PREFIX}info{{{up},kind="{escape(self.kind)}"}} 1')
        out += _head("requests_in_flight", "gauge", "Generation requests passing through now.")
        out.append(f"{PREFIX}requests_in_flight{{{up}}} {self.in_flight}")
        for name, series, text in (
            ("requests_total", self.requests, "Requests forwarded."),
            ("requests_failed_total", self.failed, "Requests the upstream failed."),
            ("requests_cancelled_total", self.cancelled, "Requests the client cancelled."),
            ("prompt_tokens_total", self.prompt_tokens, "Prompt tokens the engine reported."),
            (
                "output_tokens_total",
                self.output_tokens,
                "Output tokens (engine count, else chunks).",
            ),
            ("output_tokens_estimated_total", self.output_estimated, "Output tokens estimated."),
            (
                "reasoning_tokens_total",
                self.reasoning_tokens,
                "Of the output tokens, reasoning (engine count, else chunks).",
            ),
            (
                "reasoning_tokens_estimated_total",
                self.reasoning_estimated,
                "Reasoning tokens estimated.",
            ),
        ):
            out += _head(name, "counter", text)
            out += [f"{PREFIX}{name}{{{labels(k)}}} {v}" for k, v in sorted(series.items())]
        for name, per_client, text in (
            ("client_requests_total", self.client_requests, "Generation requests per client."),
            (
                "client_prompt_tokens_total",
                self.client_prompt,
                "Prompt tokens the engine reported, per client.",
            ),
            (
                "client_output_tokens_total",
                self.client_output,
                "Output tokens (engine count, else chunks), per client.",
            ),
        ):
            if not per_client:
                continue
            out += _head(name, "counter", text)
            out += [
                f'{PREFIX}{name}{{{up},client="{escape(c)}"}} {v}'
                for c, v in sorted(per_client.items())
            ]
        out += _head("verdicts_total", "counter", "Generation requests ended, per verdict.")
        out += [
            f'{PREFIX}verdicts_total{{{up},verdict="{kind}"}} {n}'
            for kind, n in self.verdicts.items()
        ]
        for name, hists, text in (
            ("ttft_seconds", self.ttft, "Time to first token of streamed requests."),
            ("ttfo_seconds", self.ttfo, "Time to first answer token of streamed requests."),
            ("itl_seconds", self.itl, "Inter-token latency, per token."),
            ("e2e_seconds", self.e2e, "Request forwarded to response ended."),
        ):
            out += _head(name, "histogram", text)
            for k, h in sorted(hists.items()):
                lab = labels(k)
                running = 0
                for bound, n in zip(h.bounds, h.counts):
                    running += n
                    out.append(f'{PREFIX}{name}_bucket{{{lab},le="{bound:g}"}} {running}')
                out.append(f'{PREFIX}{name}_bucket{{{lab},le="+Inf"}} {h.count}')
                out.append(f"{PREFIX}{name}_sum{{{lab}}} {h.sum!r}")
                out.append(f"{PREFIX}{name}_count{{{lab}}} {h.count}")
        text = "\n".join(out) + "\n" + "".join(render() for render in self.extra)
        return text.encode("utf-8", "replace")


def _head(name: str, kind: str, text: str) -> list[str]:
    return [f"# HELP {PREFIX}{name} {text}", f"# TYPE {PREFIX}{name} {kind}"]


def _hist(hists: dict[Key, Histogram], key: Key, bounds: tuple[float, ...]) -> Histogram:
    h = hists.get(key)
    if h is None:
        h = hists[key] = Histogram(bounds)
    return h
