"""Perplexity of a GGUF model on a text, from the model's own logits (llama.cpp in-process).

Definition. The text is tokenized by the model's tokenizer (UTF-8, no BOS added, special
tokens not parsed): tokens t_0 … t_{N−1}. It is read in windows of W tokens (W = the
context given to llama.cpp) starting every S tokens (S = the stride, W/2 by default): a
window [b, min(b+W, N)) is evaluated from an empty context, and it scores each token
t_i (i ≥ 1) that no earlier window scored, as NLL_i = −log softmax(logits at i−1)[t_i],
the logits llama.cpp computed for position i−1 given t_b … t_{i−1}. Every token but t_0
is scored exactly once, with at least W − S tokens of context except in the first window.

    perplexity = exp( (1 / (N − 1)) · Σ_{i=1}^{N−1} NLL_i )

A lower number means the model finds the text less surprising. Numbers are comparable
only for the same text, tokenizer, W and S — the report states all four.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from tui.engines.base import EngineError

# Chapter 1 of a public-domain novel, written out for infertop (it may differ from the
# Gutenberg edition in small details of wording or punctuation; perplexities are only
# compared on the same text anyway). A famous text may be in a model's training data.
DEFAULT_TEXT_NAME = "pride-and-prejudice-ch1.txt"
DEFAULT_TEXT_SOURCE = (
    "Jane Austen, Pride and Prejudice (1813), chapter 1; public domain "
    "(Project Gutenberg eBook #1342)"
)
DEFAULT_WINDOW = 512


def default_text() -> str:
    """The public-domain text shipped in the package (tui/bench/data)."""
    data = resources.files("tui.bench.sweep").joinpath("data")  # one name a call: Python 3.10
    return data.joinpath(DEFAULT_TEXT_NAME).read_text("utf-8")


@dataclass(frozen=True)
class Window:
    """One evaluation: tokens [begin, end) from an empty context, scoring [first, end)."""

    begin: int
    end: int
    first: int


def windows(n_tokens: int, window: int, stride: int) -> list[Window]:
    """The windows that score tokens 1 … n_tokens−1 exactly once (see the module doc)."""
    if window < 2:
        raise ValueError(f"the perplexity window must be at least 2 tokens (got {window})")
    if not 1 <= stride <= window - 1:
        raise ValueError(f"the stride must be between 1 and window − 1 (got {stride})")
    out: list[Window] = []
    prev_end = 0
    for begin in range(0, max(n_tokens - 1, 0), stride):
        end = min(begin + window, n_tokens)
        out.append(Window(begin, end, max(prev_end, begin + 1)))
        prev_end = end
        if end == n_tokens:
            break
    return out


@dataclass(frozen=True)
class Perplexity:
    """A perplexity measurement and everything needed to reproduce it."""

    perplexity: float
    mean_nll: float  # nats per scored token
    scored_tokens: int  # N − 1
    text_tokens: int  # N
    window: int
    stride: int
    windows: int
    seconds: float  # wall time of tokenizing and evaluating (not of loading the model)
    model_path: str
    text_source: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def measure_perplexity(
    model_path: Path,
    text: str,
    text_source: str,
    window: int = DEFAULT_WINDOW,
    stride: int | None = None,
    n_threads: int | None = None,
) -> Perplexity:
    """Load ``model_path`` in this process and measure its perplexity on ``text``."""
    try:
        import llama_cpp
        import numpy as np
    except ImportError as e:  # pragma: no cover - depends on the install
        raise EngineError(f"llama-cpp-python is not installed ({e})") from None
    from tui.engines.inprocess.stderr_capture import captured_stderr

    stride = stride or window // 2
    with captured_stderr(True) as log:
        try:
            llm = llama_cpp.Llama(
                model_path=str(model_path),
                n_ctx=window,
                n_batch=window,
                n_threads=n_threads,
                logits_all=True,
                verbose=False,
            )
        except (ValueError, RuntimeError, OSError) as e:
            raise EngineError(
                f"llama.cpp could not load {model_path}: {log.last_line() or e}"
            ) from None
    try:
        t0 = time.perf_counter()
        tokens = llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)
        if len(tokens) < 2:
            raise EngineError("the perplexity text is too short: it needs at least 2 tokens")
        plan = windows(len(tokens), window, stride)
        total_nll = 0.0
        for w in plan:
            llm.reset()  # type: ignore[no-untyped-call]  # llama-cpp-python: untyped
            llm.eval(tokens[w.begin : w.end])
            # logits row j predicts the token at position begin + j + 1
            rows = np.asarray(llm.scores[w.first - w.begin - 1 : w.end - w.begin - 1], "f8")
            targets = np.asarray(tokens[w.first : w.end])
            peak = rows.max(axis=1)
            lse = peak + np.log(np.exp(rows - peak[:, None]).sum(axis=1))
            total_nll += float((lse - rows[np.arange(len(targets)), targets]).sum())
        seconds = time.perf_counter() - t0
    finally:
        llm.close()
    scored = len(tokens) - 1
    mean = total_nll / scored
    return Perplexity(
        perplexity=math.exp(mean),
        mean_nll=mean,
        scored_tokens=scored,
        text_tokens=len(tokens),
        window=window,
        stride=stride,
        windows=len(plan),
        seconds=seconds,
        model_path=str(model_path),
        text_source=text_source,
    )
