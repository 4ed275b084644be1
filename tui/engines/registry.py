"""Engine kinds → implementations, imported only when an engine of that kind is built."""

from __future__ import annotations

import dataclasses
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


# In-process kinds whose native code could crash the process that runs it: by default
# they run in a worker process infertop owns (tui/engines/worker.py); ``isolate = false``
# in ``[engines.NAME.options]`` runs them in infertop's own process. Any other in-process
# kind may ask for a worker with ``isolate = true``.
ISOLATED_BY_DEFAULT = frozenset({"llamacpp", "vllm-inprocess"})
IN_PROCESS_KINDS = ISOLATED_BY_DEFAULT | {"synthetic"}


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


def runs_in_worker(spec: EngineSpec) -> bool:
    """Whether this engine runs in a worker process (see ISOLATED_BY_DEFAULT)."""
    if spec.kind not in IN_PROCESS_KINDS:
        return False
    isolate = spec.options.get("isolate", spec.kind in ISOLATED_BY_DEFAULT)
    if not isinstance(isolate, bool):
        raise EngineError(f"engine {spec.name!r}: options.isolate must be true or false")
    return isolate


def create_engine(spec: EngineSpec) -> Engine:
    """Build (not load) the engine a spec describes."""
    if runs_in_worker(spec):
        from tui.engines.worker import worker_class

        engine_class(spec.kind)  # an unknown kind fails here, in this process
        return worker_class(spec.kind, ENGINE_KINDS[spec.kind])(spec)
    options = {k: v for k, v in spec.options.items() if k != "isolate"}
    if options != spec.options:
        spec = dataclasses.replace(spec, options=options)
    return engine_class(spec.kind)(spec)
