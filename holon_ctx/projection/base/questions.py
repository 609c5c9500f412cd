"""Whether a text asks a question: moved to :mod:`holon_ctx.ledger.questions` (a fact of the
ledger's text that episode memory needs too, and memory sits below projection; RFC 0028). The
names stay importable from here for the projection's modules."""

from __future__ import annotations

from holon_ctx.ledger.questions import QUESTION_MARKS, asks_question, ends_with_question

__all__ = ["QUESTION_MARKS", "asks_question", "ends_with_question"]
