"""Conversation: the turns of one output pane; answers stream into Markdown widgets.

While an answer streams, it is shown as plain text in a cheap ``TailText`` box (its last
lines, wrapped; only the lines that changed are repainted). Complete blocks (up to a blank
line) go to the Markdown widget above it only when they would be seen there: while the
user has scrolled up (every ``COMMIT_S`` seconds), or once the tail is over ``TAIL_MAX``
characters. While the pane follows the stream, nothing is committed: each commit mounts
block widgets and lays out the whole screen (~25-45 ms here), which at one a second was
most of the UI's cost while it watched an engine (benchmarks/watch_cost.py). At the end
the tail is committed: the final answer is all Markdown (``turn.source == text``).

A long answer is kept in several Markdown widgets ("segments") of at most
``SEGMENT_BLOCKS`` blocks each: Textual re-arranges every block of the widget that changed
on each layout, so one widget holding a 40,000-token answer made each layout cost ~170 ms
(hundreds of blocks), while a full segment is never arranged again. A new segment starts
only where Markdown cannot join across it (tui/app/widgets/answer_segment.py).

A reasoning model's thinking streams into the same tail box, dimmed (class ``-thinking``),
while the status line counts its tokens; when the answer begins (its first answer text or
tool call) the reasoning folds into one line above the answer (a ``ReasoningFold``,
mounted once: tui/app/widgets/reasoning_fold.py) and the box, one line shorter so the
turn still fits the pane, streams the answer as above. A tool call is shown in the answer
as ``⚙ `name(arguments)` ``.

The pane is anchored to the bottom; scrolling up releases the anchor (auto-scroll stops)
and scrolling back to the end re-engages it (Textual's anchor behaviour).
"""

from __future__ import annotations

import math
import time
from functools import cached_property

from rich.cells import cell_len
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.geometry import Size
from textual.widget import Widget
from textual.widgets import Markdown, Static

from tui.app.tail import TailLines, scroll_step
from tui.app.textual_private import anchor_released
from tui.app.widgets.answer_segment import AnswerSegment, can_split_before
from tui.app.widgets.reasoning_fold import ReasoningFold, thought_title
from tui.app.widgets.sizes import laid_out_size
from tui.app.widgets.tail_text import TailText
from tui.core.events import ANSWER, REASONING, TOOL
from tui.core.safe_text import terminal_safe

COMMIT_S = 1.0  # at most this long between Markdown appends while the user scrolls back
COMMIT_FOLLOWING_S = math.inf  # the same while the pane follows the stream: never
TAIL_MAX = 100_000  # characters of plain tail that force a commit at the next block boundary
SEGMENT_BLOCKS = 24  # block widgets in a Markdown segment before a new one may start
TOOL_MARK = "⚙ "  # before a tool call in the answer


