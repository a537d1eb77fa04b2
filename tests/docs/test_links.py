"""Every relative link in the repository's Markdown resolves (the file, and the anchor when
it names one), and the README stays short enough to read."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SKIPPED_DIRS = {".git", ".venv", ".tools", ".pytest_cache", ".mypy_cache", ".ruff_cache"}
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"`[^`\n]*`")
EXPLICIT_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.MULTILINE)


def markdown_files() -> list[Path]:
    return sorted(
        path
        for path in REPO.rglob("*.md")
        if not SKIPPED_DIRS.intersection(path.relative_to(REPO).parts)
        and "node_modules" not in path.parts
    )


def _prose(text: str) -> str:
    return INLINE_CODE.sub("", FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes."""
    text = re.sub(r"<[^>]+>", "", heading).replace("`", "").lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    found = set(EXPLICIT_ANCHOR.findall(text))
    seen: dict[str, int] = {}
    for heading in HEADING.findall(text):
        base = slug(heading)
        count = seen.get(base, 0)
        found.add(base if count == 0 else f"{base}-{count}")
        seen[base] = count + 1
    return found


def broken_links(path: Path) -> list[str]:
    broken = []
    for target in LINK.findall(_prose(path.read_text(encoding="utf-8"))):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):
            continue  # https:, mailto: ...
        file_part, _, anchor = target.partition("#")
        resolved = (path.parent / file_part).resolve() if file_part else path
        if not resolved.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{target} (no such anchor)")
    return broken


def test_every_relative_link_in_every_markdown_file_resolves() -> None:
    files = markdown_files()
    assert REPO / "README.md" in files
    assert REPO / "docs" / "architecture.md" in files

    broken = {str(p.relative_to(REPO)): b for p in files if (b := broken_links(p))}

    assert not broken, broken


def test_a_broken_link_is_found(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    (tmp_path / "there.md").write_text("# Some Title\n")
    page.write_text(
        "[ok](there.md#some-title) [gone](missing.md) [bad](there.md#nope) "
        "`[code](not-a-link.md)` [web](https://example.com/x.md)\n"
    )

    assert broken_links(page) == ["missing.md (no such file)", "there.md#nope (no such anchor)"]


def test_the_readme_is_at_most_250_lines() -> None:
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250, len(lines)
