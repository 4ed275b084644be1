"""The bench's workload: what each request asks for.

By default every request gets a distinct prompt of ``--prompt-tokens`` engine-counted
tokens and ``--max-tokens`` output tokens (tui/bench/run/prompts.py). Here:

- **Length distributions** (``--input-len`` / ``--output-len``): ``fixed:N``,
  ``uniform:A,B`` (integers A..B, each equally likely), ``normal:MEAN,SD`` (rounded,
  truncated to at least 1) or ``file:PATH`` (one length a line: each request draws one of
  them, each line equally likely — the file's empirical distribution). Request i draws
  its lengths from ``Random(seed·1000003 + i)``, so a request's lengths do not depend on
  the order requests are made in. An input length L is reached by interpolating the
  filler's words with the engine's tokens per word measured at calibration (two counted
  points; with one, 1/0.75, an estimate); the report sets each request's asked length
  beside the engine's count.
- **Dataset** (``--dataset FILE``, tui/bench/run/dataset.py): request i sends prompt
  i mod n of the file, verbatim (its length is the prompt's own).
- **Shared system prompt** (``--shared-prefix N``): every request starts with the same
  system message of about N tokens (filler words at the measured tokens per word), so
  an engine's prefix cache can reuse it; ``--prefix-cache`` asks for reuse
  (llama-server's ``cache_prompt``; vLLM caches prefixes by its own setting). The
  engine's cached-token counts are in the report where it gives them.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tui.bench.run.dataset import Dataset, DatasetError, load_dataset
from tui.bench.run.prompts import WORDS_PER_TOKEN_GUESS, PromptShape, filler, prompt_text
from tui.engines.base import GenerationRequest

KINDS = ("fixed", "uniform", "normal")
MAX_LENGTH = 1_000_000
PREFIX_LEAD = "You are a careful assistant. Background notes shared by every user:"


class WorkloadError(ValueError):
    """A workload option that does not parse; the message names the option."""


@dataclass(frozen=True)
class LengthDist:
    kind: str
    a: float
    b: float = 0.0
    values: tuple[int, ...] = ()  # file: the lengths read from it

    def draw(self, rng: random.Random) -> int:
        if self.kind == "fixed":
            return int(self.a)
        if self.kind == "file":
            return rng.choice(self.values)
        if self.kind == "uniform":
            return rng.randint(int(self.a), int(self.b))
        return max(1, round(rng.gauss(self.a, self.b)))


LENGTHS_MAX_BYTES = 16 * 2**20
LENGTHS_MAX_VALUES = 1_000_000


@functools.lru_cache(maxsize=8)
def lengths_file(path: str, flag: str) -> tuple[int, ...]:
    """Lengths from a file (untrusted): one whole number 1..MAX_LENGTH a line, blank lines
    and lines starting with # skipped; at most 16 MiB and 1,000,000 values; an error names
    the file and the line."""
    try:
        with open(path, "rb") as f:
            raw = f.read(LENGTHS_MAX_BYTES + 1)
    except OSError as e:
        raise WorkloadError(f"{flag}: {path}: cannot read: {e.strerror or e}") from None
    if len(raw) > LENGTHS_MAX_BYTES:
        raise WorkloadError(f"{flag}: {path}: larger than {LENGTHS_MAX_BYTES} bytes: refused")
    out: list[int] = []
    for n, line in enumerate(raw.split(b"\n"), start=1):
        text = line.strip()
        if not text or text.startswith(b"#"):
            continue
        if not (text.isdigit() and len(text) <= 7 and 1 <= int(text) <= MAX_LENGTH):
            shown = text[:40].decode("ascii", "replace")
            raise WorkloadError(
                f"{flag}: {path}: line {n}: {shown!r} is not a length (1 to {MAX_LENGTH})"
            )
        if len(out) >= LENGTHS_MAX_VALUES:
            raise WorkloadError(f"{flag}: {path}: more than {LENGTHS_MAX_VALUES} lengths")
        out.append(int(text))
    if not out:
        raise WorkloadError(f"{flag}: {path}: no lengths in it")
    return tuple(out)


def parse_length(text: str, flag: str) -> LengthDist:
    kind, _, rest = text.partition(":")
    if kind == "file" and rest:
        return LengthDist("file", 0.0, 0.0, lengths_file(rest, flag))
    try:
        nums = [float(x) for x in rest.split(",")] if rest else []
    except ValueError:
        nums = []
    shapes = {"fixed": 1, "uniform": 2, "normal": 2}
    if kind not in shapes or len(nums) != shapes[kind] or any(x != x for x in nums):
        raise WorkloadError(
            f"{flag} {text!r}: expected fixed:N, uniform:A,B, normal:MEAN,SD or file:PATH"
        )
    a, b = nums[0], (nums[1] if len(nums) > 1 else 0.0)
    if kind in ("fixed", "uniform") and (a != int(a) or b != int(b)):
        raise WorkloadError(f"{flag} {text!r}: lengths are whole numbers of tokens")
    if not 1 <= a <= MAX_LENGTH or (kind == "uniform" and not a <= b <= MAX_LENGTH):
        raise WorkloadError(f"{flag} {text!r}: lengths from 1 to {MAX_LENGTH}, A ≤ B")
    if kind == "normal" and not 0 <= b <= MAX_LENGTH:
        raise WorkloadError(f"{flag} {text!r}: SD from 0 to {MAX_LENGTH}")
    return LengthDist(kind, a, b)


@functools.lru_cache(maxsize=4)
def dataset(path: str) -> Dataset:
    """The dataset file's prompts, read once per path (DatasetError when unusable)."""
    return load_dataset(path)