class Turn(Vertical):
    """One prompt, its streamed answer, and the one-line metrics summary."""

    DEFAULT_CSS = """
    Turn { height: auto; margin: 0 0 1 0; }
    Turn > .prompt { color: $accent; text-style: bold; }
    Turn > .answer { margin: 0; padding: 0; }
    Turn > .tail { padding: 0; display: none; }
    Turn > .tail.-thinking { color: $text-muted; text-style: italic; }
    Turn > .summary { color: $text-muted; }
    Turn > .summary.-error { color: $error; }
    Turn > .summary.-cancelled { color: $warning; }
    """

    def __init__(self, prompt: str, engine: str, request_id: str) -> None:
        super().__init__()
        self.prompt, self.engine, self.request_id = prompt, engine, request_id
        self.text = ""
        self._tail = ""  # streamed text not yet handed to the Markdown widget
        self._committed_at = 0.0
        self._streaming = False
        self._tail_height = 0
        self._lines: TailLines | None = None  # the tail, wrapped for the box
        self._prompt_fit = (0, 1)  # (width, the prompt's lines at that width)
        self.finished = False
        self.summary = ""
        self._reasoning: list[str] = []  # the model's thinking, as shown (terminal-safe)
        self.fold: ReasoningFold | None = None  # the reasoning, once the answer began
        self.thinking = False  # the tail box shows reasoning (no answer yet)
        self._answering = False  # answer text or a tool call came
        self._in_tool = False  # a tool call's code span is open
        self._thought = thought_title(None, None, False)

    def on_mount(self) -> None:
        # The tail box is a pane high from the start until the answer ends, so neither
        # the first token nor a growing answer changes the screen's layout while the
        # engine decodes: each change of the box's height laid the whole screen out twice
        # (the box, then the scroll sizes it changed), ~25 ms of the UI's time at 120x40,
        # once when the first token came and once per step as the box grew. The prompt
        # sits at the pane's top while the answer streams below it, the status line at
        # the pane's bottom; at the end the box goes and the answer takes its own height.
        self._size_box(self._box()[1])

    def fit_box(self) -> None:
        """Size the tail box to the pane, once mounted, until the answer ends."""
        if self.is_mounted and not self.finished:
            self._size_box(self._box()[1])

    def compose(self) -> ComposeResult:
        shown = self.prompt if len(self.prompt) <= 2000 else self.prompt[:2000] + " …"
        # a replayed prompt comes from a session file: terminal-safe like the answer
        yield Static(f"› {terminal_safe(shown)}", classes="prompt", markup=False)
        yield AnswerSegment("", classes="answer")
        yield TailText(classes="tail")
        yield Static(
            f"{self.engine} · waiting for the first token…", classes="summary", markup=False
        )

    @property
    def reasoning(self) -> str:
        """The model's thinking so far, as shown (terminal-safe)."""
        if len(self._reasoning) > 1:
            self._reasoning = ["".join(self._reasoning)]  # joined once per read
        return self._reasoning[0] if self._reasoning else ""

    @property
    def answer(self) -> Markdown:
        """The Markdown segment being streamed into (the last one)."""
        return self.query(".answer").last(Markdown)

    @property
    def source(self) -> str:
        """The Markdown source of the whole answer, across segments."""
        return "".join(segment.source for segment in self.query(".answer").results(Markdown))

    async def append(self, fragment: str, part: str = ANSWER) -> None:
        """Show more of the answer (``part``: what the text is, tui/core/events.py). The
        model's text is untrusted: it is made terminal-safe here, before any path (the
        plain tail, the Markdown commits, the fold) sees it; the session log and the next
        turn's messages keep the raw text."""
        if not fragment:
            return
        fragment = terminal_safe(fragment)
        if part == REASONING:
            await self._think(fragment)
            return
        if self.thinking:
            await self._fold_thinking()
        fragment = self._mark_tool(fragment, part == TOOL)
        if not self._answering:
            self._answering = self._streaming = True
            self._committed_at = time.monotonic()
            self._say(f"{self.engine} · streaming…")
        self.text += fragment
        self._tail += fragment
        width, limit = self._box()
        due = time.monotonic() - self._committed_at >= self._commit_every()
        due = due or len(self._tail) > TAIL_MAX
        # The tail keeps (at least) what the box shows: only blocks that end above it are
        # committed.
        above = len(self._tail) - limit * (width + 1)
        cut = self._tail.rfind("\n\n", 0, above) if above > 0 else -1
        if cut >= 0 and due:
            head, self._tail = self._tail[: cut + 2], self._tail[cut + 2 :]
            self._lines = None  # the tail lost its head: wrap it anew
            await self._commit(head)
        self._show_tail(width, limit, fragment)

    async def _think(self, fragment: str) -> None:
        """Reasoning: dimmed in the tail box until the answer begins; after that (a
        model that thinks again between parts of its answer) into the fold."""
        self._reasoning.append(fragment)
        self._streaming = True
        if self._answering or self.fold is not None:
            await self._mount_fold(fragment)
            return
        if not self.thinking:
            self.thinking = True
            self._tail_box.add_class("-thinking")
            self._say(f"{self.engine} · thinking…")
        self._tail += fragment
        if len(self._tail) > TAIL_MAX:  # the box shows the end of it: keep the end
            self._tail, self._lines = self._tail[-TAIL_MAX // 2 :], None
        width, limit = self._box()
        self._show_tail(width, limit, fragment)

    async def _fold_thinking(self) -> None:
        """The answer begins: the reasoning leaves the tail box for the fold."""
        self.thinking = False
        self._tail, self._lines = "", None
        self._tail_box.remove_class("-thinking")
        await self._mount_fold()

    async def _mount_fold(self, fragment: str = "") -> None:
        """The fold above the answer, mounted once (one layout) with the reasoning so
        far; then ``fragment``, reasoning that came after, is added to it."""
        if self.fold is None:
            self.fold = ReasoningFold(self.reasoning, self._thought)
            await self.mount(self.fold, before=self.query(".answer").first())
        else:
            self.fold.add(fragment)

    def _mark_tool(self, fragment: str, tool: bool) -> str:
        """A tool call is shown as ``⚙ `name(arguments)` `` on a paragraph of its own."""
        if tool and not self._in_tool:
            self._in_tool = True
            lead = "\n\n" if self.text and not self.text.endswith("\n\n") else ""
            return f"{lead}{TOOL_MARK}`{fragment}"
        if not tool and self._in_tool:
            self._in_tool = False
            return f"`\n\n{fragment.lstrip()}"
        return fragment

    def show_thought(self, thinking_ms: float | None, tokens: int | None, estimated: bool) -> None:
        """The fold's line: how long the model thought and in how many tokens."""
        self._thought = thought_title(thinking_ms, tokens, estimated)
        if self.fold is not None:
            self.fold.title = self._thought

    def show_thinking(self, tokens: int, estimated: bool) -> None:
        """While the model thinks: its reasoning tokens so far on the status line."""
        if self.thinking and not self.finished:
            est = " (est.)" if estimated else ""
            self._say(f"{self.engine} · thinking… {tokens} tokens{est}")

    def _commit_every(self) -> float:
        """Seconds between commits: COMMIT_FOLLOWING_S while the pane follows the stream
        (the tail shows what is on screen), COMMIT_S once the user scrolled up (what lies
        above the box must be there to read)."""
        following = getattr(self.parent, "following", False)
        return COMMIT_FOLLOWING_S if following else COMMIT_S

    async def _commit(self, text: str) -> None:
        self._committed_at = time.monotonic()
        if not text:
            return
        segment = self.answer
        if len(segment.children) >= SEGMENT_BLOCKS and can_split_before(segment.source, text):
            segment = AnswerSegment("", classes="answer")
            await self.mount(segment, before=self.query_one(".tail", TailText))
        await segment.append(text)

    def _show_tail(self, width: int, limit: int, added: str = "") -> None:
        """Show the last ``limit`` lines of the tail, wrapped to ``width``, in the box (a
        pane high: see :meth:`on_mount`), so most updates repaint only the box's last
        line, not the whole screen. ``added``: what was appended to the tail since the
        last call (wrapped on its own, the lines above stay as they are)."""
        wrapped = self._lines
        if wrapped is None or (wrapped.width, wrapped.limit) != (width, limit):
            wrapped = self._lines = TailLines(width, limit)
            wrapped.reset(self._tail)
        else:
            wrapped.add(added)
        self._size_box(limit)  # the same height unless the pane was resized
        self._tail_box.show(wrapped.view(scroll_step(limit)))

    def _size_box(self, height: int) -> None:
        """The tail box's height (0: hidden); a change lays out the screen."""
        if height != self._tail_height:
            self._tail_height = height
            box = self._tail_box
            box.styles.height = height
            box.display = height > 0

    def _say(self, text: str) -> None:
        """Show ``text`` on the summary line: a repaint, and a layout only where its
        height may change (a line that fits its width before and after keeps it)."""
        line = self.query_one(".summary", Static)
        width = line.size.width
        shown = line.content
        fits = all(
            isinstance(t, str) and 0 < cell_len(t) <= width and "\n" not in t for t in (shown, text)
        )
        line.update(text, layout=not fits)

    @cached_property
    def _tail_box(self) -> TailText:  # composed once: looked up once (a frame's append)
        return self.query_one(".tail", TailText)

    def _box(self) -> tuple[int, int]:
        """(width, most lines) of the tail box: the turn's width (the pane's, before the
        turn is laid out), and the pane's height less the prompt's lines, the summary line
        and the turn's margin. So a new turn fills the pane exactly: one a line over it
        (a prompt that wraps) made the pane's scrollbar appear, which lays the whole
        screen out again, as the engine begins to decode."""
        pane = self.parent if isinstance(self.parent, Widget) else None
        width = laid_out_size(self).width
        if width <= 8 and pane is not None:
            width = pane.scrollable_content_region.width
        width = width if width > 8 else 76
        height = laid_out_size(pane).height if pane is not None else 0
        if height <= 6:
            return width, 24
        fold = 1 if self.fold is not None else 0  # its one line, while folded
        return width, max(4, height - self._prompt_lines(width) - 2 - fold)

    def _prompt_lines(self, width: int) -> int:
        """The prompt's height in lines at ``width`` (kept until the width changes)."""
        if self._prompt_fit[0] != width:
            line = self.query_one(".prompt", Static)
            height = line.get_content_height(Size(width, 0), self.app.size, width)
            self._prompt_fit = (width, max(1, height))
        return self._prompt_fit[1]

    def waiting(self, why: str) -> None:
        """Before the first token: say why this answer has not started (A/B in turn)."""
        if not self._streaming and not self.finished:
            self._say(f"{self.engine} · {why}")

    async def finish(self, summary: str, state: str = "") -> None:
        """Commit the tail and show the summary; ``state``: '', 'cancelled' or 'error'."""
        if self.thinking:  # no answer came after the reasoning: it folds all the same
            await self._fold_thinking()
        if self._in_tool:
            self._in_tool = False
            self.text += "`"
            self._tail += "`"
        text, self._tail = self._tail, ""
        self._lines = None
        await self._commit(text)
        self._tail_box.show([])
        self._size_box(0)
        if state == "cancelled":
            await self.answer.append("\n\n*[cancelled — partial answer kept]*")
        self.finished = True
        self.summary = f"{self.engine} · {summary}"
        line = self.query_one(".summary", Static)
        line.update(terminal_safe(self.summary))
        if state:
            line.add_class(f"-{state}")

    def add_to_summary(self, text: str) -> None:
        """Append to the summary line (what is known only later: the answer's energy)."""
        self.summary = f"{self.summary} · {text}"
        self.query_one(".summary", Static).update(terminal_safe(self.summary))


class Conversation(VerticalScroll):
    """The turns of one output pane (slot A or B)."""

    # The scrollbar has a gutter of its own (one column, where the right padding was), so
    # the text is as wide with it as without: when an answer first overflows the pane,
    # nothing re-wraps (a 2-column bar appearing narrowed every Turn, re-wrapped every
    # Markdown block and laid the screen out twice more mid-stream; the UI thread while
    # streaming, benchmarks/watch_cost.py: 5.2 -> 4.5 % of a core at 120x40).
    DEFAULT_CSS = """
    Conversation {
        height: 1fr;
        padding: 0 0 0 1;
        scrollbar-gutter: stable;
        scrollbar-size-vertical: 1;
    }
    """

    def on_mount(self) -> None:
        self.anchor()

    def on_resize(self) -> None:
        # A pane that changed height (a terminal resized; the prompt box keeps its height
        # until the answer ends: PromptInput.clear_holding_height) re-sizes the streaming
        # answer's tail box in this layout's second pass, not at its next token.
        last = self.children[-1] if self.children else None
        if isinstance(last, Turn):
            last.fit_box()

    async def add_turn(self, prompt: str, engine: str, request_id: str) -> Turn:
        turn = Turn(prompt, engine, request_id)
        await self.mount(turn)
        self.anchor()  # a new prompt is the user's own action: follow it again
        return turn

    @property
    def turns(self) -> list[Turn]:
        return list(self.query(Turn))

    @property
    def following(self) -> bool:
        """True while auto-scroll is on (anchored and not released by the user)."""
        return self.is_anchored and not anchor_released(self)

    async def clear(self) -> None:
        await self.remove_children()
