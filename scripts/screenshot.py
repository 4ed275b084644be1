"""Make the README's screenshot with the app itself: the real default model answers two
prompts in the TUI at 120×36, then Textual saves the screen as SVG.

    .venv/bin/python scripts/screenshot.py [docs/screenshot.svg]
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from tui.app.app import create_app
from tui.config import parse_config

CONFIG = """
[generation]
max_tokens = 96
temperature = 0.3
seed = 1

[engines.local]
kind = "llamacpp"
model = "default"
"""
PROMPTS = [
    "Why is the sky blue? Answer in two sentences.",
    "Give me three tips for learning to cook.",
]


async def main(out: Path) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="infertop-shot-"))
    cfg = parse_config(CONFIG, tmp / "infertop.toml")
    app = create_app(cfg, session_path=tmp / "session.jsonl", state_path=None)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = app.screen
        for prompt in PROMPTS:
            while getattr(screen, "busy", False):
                await asyncio.sleep(0.1)
            await screen.submit_text(prompt)  # type: ignore[attr-defined]
            await asyncio.sleep(0.2)
        while getattr(screen, "busy", False):
            await asyncio.sleep(0.1)
        await asyncio.sleep(1.5)  # one more telemetry sample and redraw
        await pilot.pause()
        app.save_screenshot(filename=out.name, path=str(out.parent))
    print(f"wrote {out}")


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/screenshot.svg").resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    asyncio.run(main(target))
