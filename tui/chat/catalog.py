"""What the chat can switch to beyond config: servers discovery found, the models each
server offers, and which of them is "the same model" as another engine's (for A/B).

Headless: the TUI's discovery worker fills it, the palette and the A/B picker read it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tui.config import Config
from tui.engines.base import EngineSpec
from tui.engines.inprocess.llama_builds import embedded_kind, is_llama_cpp_kind
from tui.engines.servers.discovery import FOUND, PortFinding

if TYPE_CHECKING:  # httpx stays off the start-up path
    from tui.engines.servers.server_models import ServerModel


@dataclass(frozen=True)
class Choice:
    """An engine (and a model on it; None: the engine's own) a slot could use."""

    engine: str
    model: str | None
    details: str = ""
    same_model: bool = False  # the same model as slot A's, on another engine

    def label(self) -> str:
        text = self.engine if self.model is None else f"{self.engine} › {self.model}"
        return f"{text} ({self.details})" if self.details else text


@dataclass
class Catalog:
    findings: list[PortFinding] = field(default_factory=list)
    discovered: list[str] = field(default_factory=list)  # engine names added by discovery
    models: dict[str, list[ServerModel]] = field(default_factory=dict)  # engine -> models

    def add_found(self, config: Config, findings: list[PortFinding]) -> list[str]:
        """Add each server found to ``config``'s engines (a name already taken by
        config is kept as config has it); returns the names added."""
        self.findings = list(findings)
        added = []
        for f in findings:
            if f.status != FOUND or f.spec is None or f.spec.name in config.engines:
                continue
            config.engines[f.spec.name] = f.spec
            self.discovered.append(f.spec.name)
            added.append(f.spec.name)
        return added

    def model_choices(self, config: Config) -> list[Choice]:
        """Every model of every listed engine, the one it uses now first."""
        out = []
        for engine, models in self.models.items():
            if engine not in config.engines:
                continue
            current = config.engines[engine].model
            ordered = sorted(models, key=lambda m: m.name != current)
            out += [Choice(engine, m.name, m.details()) for m in ordered]
        return out

    def ab_candidates(self, config: Config, a_engine: str) -> list[Choice]:
        """What slot B could be, the same model as A's on another engine first (same
        GGUF file size, or same model name), then the other engines and models."""
        a_spec = config.engines[a_engine]
        a_name, a_size = model_identity(a_spec.model, self.models.get(a_engine, []))
        seen: set[tuple[str, str | None]] = {(a_engine, a_spec.model)}
        same: list[Choice] = []
        other: list[Choice] = []
        for engine, spec in config.engines.items():
            models = self.models.get(engine)
            if not models:
                if (engine, spec.model) in seen or engine == a_engine:
                    continue
                seen.add((engine, spec.model))
                b_name, b_size = model_identity(spec.model, [])
                match = engine != a_engine and same_model(a_name, a_size, b_name, b_size)
                (same if match else other).append(Choice(engine, None, spec.kind, match))
                continue
            for m in models:
                if (engine, m.name) in seen:
                    continue
                seen.add((engine, m.name))
                match = engine != a_engine and same_model(a_name, a_size, m.name, m.size_bytes)
                (same if match else other).append(Choice(engine, m.name, m.details(), match))
        discovered = set(self.discovered)
        other.sort(key=lambda c: c.engine not in discovered)  # found servers before config's
        return same + other


def is_discovered_name(name: str) -> bool:
    """Whether ``name`` has the form discovery gives its engines: ``kind:port``."""
    return re.fullmatch(r"[a-z][a-z-]*:[0-9]{1,5}", name) is not None


def model_identity(model: str | None, listed: list[ServerModel]) -> tuple[str, int | None]:
    """(a comparable name, the file size where known) of the model an engine uses: a
    GGUF path's file (its size from disk), or a server's model (its size as listed)."""
    if not model:
        return "", None
    if model == "default":
        from tui.engines.files.default_model import default_model_path

        path = default_model_path()
        model = str(path) if path is not None else model
    size = next((m.size_bytes for m in listed if m.name == model), None)
    if size is None and model.lower().endswith(".gguf"):
        try:
            size = Path(model).expanduser().stat().st_size
        except OSError:
            size = None
    return model_key(model), size


def model_key(name: str) -> str:
    """A model name reduced for comparison: its last path part, no .gguf, lower case,
    letters and digits only ("/m/SmolLM2-135M.Q4_1.gguf" → "smollm2135mq41")."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    if base.lower().endswith(".gguf"):
        base = base[:-5]
    return re.sub(r"[^a-z0-9]", "", base.lower())


def same_model(a: str, a_size: int | None, b: str, b_size: int | None) -> bool:
    """The same model: the same file size (a GGUF), or the same name, where one name may
    be the other with more qualifiers ("smollm2:135m" and "SmolLM2-135M-Instruct.Q4_1")."""
    if a_size and b_size and a_size == b_size:
        return True
    a, b = model_key(a), model_key(b)
    if not a or not b:
        return False
    short, long = sorted((a, b), key=len)
    return short == long or (len(short) >= 6 and long.startswith(short))


def gguf_engine(config: Config, path: Path, name: str | None = None) -> str:
    """The name of an in-process llama.cpp engine on the GGUF at ``path``, added to
    ``config``'s engines unless one already runs that file: ``gguf:NAME``, on the best
    llama.cpp build installed (tui/engines/inprocess/llama_builds.py)."""
    for engine, spec in config.engines.items():
        if is_llama_cpp_kind(spec.kind) and spec.model == str(path):
            return engine
    label = name or path.name
    if label.lower().endswith(".gguf"):
        label = label[:-5]
    base = f"gguf:{label}"
    engine, n = base, 1
    while engine in config.engines:
        n += 1
        engine = f"{base} ({n})"
    # on llama.cpp built for this CPU, else (until it is built) the prebuilt one
    config.engines[engine] = EngineSpec(name=engine, kind=embedded_kind(), model=str(path))
    return engine
