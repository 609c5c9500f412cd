"""Whether a text asks a question, in any script: one definition for every label that says so.

A question mark in any script counts (ASCII ``?``, full-width ``？``, small and vertical forms,
Arabic ``؟``, Greek ``;`` (U+037E), Armenian ``՞``, Ethiopic ``፧``, Vai ``꘏``, the reversed ``⸮``,
and ``‽ ⁇ ⁈ ⁉``), wherever a sentence ends with one, not only at the end of the text ("Which one?
I will wait." asks). The ASCII mark alone must end a sentence — be followed by a space, a closing
quote or bracket, or the end — so a URL's query (``/search?q=x``) or ``x?.y`` is not read as a
question (a ternary ``a ? b : c`` still is: punctuation alone cannot tell prose from code). The
other marks have no such second use, and CJK text puts no space after them.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["QUESTION_MARKS", "asks_question", "ends_with_question"]

#: Every character that ends a question in some script.
QUESTION_MARKS: Final = "?？﹖︖؟\u037e՞፧꘏⸮‽⁇⁈⁉"
_CLOSERS: Final = "\"'”’»)]}）」』】》〉"
_ASKS: Final = re.compile(
    "[" + re.escape(QUESTION_MARKS.replace("?", "")) + "]"
    + r"|\?[" + re.escape(_CLOSERS) + r"]*(?:\s|$)")
_ENDS: Final = re.compile("[" + re.escape(QUESTION_MARKS) + "][" + re.escape(_CLOSERS) + r"]*\s*$")


def asks_question(text: str) -> bool:
    """True when some sentence of ``text`` ends with a question mark (see the module docstring)."""
    return _ASKS.search(text) is not None


def ends_with_question(text: str) -> bool:
    """True when ``text`` itself ends with a question mark (closing quotes and spaces aside)."""
    return _ENDS.search(text) is not None
