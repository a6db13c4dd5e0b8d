"""Every relative link in README.md and docs/*.md resolves: the file it names exists and, for a `#anchor`, that
file has a heading with that slug, as GitHub makes it.

The markdown is parsed with markdown-it-py (CommonMark plus GitHub's tables), so a link inside a code span or a
fenced block is not a link, and a heading's slug is made from its rendered text (a code span's content without
its backticks). GitHub's slug: the text lowercased, every character but letters, digits, `-`, `_` and spaces
dropped, each space a `-`; a repeated slug gets `-1`, `-2`, … (github-slugger, what github.com uses).
"""

from __future__ import annotations

import re
from collections import Counter
from itertools import pairwise
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

from ssh_gateway.plumbing.toolchain import REPO

pytestmark = pytest.mark.unit

_MARKDOWN = MarkdownIt("commonmark").enable("table")
_NOT_IN_SLUG = re.compile(r"[^\w\- ]")  # \w: unicode letters, digits and `_`


def _documents(repo: Path) -> list[Path]:
    return [repo / "README.md", *sorted((repo / "docs").glob("*.md"))]


def _inline_text(inline: Token) -> str:
    return "".join(child.content for child in inline.children or [] if child.type in ("text", "code_inline"))


def github_slugs(markdown: str) -> set[str]:
    """The anchors GitHub gives the headings of a markdown document."""
    tokens = _MARKDOWN.parse(markdown)
    seen: Counter[str] = Counter()
    slugs: set[str] = set()
    for opening, inline in pairwise(tokens):
        if opening.type != "heading_open":
            continue
        slug = _NOT_IN_SLUG.sub("", _inline_text(inline).strip().lower()).replace(" ", "-")
        slugs.add(f"{slug}-{seen[slug]}" if seen[slug] else slug)
        seen[slug] += 1
    return slugs


def relative_links(markdown: str) -> list[str]:
    """Every link and image target that is not a URL of its own (http:, https:, mailto:, …)."""
    found: list[str] = []
    for token in _MARKDOWN.parse(markdown):
        for child in token.children or []:
            target = child.attrGet("href") if child.type == "link_open" else child.attrGet("src")
            if isinstance(target, str) and not urlsplit(target).scheme:
                found.append(target)
    return found


def broken_links(document: Path) -> list[str]:
    """The links of `document` that name a missing file or a heading its file does not have, each with why."""
    broken: list[str] = []
    for link in relative_links(document.read_text()):
        parts = urlsplit(link)
        target = (document.parent / unquote(parts.path)).resolve() if parts.path else document
        if not target.exists():
            broken.append(f"{link}: no file {target}")
        elif parts.fragment and target.suffix == ".md":
            if unquote(parts.fragment) not in github_slugs(target.read_text()):
                broken.append(f"{link}: no heading #{parts.fragment} in {target.name}")
    return broken


@pytest.mark.parametrize("document", _documents(REPO), ids=lambda path: str(path.relative_to(REPO)))
def test_every_relative_link_resolves(document: Path) -> None:
    broken = broken_links(document)
    assert not broken, "\n".join(broken)


def test_a_missing_file_or_heading_is_reported(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "there.md").write_text("# Title\n\n## The `ssh-gateway` command: 1000+ hosts\n\n## Title\n")
    readme = tmp_path / "README.md"
    readme.write_text(
        "[ok](docs/there.md#the-ssh-gateway-command-1000-hosts) [ok](docs/there.md#title-1) [ok](#top)\n"
        "[gone](docs/gone.md) [no heading](docs/there.md#nowhere) [web](https://example.com/x.md)\n\n"
        "`[in code](docs/gone.md)`\n\n# Top\n"
    )
    assert _documents(tmp_path) == [readme, tmp_path / "docs" / "there.md"]
    assert broken_links(readme) == [
        f"docs/gone.md: no file {tmp_path / 'docs' / 'gone.md'}",
        "docs/there.md#nowhere: no heading #nowhere in there.md",
    ]
