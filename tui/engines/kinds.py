"""Engine kinds: one descriptor per kind (:class:`EngineKind`), the one place each kind's
facts are written: its name, the class that implements it (imported only when an engine
of that kind is built), the options it accepts, where it runs, and what infertop can ask
of it. Every module that treats kinds alike by what they are asks this registry."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from tui.engines.base import Engine, EngineError

OptionTypes = Mapping[str, tuple[type, ...]]


@dataclass(frozen=True)
class EngineKind:
    """What infertop knows of an engine kind before it builds an engine of that kind."""

    name: str  # as written in config: ``kind = "NAME"``
    target: str  # "module:Class" implementing it; imported only when an engine is built
    help: str = ""  # one line: what it is, what model / url / options mean for it
    # ``[engines.NAME.options]`` keys it accepts and their types: config validation refuses
    # anything else, so a typo is an error, not silently ignored
    options: OptionTypes = field(default_factory=dict)
    in_process: bool = False  # generation runs in infertop's process or a worker it owns
    # in-process and native code that could crash the process running it: by default in a
    # worker process infertop owns (tui/engines/inprocess/worker.py); ``isolate = false`` runs it in
    # infertop's own process. Any other in-process kind may ask for ``isolate = true``.
    isolated_by_default: bool = False
    # a client of an LLM server's HTTP API at ``url``: the server lists its models, and it
    # can stand behind ``infertop proxy`` (``--kind``)
    http: bool = False
    metrics: bool = False  # its server's Prometheus /metrics is read (fleet rows)
    # tui/engines/servers/detect.py tells its server from others by the server's own answers, so a
    # configured endpoint of this kind needs no probe ("openai" is the generic fallback)
    recognised: bool = False
    n_ctx_from_spec: bool = False  # its context size is its spec's n_ctx (no server to ask)
    serial: str = ""  # why it runs one request at a time ("" : it does not say)
    cold_restart: str = ""  # what close() + load() does, when that is a true cold start

    def __post_init__(self) -> None:
        # read-only, so a descriptor cannot be changed behind the registry's back
        object.__setattr__(self, "options", MappingProxyType(dict(self.options)))


_NUM = (int, float)
_HTTP_OPTIONS: dict[str, tuple[type, ...]] = {"extra_body": (dict,), "pid": (int,)}

_BUILT_IN = (
    EngineKind(
        "llamacpp",
        "tui.engines.inprocess.llamacpp:LlamaCppEngine",
        "llama.cpp in-process (llama-cpp-python), model = GGUF path or 'default'",
        {
            "quiet_stderr": (bool,),
            "seed": (int,),
            "isolate": (bool,),
            "use_extra_bufts": (bool, str),
            "type_k": (str,),
            "type_v": (str,),
        },
        in_process=True,
        isolated_by_default=True,
        n_ctx_from_spec=True,
        serial="in-process llama.cpp runs one request at a time",
        cold_restart="end the engine's worker process, start a new one and reload the model "
        "(timed; the OS file cache stays warm)",
    ),
    EngineKind(
        "openai",
        "tui.engines.http.openai_compat:OpenAICompatEngine",
        "any OpenAI-compatible server at url (endpoint: chat, completions or responses)",
        _HTTP_OPTIONS,
        http=True,
    ),
    EngineKind(
        "anthropic",
        "tui.engines.http.anthropic:AnthropicEngine",
        "a server speaking Anthropic's Messages API (/v1/messages) at url",
        _HTTP_OPTIONS,
        http=True,
    ),
    EngineKind(
        "llama-server",
        "tui.engines.http.llama_server:LlamaServerEngine",
        "llama.cpp's llama-server at url; its timings are the engine truth",
        # binary: the llama-server infertop starts when the engine has a model and no url;
        # spec_type / draft_model: that server's speculative decoding (--spec-type, -md)
        {
            **_HTTP_OPTIONS,
            "timings_per_token": (bool,),
            "binary": (str,),
            "spec_type": (str,),
            "draft_model": (str,),
        },
        http=True,
        metrics=True,
        recognised=True,
    ),
    EngineKind(
        "vllm",
        "tui.engines.http.vllm:VLLMEngine",
        "vLLM's OpenAI server at url; engine truth from its /metrics",
        {**_HTTP_OPTIONS, "continuous_usage_stats": (bool,), "metrics_truth": (bool,)},
        http=True,
        metrics=True,
        recognised=True,
    ),
    EngineKind(
        "ollama",
        "tui.engines.http.ollama:OllamaEngine",
        "Ollama at url (native /api/chat; durations are the engine truth)",
        {"keep_alive": (str, int, float), "options": (dict,), "pid": (int,)},
        http=True,
        recognised=True,
    ),
    EngineKind(
        "vllm-inprocess",
        "tui.engines.inprocess.vllm_inprocess:VLLMInProcessEngine",
        "vLLM in-process (AsyncLLM; needs the vllm extra), model = HF folder/name",
        {
            "isolate": (bool,),
            "dtype": (str,),
            "enforce_eager": (bool,),
            "gpu_memory_utilization": _NUM,
        },
        in_process=True,
        isolated_by_default=True,
        cold_restart="shut down and restart the in-process vLLM engine and its worker (timed)",
    ),
    EngineKind(
        "synthetic",
        "tui.engines.inprocess.synthetic:SyntheticEngine",
        "in-process synthetic token stream at options.tokens_per_s (demos, tests)",
        {
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
        in_process=True,
    ),
    EngineKind(
        "replay",
        "tui.engines.inprocess.replay:ReplayEngine",
        "plays a recorded session file (options.file) back at its recorded pace",
        {"file": (str,), "speed": _NUM},
    ),
)

_KINDS: dict[str, EngineKind] = {k.name: k for k in _BUILT_IN}


def register(
    kind: str | EngineKind,
    target: str = "",
    help_text: str = "",
    options: OptionTypes | None = None,
) -> EngineKind:
    """Add (or replace) an engine kind: a descriptor, or its name, ``target`` =
    "module:Class", a line of help and the ``options`` it accepts (nothing else known)."""
    if isinstance(kind, str):
        kind = EngineKind(kind, target, help_text, options or {})
    _KINDS[kind.name] = kind
    return kind


def unregister(name: str) -> None:
    """Forget a kind :func:`register` added (tests); an unknown name is no error."""
    _KINDS.pop(name, None)


def kinds() -> tuple[EngineKind, ...]:
    """Every kind known now, built-in ones first, in the order they were registered."""
    return tuple(_KINDS.values())


def kind_names(where: Callable[[EngineKind], bool] | None = None) -> tuple[str, ...]:
    """The known kinds' names, sorted; with ``where``, only the kinds it holds for
    (``kind_names(lambda k: k.http)``)."""
    return tuple(sorted(k.name for k in _KINDS.values() if where is None or where(k)))


def find_kind(name: str) -> EngineKind | None:
    """The descriptor of kind ``name``; None when no such kind is known."""
    return _KINDS.get(name)


def engine_kind(name: str) -> EngineKind:
    """The descriptor of kind ``name``; EngineError naming the known kinds when unknown."""
    found = _KINDS.get(name)
    if found is None:
        raise EngineError(unknown_kind(name))
    return found


def unknown_kind(name: str) -> str:
    """The message for a kind no one registered: it and the known kinds."""
    return f"unknown engine kind {name!r} (known kinds: {', '.join(kind_names())})"


def engine_class(kind: str) -> type[Engine]:
    """The class implementing ``kind`` (its module imported now); EngineError when unknown."""
    module_name, _, cls_name = engine_kind(kind).target.partition(":")
    module = importlib.import_module(module_name)
    cls: type[Engine] = getattr(module, cls_name)
    return cls
