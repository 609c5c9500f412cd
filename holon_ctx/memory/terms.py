"""Terms: the one tokeniser behind episode recall (BM25) and topic boundaries.

How it works. Text is lowercased and split into runs by script:

* Han (Chinese characters, Japanese kanji) and katakana runs become overlapping character
  *bigrams* (``数据库`` → ``数据``, ``据库``); a run of one character is kept as itself. Bigrams are
  the standard way to index CJK without a dictionary: most words are one or two characters long,
  so a query shares bigrams with every text that contains its words, in any segmentation.
* Hiragana runs are mostly particles and inflections (``の``, ``を``, ``ます``): runs shorter than
  three characters are dropped, longer ones become bigrams.
* Everything else that is a letter or digit (Latin, Cyrillic, Hangul, …) splits into words; words
  are lowercased, and one-letter words and a small stopword table are dropped.

The result is a list of terms in text order (duplicates kept, for term frequencies). The same
function runs when an episode is indexed and when a query is scored, so both sides always agree.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["STOPWORDS", "content_terms", "terms", "terms_by_runs"]

_RUNS = re.compile(
    r"(?P<han>[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+)"
    r"|(?P<kata>[\u30a0-\u30ff\u31f0-\u31ff\uff66-\uff9f]+)"
    r"|(?P<hira>[\u3040-\u309f]+)"
    r"|(?P<word>[^\W_\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f]+)"
)

#: Function words that would make unrelated texts look alike. Kept short on purpose: BM25's idf
#: already discounts common words; this table only removes the ones that carry no topic at all.
_STOPWORD_TEXT: Final = """
    a an and are as at be been but by can could did do does doing done for from had has have
    he her here hers him his how i if in into is it its just me my no not of off on once
    only or our ours out over own please same she should so some such than that the their them
    then there these they this those through to too under until up very was we were what when
    where which while who whom why will with would you your yours yes ok okay also let lets
    about again all any am because before being below between both during each few further
    more most nor other s t don now
    我们 你们 他们 这个 那个 一个 什么 怎么 已经 因为 所以 但是 如果 还是 就是 没有 不是 现在
    可以 这样 那样 一下 一些
    """
STOPWORDS: Final = frozenset(_STOPWORD_TEXT.split())


def _bigrams(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


#: ASCII text has only word runs, and a word is a run of letters and digits: every other ASCII
#: character becomes a space, and ``split`` finds the words (C speed; the regex loop costs ~4x).
_ASCII_SPACES: Final = bytes(c if chr(c).isascii() and chr(c).isalnum() else 0x20
                             for c in range(256))
_ASCII_SEPARATORS: Final = {c: " " for c in range(128) if not chr(c).isalnum()}
#: What an ASCII word may not be: a stopword, or one letter (one digit is a term).
_ASCII_DROPPED: Final = STOPWORDS | frozenset("abcdefghijklmnopqrstuvwxyz")


def terms(text: str) -> list[str]:
    """All terms of ``text`` in order (see the module docstring); duplicates are kept."""
    lowered = text.lower()
    if lowered.isascii():
        # The common case (English, code, tool output): archiving indexes every episode's text.
        # The same terms as the loop below gives, for ASCII `[^\W_]+` is `[a-z0-9]+`.
        words = lowered.encode("ascii").translate(_ASCII_SPACES).decode("ascii").split()
        return [w for w in words if w not in _ASCII_DROPPED]
    # Mostly ASCII with a few other characters (quotes, arrows, a CJK phrase): no run of any kind
    # spans an ASCII separator or white space, so the pieces between them are taken alone, the
    # ASCII ones as words and only the others run by run.
    out: list[str] = []
    for piece in lowered.translate(_ASCII_SEPARATORS).split():
        if piece.isascii():
            if piece not in _ASCII_DROPPED:
                out.append(piece)
        else:
            out.extend(terms_by_runs(piece))
    return out


def terms_by_runs(lowered: str) -> list[str]:
    """The terms of lowercased text, run by run (any script; ``terms`` takes a faster path
    for ASCII that gives the same list)."""
    out: list[str] = []
    for match in _RUNS.finditer(lowered):
        kind = match.lastgroup
        run = match.group()
        if kind == "word":
            if (len(run) > 1 or run.isdigit()) and run not in STOPWORDS:
                out.append(run)
        elif kind == "hira":
            if len(run) >= 3:
                out.extend(_bigrams(run))
        else:
            out.extend(t for t in _bigrams(run) if t not in STOPWORDS)
    return out


def content_terms(text: str) -> frozenset[str]:
    """The distinct terms of ``text``: what topic-overlap checks compare."""
    return frozenset(terms(text))
