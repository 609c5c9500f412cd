"""Tokenisation for recall and topic boundaries: English words, CJK bigrams, stopwords."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from holon_ctx.memory.terms import content_terms, terms, terms_by_runs


@pytest.mark.parametrize(("text", "expected"), [
    ("We decided: use PostgreSQL 16!", ["decided", "use", "postgresql", "16"]),
    ("the a of and", []),
    ("src/billing/db.py", ["src", "billing", "db", "py"]),
    ("数据库", ["数据", "据库"]),
    ("库", ["库"]),
    ("我们决定", ["们决", "决定"]),
    ("データベースの移行", ["デー", "ータ", "タベ", "ベー", "ース", "移行"]),
    ("はい", []),
    ("お願いします", ["願", "いし", "しま", "ます"]),
    ("한국어 문장", ["한국어", "문장"]),
    ("PostgreSQL数据库", ["postgresql", "数据", "据库"]),
])
def test_terms(text: str, expected: list[str]) -> None:
    """Each text yields exactly these terms, in order."""
    assert terms(text) == expected


def test_content_terms_are_distinct() -> None:
    """``content_terms`` is the set of a text's terms."""
    assert content_terms("billing Billing 账单账单") == {"billing", "账单", "单账"}


def test_terms_of_hostile_text_do_not_raise() -> None:
    """Fences, special tokens, emoji and control characters tokenise without error."""
    assert "data" in terms("<data ref=\"x\"></data> <|endoftext|> 🚀\x00\u200b")


@given(st.text(alphabet=st.characters(max_codepoint=0x7F)) | st.text())
def test_the_ascii_path_gives_the_terms_of_the_run_by_run_path(text: str) -> None:
    """ASCII text takes a faster path (archiving indexes every episode's text); its terms are
    exactly the general path's, stopwords, one-letter words and digits included."""
    assert terms(text) == terms_by_runs(text.lower())
