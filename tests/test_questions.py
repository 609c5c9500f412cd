"""Questions in any script (issue 16): one predicate, and the exchange label that uses it."""

from __future__ import annotations

import pytest
from projection_builders import LedgerBuilder

from holon_ctx.ledger.records import BriefKind
from holon_ctx.projection.base.model import Section
from holon_ctx.projection.base.questions import QUESTION_MARKS, asks_question, ends_with_question


@pytest.mark.parametrize(("text", "asks"), [
    ("Which one?", True),
    ("Which one? I will wait for your answer.", True),
    ("要部署到生产环境吗？", True),
    ("要部署吗？我等你。", True),
    ("هل أنشر التحديث؟", True),
    ("Να συνεχίσω\u037e", True),
    ("He asked “ready?”", True),
    ("(is it flaky?)", True),
    ("Really‽", True),
    ("The deploy finished.", False),
    ("部署完成。", False),
    ("See https://ci.example/run?id=42 for the log.", False),
    ("Use `user?.name` here.", False),
    ("", False),
])
def test_asks_question(text: str, asks: bool) -> None:
    """A sentence ending in a question mark of any script asks; a URL query does not."""
    assert asks_question(text) is asks


@pytest.mark.parametrize("mark", list(QUESTION_MARKS))
def test_every_mark_ends_a_question(mark: str) -> None:
    """Each listed mark, at the end of a text, makes it a question."""
    assert asks_question(f"ready{mark}")
    assert ends_with_question(f"ready{mark} ")


def test_ends_with_question_looks_at_the_end_only() -> None:
    """A question followed by a statement does not end with one."""
    assert not ends_with_question("Which one? I will wait.")
    assert ends_with_question("I will wait. Which one？")


def _exchange_label(assistant_text: str) -> str:
    b = LedgerBuilder()
    b.operator("Run the migration on staging.")
    b.assistant(assistant_text)
    b.operator("ok")
    p = b.project(4096)
    current = p.section_text[Section.CURRENT_INPUT]
    return next(line for line in current.split("\n") if line.startswith("previous exchange"))


@pytest.mark.parametrize(("text", "verb"), [
    ("The migration ran on staging; 3 tables changed.", "said"),
    ("Should I run it on production too?", "asked"),
    ("要在生产环境也运行吗？", "asked"),
    ("Done. Production next? I can start at noon.", "asked"),
])
def test_the_previous_exchange_says_asked_only_for_a_question(text: str, verb: str) -> None:
    """The label before the assistant's last message says "asked" only when it asked."""
    assert _exchange_label(text).startswith(f"previous exchange — the assistant {verb} (turn:")


@pytest.mark.parametrize("reply", ["y", "好", "oui", "2"])
def test_a_short_reply_keeps_a_question_a_brief_asked(reply: str) -> None:
    """The question sits in a result brief (no assistant message at all) and older history
    crowds the budget: the reply still comes with its question (issue 12, item 6)."""
    b = LedgerBuilder()
    b.busy(20, topic="earlier")
    b.operator("Ship the cache fix once CI is green.")
    b.task_result("ci-4411", "CI green: 212 passed")
    b.brief("CI is green. Deploy build 4411 to production now, or wait for the canary (1/2)?")
    b.operator(reply)
    p = b.project(1024)
    current = p.section_text[Section.CURRENT_INPUT]
    assert "Deploy build 4411 to production now, or wait for the canary (1/2)?" in current
    assert "previous exchange — the assistant asked" in current


@pytest.mark.parametrize("reply", ["y", "好", "oui", "2"])
def test_a_short_reply_keeps_the_question_past_a_progress_note_and_ticks(reply: str) -> None:
    """The assistant asked, then a progress note and ticks came before the reply: the question
    is what the reply answers, not the newest model-written record."""
    b = LedgerBuilder()
    b.busy(20, topic="earlier")
    b.chat("Reindex the orders table.", "Shall I also drop the old index idx_orders_legacy?")
    b.turn("x-progress")
    b.brief("reindex 40% done", kind=BriefKind.PROGRESS)
    b.ticks(4)
    b.operator(reply)
    p = b.project(1024)
    current = p.section_text[Section.CURRENT_INPUT]
    assert "Shall I also drop the old index idx_orders_legacy?" in current
    assert "reindex 40% done" not in current
