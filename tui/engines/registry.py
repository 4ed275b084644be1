"""Engine kinds → implementations, imported only when an engine of that kind is built."""

from __future__ import annotations

import importlib

from tui.engines.base import Engine, EngineError, EngineSpec

# kind -> "module:Class"; modules load lazily so a missing optional library only matters
# to the engine that needs it.
ENGINE_KINDS: dict[str, str] = {
    "llamacpp": "tui.engines.llamacpp:LlamaCppEngine",
    "openai": "tui.engines.openai_compat:OpenAICompatEngine",
    "llama-server": "tui.engines.llama_server:LlamaServerEngine",
    "vllm": "tui.engines.vllm:VLLMEngine",
    "ollama": "tui.engines.ollama:OllamaEngine",
    "vllm-inprocess": "tui.engines.vllm_inprocess:VLLMInProcessEngine",
    "synthetic": "tui.engines.synthetic:SyntheticEngine",
    "replay": "tui.engines.replay:ReplayEngine",
}

KIND_HELP: dict[str, str] = {
    "llamacpp": "llama.cpp in-process (llama-cpp-python), model = GGUF path or 'default'",
    "openai": "any OpenAI-compatible server at url (streaming chat or completions)",
    "llama-server": "llama.cpp's llama-server at url; its timings are the engine truth",
    "vllm": "vLLM's OpenAI server at url; engine truth from its /metrics",
    "ollama": "Ollama at url (native /api/chat; durations are the engine truth)",
    "vllm-inprocess": "vLLM in-process (AsyncLLM; needs the vllm extra), model = HF folder/name",
    "synthetic": "in-process synthetic token stream at options.tokens_per_s (demos, tests)",
    "replay": "plays a recorded session file (options.file) back at its recorded pace",
}


def register(kind: str, target: str, help_text: str = "") -> None:
    """Add an engine kind (``target`` = "module:Class")."""
    ENGINE_KINDS[kind] = target
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


def create_engine(spec: EngineSpec) -> Engine:
    """Build (not load) the engine a spec describes."""
    return engine_class(spec.kind)(spec)
