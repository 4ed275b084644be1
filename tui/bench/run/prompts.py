"""Bench prompts: distinct, and the same engine-counted token length for every engine.

Every request gets its own prompt: a fixed-width request number first (so no two prompts
share a prefix and no prefix cache can be reused), then an instruction, then filler words.
The filler length is calibrated per engine so the engine's own count of prompt tokens
(chat template included) hits the target: with the engine's tokenizer when it offers one
(``count_prompt_tokens`` hook), else with 1-token probe requests whose ``usage`` says how
many prompt tokens the engine counted, else estimated (and the report says so).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from tui.engines.base import GenerationRequest

_WORDS = (
    "river stone morning light garden window paper silver market winter harbor forest "
    "letter candle bridge valley yellow music orange castle engine mirror summer planet "
    "village doctor pocket finger island rabbit button thunder pencil bottle kitchen "
    "shadow ladder wooden basket orchard meadow lantern feather blanket compass travel "
    "quiet gentle careful honest narrow distant hollow golden simple bright"
).split()

INSTRUCTION = "Write a long, detailed story that continues these notes, and do not stop early:"
WORDS_PER_TOKEN_GUESS = 0.75


def filler(n_words: int) -> str:
    """n_words deterministic words (a fixed cycle with a stride, so no short repeats)."""
    n = len(_WORDS)
    return " ".join(_WORDS[(i * 7 + i // n) % n] for i in range(n_words))


def prompt_text(index: int, n_words: int) -> str:
    return f"Request {index:06d}. {INSTRUCTION} {filler(n_words)}"


@dataclass
class PromptShape:
    """How prompts are built for one engine, and how their length was established.

    ``method``: "engine tokenizer", "usage probe" or "estimate" (the engine counts no
    prompt tokens: the length is a guess of 0.75 words per token).
    """

    n_words: int
    target_tokens: int
    counted_tokens: int | None
    method: str
    probes: int = 0
    # engine tokens per filler word, from the two counted points nearest the target (None:
    # one point only): lengths other than the target are interpolated with it
    tokens_per_word: float | None = None

    def text(self, index: int) -> str:
        return prompt_text(index, self.n_words)

    def to_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


Counter = Callable[[GenerationRequest], Awaitable["int | None"]]


async def calibrate(
    target: int,
    make_request: Callable[[str], GenerationRequest],
    count: Counter,
    method: str,
    max_counts: int,
    text: Callable[[int, int], str] = prompt_text,
) -> PromptShape:
    """Find the filler length whose counted prompt length is closest to ``target``.

    ``count`` returns the engine's count for a request (None: it cannot count). Secant
    steps on words → tokens; at most ``max_counts`` counts. ``text(index, n_words)``
    makes the text whose filler is varied (the bench prompt unless told otherwise).
    """
    guess = max(1, round(target * WORDS_PER_TOKEN_GUESS))
    points: dict[int, int] = {}
    words = guess
    for _ in range(max_counts):
        n = await count(make_request(text(0, words)))
        if n is None:
            break
        points[words] = n
        if n == target:
            break
        words = _next_words(points, target)
        if words in points:
            break
    if not points:
        return PromptShape(guess, target, None, "estimate")
    best = min(points, key=lambda w: (abs(points[w] - target), points[w] > target))
    near = sorted(points, key=lambda w: abs(w - best))[:2]
    slope = None
    if len(near) == 2 and near[0] != near[1] and points[near[0]] != points[near[1]]:
        slope = (points[near[0]] - points[near[1]]) / (near[0] - near[1])
    shape = PromptShape(best, target, points[best], method, probes=len(points))
    shape.tokens_per_word = slope if slope and slope > 0 else None
    return shape


def _next_words(points: dict[int, int], target: int) -> int:
    ws = sorted(points, key=lambda w: abs(points[w] - target))
    w1 = ws[0]
    slope = 1 / WORDS_PER_TOKEN_GUESS
    if len(ws) > 1:
        w2 = ws[1]
        if points[w1] != points[w2] and w1 != w2:
            slope = (points[w1] - points[w2]) / (w1 - w2)
    if slope <= 0:
        slope = 1 / WORDS_PER_TOKEN_GUESS
    step = round((target - points[w1]) / slope)
    if step == 0:
        step = 1 if points[w1] < target else -1
    return max(1, w1 + step)
