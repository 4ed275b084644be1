"""What discovery adds to the chat, without a screen: found servers joining the engines,
the model choices, what counts as "the same model", B's candidates in order, GGUF
engines, and the core pointing a slot at a model (one server's two models in A/B)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tui.chat.catalog import Catalog, gguf_engine, model_key, same_model
from tui.chat.core import ChatCore, Refused
from tui.config import parse_config
from tui.engines.base import EngineSpec
from tui.engines.servers.discovery import CLOSED, FOUND, NOT_LLM, PortFinding
from tui.engines.servers.server_models import ServerModel

CONFIG = """
default_engine = "local"
[engines.local]
kind = "synthetic"
model = "/m/SmolLM2-135M-Instruct.Q4_1.gguf"
[engines.hosted]
kind = "openai"
url = "https://api.example.com"
model = "gpt-x"
"""


def _found(kind: str, port: int, model: str) -> PortFinding:
    spec = EngineSpec(f"{kind}:{port}", kind, url=f"http://127.0.0.1:{port}", model=model)
    return PortFinding(port, FOUND, spec=spec)


def _catalog():  # type: ignore[no-untyped-def]
    cfg = parse_config(CONFIG, Path("t.toml"))
    cat = Catalog()
    added = cat.add_found(
        cfg,
        [
            _found("vllm", 8000, "Qwen/Qwen2.5-7B-Instruct"),
            PortFinding(3000, NOT_LLM, "a web page"),
            _found("ollama", 11434, "qwen2.5:7b"),
            PortFinding(1234, CLOSED),
            _found("llama-server", 8080, "/srv/smollm2-135m-instruct-q4_1.gguf"),
        ],
    )
    assert added == ["vllm:8000", "ollama:11434", "llama-server:8080"]
    cat.models["ollama:11434"] = [
        ServerModel("qwen2.5:7b", 4_683_087_332, "7.6B", "Q4_K_M"),
        ServerModel("smollm2:135m", 98_362_432, "135M", "Q4_1"),
    ]
    cat.models["vllm:8000"] = [ServerModel("Qwen/Qwen2.5-7B-Instruct", context=32768)]
    return cfg, cat


def test_found_servers_join_the_engines_once() -> None:
    cfg, cat = _catalog()
    assert list(cfg.engines) == [
        "local",
        "hosted",
        "vllm:8000",
        "ollama:11434",
        "llama-server:8080",
    ]
    again = cat.add_found(cfg, [_found("vllm", 8000, "other")])
    assert again == [] and cfg.engines["vllm:8000"].model == "Qwen/Qwen2.5-7B-Instruct"


def test_model_choices_put_the_current_model_first() -> None:
    cfg, cat = _catalog()
    labels = [c.label() for c in cat.model_choices(cfg)]
    assert labels == [
        "ollama:11434 › qwen2.5:7b (7.6B · Q4_K_M · 4.7 GB)",
        "ollama:11434 › smollm2:135m (135M · Q4_1 · 98 MB)",
        "vllm:8000 › Qwen/Qwen2.5-7B-Instruct (ctx 32768)",
    ]


def test_b_candidates_same_model_first_then_found_then_config() -> None:
    cfg, cat = _catalog()
    got = [(c.engine, c.model, c.same_model) for c in cat.ab_candidates(cfg, "local")]
    assert got == [
        ("ollama:11434", "smollm2:135m", True),  # same name, more qualifiers on A's side
        ("llama-server:8080", None, True),  # the same file name on another server
        ("vllm:8000", "Qwen/Qwen2.5-7B-Instruct", False),
        ("ollama:11434", "qwen2.5:7b", False),
        ("hosted", None, False),  # config's own engines last
    ]
    # from a server's model: the same model on the other server, and by size
    cfg.engines["ollama:11434"].model = "qwen2.5:7b"
    cat.models["llama-server:8080"] = [ServerModel("/srv/q.gguf", 4_683_087_332)]
    got = [(c.engine, c.model, c.same_model) for c in cat.ab_candidates(cfg, "ollama:11434")]
    assert got[:2] == [
        ("vllm:8000", "Qwen/Qwen2.5-7B-Instruct", True),  # the same name, qualified
        ("llama-server:8080", "/srv/q.gguf", True),  # the same size
    ]


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("SmolLM2-135M-Instruct.Q4_1.gguf", "smollm2:135m", True),
        ("/x/Qwen2.5-7B-Instruct-Q4_K_M.gguf", "qwen2.5:7b", True),
        ("qwen2.5:72b", "qwen2.5:7b", False),
        ("qwen2.5:7b", "Qwen2.5-7B", True),
        ("llama", "llama3.2:3b", False),  # too short a name to stand for another
        ("", "x", False),
    ],
)
def test_same_model_by_name(a: str, b: str, same: bool) -> None:
    assert same_model(a, None, b, None) is same


def test_same_model_by_size_and_keys() -> None:
    assert same_model("a-model", 123, "b-other", 123)
    assert not same_model("a-model", 123, "b-other", 124)
    assert model_key("C:\\m\\SmolLM2-135M.Q4_1.GGUF") == "smollm2135mq41"


def test_gguf_engines_are_named_once_per_file() -> None:
    cfg = parse_config(CONFIG, Path("t.toml"))
    a = gguf_engine(cfg, Path("/m/a/Model.Q4.gguf"))
    assert a == "gguf:Model.Q4" and cfg.engines[a].kind == "llamacpp"
    assert gguf_engine(cfg, Path("/m/a/Model.Q4.gguf")) == a  # the same file: the same engine
    assert gguf_engine(cfg, Path("/m/b/Model.Q4.gguf")) == "gguf:Model.Q4 (2)"
    assert gguf_engine(cfg, Path("/o/blobs/sha256-x"), "qwen2.5:7b") == "gguf:qwen2.5:7b"


def test_the_core_points_a_slot_at_a_model() -> None:
    cfg, _cat = _catalog()
    core = ChatCore(cfg, lambda e: None)
    name, stale = core.use_model("A", "ollama:11434", "smollm2:135m")
    assert (name, stale) == ("ollama:11434", None)
    assert core.slot_engine["A"] == "ollama:11434"
    assert cfg.engines["ollama:11434"].model == "smollm2:135m"
    # B on the same server with another model: an engine of its own, A keeps its model
    core.slot_engine["B"] = "local"
    name, _ = core.use_model("B", "ollama:11434", "qwen2.5:7b")
    assert name == "ollama:11434 › qwen2.5:7b"
    assert (
        cfg.engines[name].model == "qwen2.5:7b"
        and cfg.engines[name].url == cfg.engines["ollama:11434"].url
    )
    assert cfg.engines["ollama:11434"].model == "smollm2:135m"
    with pytest.raises(Refused, match="no engine named"):
        core.use_model("A", "nope", "m")
    core.busy = True
    with pytest.raises(Refused, match="still streaming"):
        core.use_model("A", "vllm:8000", "m")
