"""The app's remappable keys: binding ids a user may remap in ``[ui.keys]``."""

from __future__ import annotations

BINDING_IDS = (
    "cancel",
    "next_engine",
    "ab",
    "panels",
    "clear",
    "reasoning",
    "theme",
    "bench",
    "fleet",
    "help",
    "quit",
)


def checked_keymap(keys: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """(the keymap to apply, a note per unknown binding id, which is left out)."""
    keymap = {k: v for k, v in keys.items() if k in BINDING_IDS}
    notes = [
        f"ui.keys: unknown binding id {k!r} (known: {', '.join(BINDING_IDS)})"
        for k in sorted(set(keys) - set(BINDING_IDS))
    ]
    return keymap, notes
