"""The README and the glossary answer a newcomer's first questions (issue 16)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
CONCEPTS = (ROOT / "docs" / "concepts.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("term", ["Relation", "Continuation anchor", "Window", "Governed store",
                                  "Reconciliation", "Recall score", "Fold", "Episode"])
def test_the_glossary_defines_each_word_the_preview_uses(term: str) -> None:
    """docs/concepts.md has an entry (a bold lead word and a definition) for each term."""
    assert re.search(rf"^\*\*{term}[^*]*\.\*\* \S", CONCEPTS, re.MULTILINE), term


def test_the_readme_links_the_glossary_and_says_how_to_skip_the_pager() -> None:
    """The README links docs/concepts.md, says the demo opens a pager, and how to avoid it."""
    assert "](docs/concepts.md)" in README
    assert "pager" in README
    assert "--no-pager" in README
    assert "PAGER=cat" in README


def test_links_between_the_docs_resolve() -> None:
    """Every relative link in README.md and docs/concepts.md names an existing file."""
    for base, text in ((ROOT, README), (ROOT / "docs", CONCEPTS)):
        for target in re.findall(r"\]\(([^)#:]+)\)", text):
            assert (base / target).exists(), target
