"""Engine kinds: their names, what each is, the options each accepts, and the class that
implements each (imported only when an engine of that kind is built)."""

from __future__ import annotations

import importlib

from tui.engines.base import Engine, EngineError

# kind -> "module:Class"; modules load lazily so a missing optional library only matters
# to the engine that needs it.
ENGINE_KINDS: dict[str, str] = {
    "llamacpp": "tui.engines.llamacpp:LlamaCppEngine",
    "openai": "tui.engines.openai_compat:OpenAICompatEngine",
    "anthropic": "tui.engines.anthropic:AnthropicEngine",
    "llama-server": "tui.engines.llama_server:LlamaServerEngine",
    "vllm": "tui.engines.vllm:VLLMEngine",
    "ollama": "tui.engines.ollama:OllamaEngine",
    "vllm-inprocess": "tui.engines.vllm_inprocess:VLLMInProcessEngine",
    "synthetic": "tui.engines.synthetic:SyntheticEngine",
    "replay": "tui.engines.replay:ReplayEngine",
}

KIND_HELP: dict[str, str] = {
    "llamacpp": "llama.cpp in-process (llama-cpp-python), model = GGUF path or 'default'",
    "openai": "any OpenAI-compatible server at url (endpoint: chat, completions or responses)",
    "anthropic": "a server speaking Anthropic's Messages API (/v1/messages) at url",
    "llama-server": "llama.cpp's llama-server at url; its timings are the engine truth",
    "vllm": "vLLM's OpenAI server at url; engine truth from its /metrics",
    "ollama": "Ollama at url (native /api/chat; durations are the engine truth)",
    "vllm-inprocess": "vLLM in-process (AsyncLLM; needs the vllm extra), model = HF folder/name",
    "synthetic": "in-process synthetic token stream at options.tokens_per_s (demos, tests)",
    "replay": "plays a recorded session file (options.file) back at its recorded pace",
}


# The options each kind accepts (``[engines.NAME.options]``) and their types: config
# validation refuses anything else, so a typo is an error, not silently ignored.
_NUM = (int, float)
_HTTP_OPTIONS: dict[str, tuple[type, ...]] = {"extra_body": (dict,), "pid": (int,)}
KIND_OPTIONS: dict[str, dict[str, tuple[type, ...]]] = {
    "llamacpp": {
        "quiet_stderr": (bool,),
        "seed": (int,),
        "isolate": (bool,),
        "use_extra_bufts": (bool, str),
        "type_k": (str,),
        "type_v": (str,),
    },
    "openai": dict(_HTTP_OPTIONS),
    "anthropic": dict(_HTTP_OPTIONS),
    # binary: the llama-server infertop starts when the engine has a model and no url
    "llama-server": {**_HTTP_OPTIONS, "timings_per_token": (bool,), "binary": (str,)},
    "vllm": {**_HTTP_OPTIONS, "continuous_usage_stats": (bool,), "metrics_truth": (bool,)},
    "ollama": {"keep_alive": (str, int, float), "options": (dict,), "pid": (int,)},
    "vllm-inprocess": {
        "isolate": (bool,),
        "dtype": (str,),
        "enforce_eager": (bool,),
        "gpu_memory_utilization": _NUM,
    },
    "synthetic": {
        "tokens_per_s": _NUM,
        "ttft_ms": _NUM,
        "load_ms": _NUM,
        "fail_after": (int,),
        "fail_load": (str,),
        "text": (str,),
        "load_stderr": (str,),
        "reasoning_tokens": (int,),
        "think_tags": (bool,),
        "tool_call": (str,),
        "isolate": (bool,),
    },
    "replay": {"file": (str,), "speed": _NUM},
}

# In-process kinds whose native code could crash the process that runs it: by default
# they run in a worker process infertop owns (tui/engines/worker.py); ``isolate = false``
# in ``[engines.NAME.options]`` runs them in infertop's own process. Any other in-process
# kind may ask for a worker with ``isolate = true``.
ISOLATED_BY_DEFAULT = frozenset({"llamacpp", "vllm-inprocess"})
IN_PROCESS_KINDS = ISOLATED_BY_DEFAULT | {"synthetic"}


def register(
    kind: str,
    target: str,
    help_text: str = "",
    options: dict[str, tuple[type, ...]] | None = None,
) -> None:
    """Add an engine kind (``target`` = "module:Class", ``options`` it accepts)."""
    ENGINE_KINDS[kind] = target
    KIND_OPTIONS[kind] = dict(options or {})
    if help_text:
        KIND_HELP[kind] = help_text


def engine_class(kind: str) -> type[Engine]:
    try:
        target = ENGINE_KINDS[kind]
    except KeyError:
        known = ", ".join(sorted(ENGINE_KINDS))
        raise EngineError(f"unknown engine kind {kind!r} (known kinds: {known})") from None
    module_name, _, cls_name = target.partition(":")
    module = importlib.import_module(module_name)
    cls: type[Engine] = getattr(module, cls_name)
    return cls
