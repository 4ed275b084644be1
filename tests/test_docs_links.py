"""Every relative link in the README and docs/ reaches a file, and its #anchor a heading.

Anchors are made as GitHub makes them: the heading's text lower-cased, characters other
than letters, digits, spaces, hyphens and underscores dropped, spaces made hyphens; and
an explicit ``<a id="...">``.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "SECURITY.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def slug(heading: str) -> str:
    text = heading.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    out = set()
    for line in text.splitlines():
        if m := re.match(r"#{1,6} (.+)", line):
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    out.update(re.findall(r'<a id="([^"]+)"', text))  # an explicit anchor
    return out


def broken_links(page: Path) -> list[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    text = re.sub(r"`[^`\n]*`", "", text)  # code spans are not links
    bad = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            bad.append(f"{target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{target} (no such heading)")
    return bad


def test_every_link_in_the_docs_reaches_its_page_and_heading() -> None:
    broken = {p.name: b for p in PAGES if p.exists() and (b := broken_links(p))}
    assert broken == {}


def test_the_check_sees_a_broken_link(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# Top part\n\n[ok](#top-part) [x](b.md) [y](a.md#nope)\n")
    assert broken_links(tmp_path / "a.md") == ["b.md (no such file)", "a.md#nope (no such heading)"]
