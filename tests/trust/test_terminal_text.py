"""Row 3: what a server or model says never reaches the terminal as control sequences.

``infertop run`` runs under a real pseudo-terminal against the hostile server's ``ansi``
mode (OSC 52 clipboard write, OSC 0 title, CSI clear, a C1 CSI and BEL in the model's
text, its id and its finish reason; the same in an HTTP error body). What the terminal
receives must hold none of them, and show them visibly instead.
"""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import time

from tests.support import hostile_server as hs
from tui.core.safe_text import terminal_label, terminal_safe


def test_filter_shows_every_control_character_and_keeps_lines() -> None:
    raw = hs.EVIL_TEXT + "\r\nline 2\tcol\rback" + "".join(map(chr, range(0x80, 0xA0)))
    safe = terminal_safe(raw)
    assert not any(ch in safe for ch in hs.ESCAPES)
    assert all(not (0x80 <= ord(c) < 0xA0) for c in safe)
    assert all(c in "\n\t" or ord(c) >= 0x20 for c in safe if ord(c) < 0x80)
    assert "␛]52;c;cm0gLXJmIH4K␇" in safe  # shown, not obeyed
    assert "\nline 2\tcol␍back" in safe  # CRLF is a line end; a bare CR is shown
    assert terminal_safe("plain, ünïcode, 日本語\n") == "plain, ünïcode, 日本語\n"


def test_label_is_one_line_and_short() -> None:
    label = terminal_label(hs.EVIL_MODEL + "\nsecond line\ttab", limit=20)
    assert "\n" not in label and "\t" not in label and "\x1b" not in label
    assert len(label) == 20 and label.endswith("…")


def test_label_turns_bidi_controls_into_replacement_characters() -> None:
    """A right-to-left override in a name would reverse what follows it on the line;
    in a label every explicit embedding, override and isolate is U+FFFD. An answer's
    text keeps them (it is the writer's own line)."""
    controls = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
    label = terminal_label(f"model{controls} · 123 tok/s")
    assert label == "model" + "\ufffd" * 9 + " · 123 tok/s"
    assert terminal_label("שלום \u200f marks stay") == "שלום \u200f marks stay"
    assert terminal_safe("\u202eעברית\u202c\n") == "\u202eעברית\u202c\n"


def _run_in_pty(
    argv: list[str], env: dict[str, str], timeout: float = 60.0
) -> tuple[str, str, int]:
    """Run ``argv`` with stdout on a pseudo-terminal (stderr on a pipe); what the
    terminal got, what stderr got, the exit status."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, stdout=slave, stderr=subprocess.PIPE, env=env)
    os.close(slave)
    out = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:  # the child closed the terminal (EIO)
                break
            if not data:
                break
            out += data
        elif proc.poll() is not None:
            break
    os.close(master)
    _, err = proc.communicate(timeout=timeout)
    return out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), proc.returncode


def test_run_on_a_terminal_shows_no_control_sequence(hostile, launcher, clean_env) -> None:
    out, err, code = _run_in_pty(
        [*launcher, "run", "--url", f"{hostile}/ansi", "--prompt", "hi"], clean_env
    )
    assert code == 0, err
    assert not any(ch in out for ch in hs.ESCAPES), repr(out)
    assert "Hello␛]52;c;cm0gLXJmIH4K␇" in out  # the text, made visible
    assert "model␛]0;owned-model␇" in out  # the model's name in the summary
    assert "finish: stop␛[2J" in out
    assert "Traceback" not in err


def test_run_error_body_is_filtered(hostile, launcher, clean_env) -> None:
    proc = subprocess.run(
        [*launcher, "run", "--url", f"{hostile}/ansi-error", "--prompt", "hi"],
        env=clean_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0
    assert "boom␛]52;c;ZXZpbA==␇␛[2J" in proc.stderr, proc.stderr
    assert not any(ch in proc.stderr for ch in hs.ESCAPES)


def test_run_piped_passes_the_text_and_json_keeps_it(hostile, launcher, clean_env) -> None:
    """Documented in ``run --help``: piped, the model's text is passed on unchanged (the
    summary lines are still filtered); ``--json`` keeps it raw inside JSON strings."""
    argv = [*launcher, "run", "--url", f"{hostile}/ansi", "--prompt", "hi"]
    piped = subprocess.run(argv, env=clean_env, capture_output=True, text=True, timeout=60)
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout.startswith(hs.EVIL_TEXT)
    summary = piped.stdout[len(hs.EVIL_TEXT) :]
    assert not any(ch in summary for ch in hs.ESCAPES)
    as_json = subprocess.run(
        [*argv, "--json"], env=clean_env, capture_output=True, text=True, timeout=60
    )
    assert "\x1b" not in as_json.stdout  # JSON escapes it: \u001b
    result = json.loads(as_json.stdout)
    assert result["text"] == hs.EVIL_TEXT and result["model"] == hs.EVIL_MODEL
    help_text = subprocess.run(
        [*launcher, "run", "--help"], env=clean_env, capture_output=True, text=True, timeout=60
    ).stdout
    assert "passes through unchanged" in " ".join(help_text.split())
