"""ThinkSplitter: a model's ``<think>…</think>`` block, told apart from its answer.

A reasoning model served without a reasoning parser (llama-server with
``--reasoning-format none``, vLLM without ``--reasoning-parser``, a raw completion)
writes its thinking into the answer's text, inside ``<think>`` and ``</think>``. When the
answer's text *begins* with ``<think>`` (blank space before it allowed), what follows up
to ``</think>`` is reasoning, and the text after it the answer; the tags themselves are
neither. Text that does not begin so passes through untouched from its first visible
character on (one attribute check per chunk after that).

A tag may be split across chunks, and blank text may come before it: text that could
still be blank space or the start of a tag is held back until a later chunk says what it
is, then emitted joined with that chunk's text, stamped when the *first* of it arrived
(TTFT stays the first token's time). The tags themselves are dropped; the token counts of
what was held or dropped move to the next chunk emitted, so per-chunk counts still add up
to the engine's.

Bounds: linear in the text. Held text is kept as its pieces, joined once when it goes
out; a chunk is looked at alone (after blank text only the chunk itself is stripped; after
the start of a tag only that start, under 7 characters, is joined to it). At most
:data:`BLANK_LIMIT` characters of blank text are held: past that, no ``<think>`` is
awaited any more, and the blank text and all after it are answer. Memory: the held text
is at most that much blank space and less than a tag.
"""

from __future__ import annotations

from collections.abc import Callable

from tui.core.events import ANSWER, REASONING, StreamEvent, TextChunk

OPEN = "<think>"
CLOSE = "</think>"
BLANK_LIMIT = 4096  # characters of blank text held before a <think>; past it: answer
_START, _IN, _OUT = 0, 1, 2


def _partial_suffix(text: str, tag: str) -> int:
    """The length of the longest end of ``text`` that is a proper start of ``tag``."""
    for n in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:n]):
            return n
    return 0


class ThinkSplitter:
    """Splits one answer's text into reasoning and answer (see the module docstring)."""

    __slots__ = (
        "state",
        "held",
        "held_chars",
        "tag_start",
        "held_t",
        "held_tokens",
        "passing",
        "after_close",
    )

    def __init__(self) -> None:
        self.state = _START
        self.held: list[str] = []  # the pieces of text held back, in order
        self.held_chars = 0
        self.tag_start = ""  # before a decision: the visible text held ("<thi"), if any
        self.held_t: int | None = None  # when the first held text arrived
        self.held_tokens: int | None = None
        self.passing = False  # decided: no think block; text passes untouched
        self.after_close = False  # the answer's first text after </think>: strip its start

    def _take(self, t_ns: int, text: str, tokens: int | None) -> tuple[int, str, int | None]:
        """Held text and counts joined with this chunk's, stamped when the first came."""
        if self.held_t is not None:
            t_ns = self.held_t
        if self.held:
            text = "".join(self.held) + text
        held = self.held_tokens
        self.held, self.held_chars, self.tag_start = [], 0, ""
        self.held_t, self.held_tokens = None, None
        if held is not None:
            tokens = held + (tokens or 0)
        return t_ns, text, tokens

    def _hold(self, t_ns: int, text: str, tokens: int | None) -> None:
        if text:
            if self.held_t is None:
                self.held_t = t_ns
            self.held.append(text)
            self.held_chars += len(text)
        if tokens is not None:
            self.held_tokens = (self.held_tokens or 0) + tokens

    def split(
        self, t_ns: int, text: str, tokens: int | None, emit: Callable[[StreamEvent], None]
    ) -> None:
        """One chunk of answer text, stamped ``t_ns``, carrying ``tokens``."""
        t_now = t_ns
        if self.state == _START:
            # what is visible of the held text and this chunk: the held text is blank
            # space, then perhaps the start of a tag (which is never blank)
            visible = self.tag_start + text if self.tag_start else text.lstrip()
            if not visible:  # blank: hold it, up to the bound
                self._hold(t_ns, text, tokens)
                if self.held_chars > BLANK_LIMIT:  # no tag will come: the text is answer
                    self.state, self.passing = _OUT, True
                    t_ns, text, tokens = self._take(t_ns, "", None)
                    emit(TextChunk(t_ns, text, tokens))
                return
            if len(visible) < len(OPEN) and OPEN.startswith(visible):
                self._hold(t_ns, text, tokens)  # "<thi": not decided yet
                self.tag_start = visible
                return
            t_ns, text, tokens = self._take(t_ns, text, tokens)
            if not visible.startswith(OPEN):
                self.state, self.passing = _OUT, True
                emit(TextChunk(t_ns, text, tokens))
                return
            self.state = _IN
            text = visible[len(OPEN) :]
            t_ns = t_now  # the tag is not text: what follows it came now
        else:
            t_ns, text, tokens = self._take(t_ns, text, tokens)
        if self.state == _IN:
            end = text.find(CLOSE)
            if end < 0:
                keep = _partial_suffix(text, CLOSE)
                if keep:
                    self._hold(t_ns if keep == len(text) else t_now, text[-keep:], None)
                    text = text[:-keep]
                if text:
                    emit(TextChunk(t_ns, text, tokens, REASONING))
                elif tokens is not None:
                    self.held_tokens = (self.held_tokens or 0) + tokens
                return
            thought, text = text[:end], text[end + len(CLOSE) :]
            self.state = _OUT
            self.after_close = True
            if thought:
                emit(TextChunk(t_ns, thought, tokens, REASONING))
                tokens = 0 if tokens is not None else None
            t_ns = t_now
        if self.after_close:
            text = text.lstrip()
            if not text:
                if tokens:
                    self.held_tokens = (self.held_tokens or 0) + tokens
                return
            self.after_close = False
            self.passing = True
        emit(TextChunk(t_ns, text, tokens, ANSWER))

    def flush(self, t_ns: int, emit: Callable[[StreamEvent], None]) -> None:
        """The end of the answer: text still held back, as what it was taken for."""
        if not self.held:
            return
        t_ns, text, tokens = self._take(t_ns, "", None)
        emit(TextChunk(t_ns, text, tokens, REASONING if self.state == _IN else ANSWER))
