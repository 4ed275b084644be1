"""Constants and small helpers for UI tests (``tests.app.app_support``)."""

from __future__ import annotations

from tui.app.widgets.conversation import Conversation, Turn
from tui.app.widgets.prompt import PromptInput

SIZE = (120, 36)

LOCAL = """
[engines.local]
kind = "llamacpp"
model = "default"
n_threads = 1
"""

SYNTH = """
[engines.synth]
kind = "synthetic"
options = { tokens_per_s = 200, ttft_ms = 15 }
"""


def gen(max_tokens: int = 12) -> str:
    return f"[generation]\nmax_tokens = {max_tokens}\ntemperature = 0.0\nseed = 7\n"


def turns(app, slot: str = "A") -> list[Turn]:  # type: ignore[no-untyped-def]
    """The turns of output pane ``slot`` ("A", or "B" in A/B mode)."""
    return app.chat.query_one(f"#conv-{slot}", Conversation).turns


def summary(turn: Turn) -> str:
    """A turn's one-line summary (its metrics, or why it ended), as drawn."""
    return str(turn.query_one(".summary").render())


async def submit(pilot, text: str) -> None:  # type: ignore[no-untyped-def]
    """Type ``text`` into the prompt and press Enter."""
    prompt = pilot.app.chat.query_one(PromptInput)
    prompt.load_text(text)
    prompt.focus()
    await pilot.press("enter")