def check_workload(plan: Any) -> None:
    """WorkloadError on options that do not parse or do not go together."""
    if plan.input_len:
        parse_length(plan.input_len, "--input-len")
    if plan.output_len:
        parse_length(plan.output_len, "--output-len")
    if plan.dataset and plan.input_len:
        raise WorkloadError("--dataset and --input-len: a dataset's prompts have their own length")
    if plan.dataset:
        try:
            dataset(plan.dataset)
        except DatasetError as e:
            raise WorkloadError(f"--dataset: {e}") from None
    if not 0 <= plan.shared_prefix <= MAX_LENGTH:
        raise WorkloadError(f"--shared-prefix must be 0 to {MAX_LENGTH} tokens")


def words_for(shape: PromptShape, tokens: int) -> int:
    """Filler words for a prompt of about ``tokens`` engine tokens (see the docstring)."""
    per_word = shape.tokens_per_word or 1 / WORDS_PER_TOKEN_GUESS
    base = shape.counted_tokens if shape.counted_tokens is not None else shape.target_tokens
    return max(1, shape.n_words + round((tokens - base) / per_word))


def prefix_text(shape: PromptShape, tokens: int) -> str:
    per_word = shape.tokens_per_word or 1 / WORDS_PER_TOKEN_GUESS
    return f"{PREFIX_LEAD} {filler(max(1, round(tokens / per_word)))}"


def request_maker(
    plan: Any, shape: PromptShape, request: Callable[[str, int | None], GenerationRequest]
) -> Callable[[int], GenerationRequest]:
    """Request i of the bench's workload (``request(text, max_tokens)`` builds the bench
    request: temperature, ignore_eos, no prompt cache)."""
    inputs = parse_length(plan.input_len, "--input-len") if plan.input_len else None
    outputs = parse_length(plan.output_len, "--output-len") if plan.output_len else None
    prompts = dataset(plan.dataset).prompts if plan.dataset else None
    system = prefix_text(shape, plan.shared_prefix) if plan.shared_prefix else None

    def make(i: int) -> GenerationRequest:
        rng = random.Random(plan.seed * 1_000_003 + i)
        asked_in = inputs.draw(rng) if inputs else None
        out_n = outputs.draw(rng) if outputs else plan.max_tokens
        if prompts is not None:
            text, target = prompts[i % len(prompts)], None
        elif asked_in is not None:
            text, target = prompt_text(i, words_for(shape, asked_in)), asked_in
        else:
            text, target = shape.text(i), plan.prompt_tokens
        req = request(text, out_n)
        if system is not None:
            req.messages.insert(0, {"role": "system", "content": system})
            target = None  # the prompt is the shared prefix + this one: not one target
        req.cache_prompt = bool(plan.prefix_cache)
        req.seed = plan.seed + i
        req.prompt_tokens_target = target
        return req

    return make
