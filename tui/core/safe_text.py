"""The one filter every untrusted text passes before it reaches a terminal.

Model output, model names, finish reasons, server error bodies, ssh stderr, exporter
labels, replayed text and fleet cells come from programs infertop does not control. Raw,
a terminal obeys the control sequences in them: OSC 52 writes the clipboard, OSC 0 sets
the window title, CSI clears the screen or moves the cursor over earlier lines, and C1
bytes (U+0080..U+009F) are the same introducers in one character. So before such text is
shown:

- C0 controls other than newline and tab, and DEL, become their visible Unicode control
  pictures (ESC is ``␛``, BEL ``␇``, DEL ``␡``): the sequence is shown, never obeyed;
- a CR before LF is dropped (CRLF is a line end); any other CR becomes ``␍`` (a bare CR
  would move the cursor back over what the line already printed);
- C1 controls become U+FFFD (``�``).

Everything else passes unchanged, in one ``str.translate`` (linear in the text's length;
each character is judged on its own, so a sequence split across stream chunks is made
safe piece by piece). :func:`terminal_label` also folds newlines and tabs to spaces and
cuts the text short, for one-line places (names, reasons, table cells), and turns the
explicit bidirectional controls (embeddings, overrides and isolates: U+202A–U+202E,
U+2066–U+2069) into U+FFFD: in a terminal that lays out bidirectional text, a right-to-left
override in a server's model name would run to the end of the line and show infertop's
own words and numbers after it reversed (``123 tok/s`` as ``s/kot 321``). A model's answer
(:func:`terminal_safe`) keeps them: there they are text a writer of Arabic or Hebrew may
use, and they end with the answer's line.

Textual reads markup in most places text reaches it: a notification, a ``Static`` or
``Label``, a border title, an option list's line, a command palette line. There a server's
error ``overloaded [/]`` is a tag with nothing to close (Textual raises, and the app
exits), ``[@click=app.quit]x[/]`` a live action and ``[link='…']`` a live link.
:func:`markup_safe` and :func:`markup_label` are this filter's twins for those places:
the same text, terminal-safe, with every ``[`` escaped as ``\\[``, so Textual's markup
reader shows it exactly as it is and reads no tag in it (tests/app/test_markup_text.py
checks the round trip on every mix of brackets, backslashes and tag characters). The
escaped text is a whole markup string, or its end: a tag written right after it would
meet a trailing backslash. Rich's own markup (a ``DataTable``'s ``str`` cells, a Rich
``Table``) escapes differently: such places are given Rich ``Text`` or Textual
``Content`` objects, which no one reads markup in.

The session log and ``run --json`` keep the raw text: a record says what was sent, and
JSON escapes control characters itself.
"""

from __future__ import annotations

_PICTURES = {c: 0x2400 + c for c in range(0x20) if c not in (0x09, 0x0A)}
_PICTURES[0x7F] = 0x2421  # ␡
_C1 = dict.fromkeys(range(0x80, 0xA0), 0xFFFD)
_TABLE: dict[int, int] = {**_PICTURES, **_C1}
_BIDI_CONTROLS = [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]
_LABEL_TABLE: dict[int, int] = {
    **_TABLE,
    0x09: 0x20,
    0x0A: 0x20,
    **dict.fromkeys(_BIDI_CONTROLS, 0xFFFD),
}
_UNSAFE = frozenset(chr(c) for c in _TABLE)


def terminal_safe(text: str) -> str:
    """``text`` with every terminal control character made visible (see the module
    docstring); newlines and tabs kept."""
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    return text.translate(_TABLE)


def terminal_label(text: object, limit: int = 200) -> str:
    """A one-line, terminal-safe form of ``text`` (any object: its ``str``), at most
    ``limit`` characters (an ellipsis marks a cut)."""
    s = text if isinstance(text, str) else str(text)
    if len(s) > limit:
        s = s[: max(0, limit - 1)] + "…"
    return s.replace("\r\n", " ").translate(_LABEL_TABLE)


def markup_escape(text: str) -> str:
    """``text`` as Textual content markup that shows it exactly: every ``[`` escaped
    (Textual turns ``\\[`` back into ``[`` and opens no tag there; nothing else is
    special to it). Only for text that is already terminal-safe."""
    return text.replace("[", "\\[")


def markup_safe(text: str) -> str:
    """:func:`terminal_safe`, then :func:`markup_escape`: for any place Textual reads
    markup in (a notification, a ``Static``, a border title, a palette line)."""
    return markup_escape(terminal_safe(text))


def markup_label(text: object, limit: int = 200) -> str:
    """:func:`terminal_label`, then :func:`markup_escape`: a one-line form of ``text``
    (at most ``limit`` characters shown) for a place Textual reads markup in."""
    return markup_escape(terminal_label(text, limit))


def is_terminal_safe(text: str) -> bool:
    """True when :func:`terminal_safe` would change nothing but CRLF line ends."""
    return _UNSAFE.isdisjoint(text.replace("\r\n", "\n"))
