"""Every relative link in the repository's Markdown resolves (the file, and the anchor when
it names one), and the README stays short enough to read."""

from __future__ import annotations

from pathlib import Path

from tests.docs.markdown import REPO, broken_links, markdown_files


def test_every_relative_link_in_every_markdown_file_resolves() -> None:
    files = markdown_files()
    assert REPO / "README.md" in files
    assert REPO / "docs" / "architecture.md" in files

    broken = {str(p.relative_to(REPO)): b for p in files if (b := broken_links(p))}

    assert not broken, broken


def test_a_broken_link_is_found(tmp_path: Path) -> None:
    page, there = tmp_path / "page.md", "there" + ".md"  # not a citation of this repository
    (tmp_path / there).write_text("# Some Title\n")
    page.write_text(
        f"[ok]({there}#some-title) [gone](missing.md) [bad]({there}#nope) "
        "`[code](not-a-link.md)` [web](https://example.com/x.md)\n"
    )

    assert broken_links(page) == ["missing.md (no such file)", f"{there}#nope (no such anchor)"]


def test_the_readme_is_at_most_250_lines() -> None:
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250, len(lines)
