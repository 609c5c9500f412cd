"""The canonical body text of a record: what the renderer prints and what append-time counts cover.

A body is *block-safe* (RFC 0002): it starts with a non-blank line and ends with exactly one
``"\\n"``, so its token count adds exactly to the counts of the lines around it. It is also
*fence-safe*: any text that could open or close a data fence (``<data``, ``</data``) or wear the
trusted-operator label is neutralised, so untrusted text can never end its own fence or pose as
the operator. The same function runs when a record is appended (to cache its count) and when it
is rendered, which is what makes the cached count exact.

How lookalikes are caught (RFC 0007). Matching runs on a *skeleton* of the text: each character
NFKC-normalised and case-folded, a small table of confusables (Cyrillic ``а``, Greek ``ο``,
``〈``, ``∕`` ...) mapped to the ASCII they imitate, and default-ignorable characters (zero-width,
bidi controls, variation selectors, tag characters) dropped. The fence pattern also accepts
whitespace inside the tag (``< /data>``, ``</ data>``) and the entity and escape spellings of
``<``, ``/`` and ``>`` (``&lt;``, ``&#60;``, ``\\u003c``); a tag with whitespace inside counts
only as a closer with its ``>``, so code such as ``i < data.size()`` is left alone. A match in
the skeleton is mapped back to the original characters, which are rewritten: the ``<`` of a
fence-like tag becomes ``‹`` and a trusted-label lookalike becomes ``operator (claimed)``. Text
with no match (almost all text) is returned unchanged after one ``str.translate`` and one regex
search, both in C.

Ids (:func:`id_problem`) are held to the same rule, and more: an id may contain no markup
character at all, so wherever one is rendered (fence attribute, label, heading, manifest,
preview) it cannot end an attribute, open a tag or pose as a label.
"""

from __future__ import annotations

import bisect
import functools
import re
import unicodedata
from collections.abc import Callable
from typing import Final

from holon_ctx.ledger.records import (
    Brief,
    Environment,
    ExternalEvent,
    Message,
    Pin,
    Record,
    TaskResult,
    Tool,
    Turn,
    Wait,
    WorkItem,
)

__all__ = [
    "CLAIMED_LABEL",
    "FENCE_TAG",
    "OPERATOR_LABEL",
    "attribute_value",
    "block_safe",
    "id_problem",
    "neutralise_fences",
    "record_body",
    "record_body_counted",
    "skeleton",
]

#: The element name of data fences; see :func:`neutralise_fences`.
FENCE_TAG = "data"
#: The label the renderer puts above the operator's own words, and what a forgery of it becomes.
OPERATOR_LABEL = "operator (trusted)"
CLAIMED_LABEL = "operator (claimed)"

# --- the skeleton ---------------------------------------------------------------------------
#: Characters that imitate the ASCII of ``<data``, ``</data>`` or ``operator (trusted)`` and that
#: NFKC leaves alone (applied before and after NFKC and case folding).
_CONFUSABLES: Final = {
    # Cyrillic, Armenian and Greek letters that look Latin (lower case; upper case folds to them).
    "а": "a", "е": "e", "о": "o", "р": "p", "с": "c", "ѕ": "s", "т": "t", "у": "y", "х": "x",
    "ԁ": "d", "г": "r", "һ": "h", "і": "i", "ј": "j", "ԛ": "q", "ԝ": "w", "ҽ": "e", "ս": "u",
    "օ": "o", "α": "a", "ο": "o", "ρ": "p", "τ": "t", "υ": "u", "ι": "i", "κ": "k", "ν": "v",
    "Α": "a", "Β": "b", "Ε": "e", "Ζ": "z", "Η": "h", "Ι": "i", "Κ": "k", "Μ": "m", "Ν": "n",
    "Ο": "o", "Ρ": "p", "Τ": "t", "Υ": "y", "Χ": "x",
    # Latin small capitals and IPA letters.
    "ᴀ": "a", "ᴅ": "d", "ᴇ": "e", "ᴏ": "o", "ᴘ": "p", "ʀ": "r", "ꜱ": "s", "ᴛ": "t", "ᴜ": "u",
    "ɑ": "a", "ɡ": "g", "ⲅ": "r", "ᴦ": "r",
    # Angle brackets, slashes and parentheses.
    "〈": "<", "⟨": "<", "˂": "<", "ᐸ": "<", "❮": "<", "❬": "<", "⧼": "<",
    "〉": ">", "⟩": ">", "˃": ">", "ᐳ": ">", "❯": ">", "❭": ">", "⧽": ">",
    "∕": "/", "⁄": "/", "⧸": "/", "⟋": "/", "╱": "/",
    "❨": "(", "❪": "(", "⟮": "(", "❩": ")", "❫": ")", "⟯": ")",
    "\u2800": " ",  # braille blank renders as a space
}  # fmt: skip
#: Default-ignorable code points (Unicode DerivedCoreProperties): invisible, so dropped from the
#: skeleton. Zero-width characters, bidi controls, variation selectors, tag characters, fillers.
_IGNORABLE: Final = (
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160), (0x17B4, 0x17B5),
    (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x3164, 0x3164),
    (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF),
)  # fmt: skip
#: Where NFKC or the confusables above can turn a character into ASCII (Latin-1 to CJK symbols,
#: Latin extended-D, presentation and full-width forms, mathematical alphanumerics, enclosed
#: alphanumerics, segmented digits). Scanned once, on first non-ASCII text (~20 ms).
_SCAN: Final = ((0x80, 0x33FF), (0xA720, 0xA7FF), (0xFB00, 0xFFEF), (0x1D400, 0x1D7FF),
                (0x1F100, 0x1F1FF), (0x1FBF0, 0x1FBF9))
#: Every character any match below can contain (after lower-casing). A lookalike that folds to
#: anything else cannot take part in a match, so the table leaves it alone.
_ALPHABET: Final = frozenset("<>/&#;\\()[]{} acdefglopqrstuvx0123456789")


def _fold(char: str) -> str:
    direct = _CONFUSABLES.get(char)
    if direct is not None:
        return direct
    folded = unicodedata.normalize("NFKC", char).casefold()
    return "".join(_CONFUSABLES.get(c, c) for c in folded)


@functools.cache
def _skeleton_table() -> tuple[dict[int, str], re.Pattern[str]]:
    """Non-ASCII lookalikes to the ASCII they imitate, ignorables to ""; a pattern of the BMP ones.

    Only BMP characters go into the pattern: ``re`` tests a class with astral ranges range by
    range for every character (0.3 s/MB), a BMP-only class is a bitmap (3 ms/MB). Astral
    characters (emoji, mathematical letters, tag characters) are looked up one by one.
    """
    table: dict[int, str] = {}
    for low, high in _SCAN:
        for code in range(low, high + 1):
            if 0xD800 <= code <= 0xDFFF:
                continue
            folded = _fold(chr(code))
            if folded != chr(code) and all(c in _ALPHABET for c in folded):
                table[code] = folded
    for low, high in _IGNORABLE:
        for code in range(low, high + 1):
            table[code] = ""
    return table, re.compile(_char_class(sorted(c for c in table if c < 0x10000)))


def _char_class(codes: list[int]) -> str:
    """A regex character class of sorted code points, as ranges (a long list scans slowly)."""
    parts: list[str] = []
    start = prev = codes[0]
    for code in [*codes[1:], -1]:
        if code != prev + 1:
            parts.append(re.escape(chr(start)) if start == prev
                         else f"{re.escape(chr(start))}-{re.escape(chr(prev))}")
            start = code
        prev = code
    return "[" + "".join(parts) + "]"


# --- what is neutralised --------------------------------------------------------------------
# On the skeleton (lower case). `<`, `/` and `>` also as HTML entities or JSON/Python escapes. A
# tag with whitespace inside (`< /data>`, `</ data>`) counts only as a closer with its `>`, so
# code such as `i < data.size()` or `cat < /data/in.txt` is left alone.
_LT = r"(?:<|&lt;?|&#0*60;?|&#x0*3c;?|\\u0*3c|\\x3c)"
_SLASH = r"(?:/|&#0*47;?|&#x0*2f;?|&sol;|\\u0*2f|\\/)"
_GT = r"(?:>|&gt;?|&#0*62;?|&#x0*3e;?|\\u0*3e|\\x3e)"
_FENCE: Final = re.compile(
    rf"(?P<lt>{_LT})(?:(?:{_SLASH})?{FENCE_TAG}\b|\s*{_SLASH}\s*{FENCE_TAG}\s*{_GT})")
_LABEL: Final = re.compile(r"operator\s*[(\[{]\s*trusted\s*[)\]}]")
# What neutralisation matched before lookalikes were caught (counts cached by earlier versions
# were taken on bodies neutralised this way; see record_body_counted).
_LEGACY_FENCE = re.compile(rf"<(/?)({FENCE_TAG})\b", re.IGNORECASE)
_LEGACY_LABEL = re.compile(r"operator\s*\(trusted\)", re.IGNORECASE)


_ASTRAL: Final = re.compile("[\U00010000-\U0010ffff]")


#: Characters sampled to choose how a non-ASCII text is mapped (see _skeleton).
_SAMPLE: Final = 1 << 16


def _skeleton(text: str) -> str:
    if text.isascii():
        return text.lower()
    table, bmp = _skeleton_table()
    # Few lookalikes (most non-ASCII text: CJK, emoji, accents) are replaced one call each and
    # the rest scanned in C (~20 ms/MB); where they are common (Cyrillic, Greek, full-width
    # text) a call per character costs ~0.8 s per million of them, so one translate
    # (~0.1 s/MB, every character looked up) maps the text instead. Both give the same text.
    if len(bmp.findall(text, 0, _SAMPLE)) * 16 > min(len(text), _SAMPLE):
        return text.translate(table).lower()
    text = bmp.sub(lambda m: table[ord(m.group())], text)
    if _ASTRAL.search(text):
        text = _ASTRAL.sub(lambda m: table.get(ord(m.group()), m.group()), text)
    return text.lower()


def skeleton(text: str) -> str:
    """``text`` as the matching here reads it: NFKC, case-folded, confusables mapped, invisible
    characters dropped (for other markup that must not be forged, such as the projection's
    repeat notes)."""
    return _skeleton(text)


def _suspect(skeleton: str) -> bool:
    # Substring tests first (C speed); the patterns only run where they could match.
    if ("<" in skeleton or "&" in skeleton or "\\" in skeleton) and _FENCE.search(skeleton):
        return True
    return "operator" in skeleton and _LABEL.search(skeleton) is not None


def neutralise_fences(text: str) -> str:
    """Make text unable to open or close a fence, or to wear the trusted-operator label.

    ``<data`` / ``</data`` and their lookalikes (see the module docstring) get ``‹`` in place of
    their ``<``; the renderer's trusted label ``operator (trusted)`` and its lookalikes become
    ``operator (claimed)``, so quoted text cannot pose as it.
    """
    # Each pass removes a `<` or a "trusted" and adds neither, so the loop ends (in practice
    # after one pass: a second only when rewriting made the characters of a new match adjacent).
    while _suspect(_skeleton(text)):
        text = _rewrite(text)
    return text


#: The one character whose lower case is two characters (U+0130, ``İ`` → ``i̇``; checked over
#: every code point by tests/test_fence_lookalikes.py).
_LOWER_GROWS: Final = "\u0130"


@functools.cache
def _resized() -> tuple[dict[int, int], re.Pattern[str]]:
    """The characters whose skeleton is not one character long (ignorables: none; NFKC
    expansions such as ``ﬀ``: two; ``İ``), with those lengths, and a pattern finding the BMP
    ones."""
    table = _skeleton_table()[0]
    sizes = {code: len(folded) for code, folded in table.items() if len(folded) != 1}
    sizes[ord(_LOWER_GROWS)] = len(_LOWER_GROWS.lower())
    return sizes, re.compile(_char_class(sorted(c for c in sizes if c < 0x10000)))


def _owner_of(text: str) -> Callable[[int], int]:
    """Skeleton index -> index of the original character it comes from, for non-ASCII text.

    Most characters are one skeleton character each; only the few that are not (found by one
    regex pass, in C) shift positions, so an index is mapped by a search among them rather than
    from a map built character by character (a second per megabyte, at every render)."""
    sizes, bmp = _resized()
    found = [(m.start(), sizes[ord(m.group())]) for m in bmp.finditer(text)]
    # Astral characters are all found (one range, scanned fast) and sorted out one by one, as
    # _skeleton_table's pattern leaves them out (a class of astral ranges scans slowly).
    astral = [(m.start(), size) for m in _ASTRAL.finditer(text)
              if (size := sizes.get(ord(m.group()), 1)) != 1]
    if astral:
        found = sorted(found + astral)
    starts: list[int] = []  # where each one's skeleton begins
    shift = 0
    for index, size in found:
        starts.append(index + shift)
        shift += size - 1

    def owner(at: int) -> int:
        k = bisect.bisect_right(starts, at) - 1
        if k < 0:
            return at
        index, size = found[k]
        if at < starts[k] + size:
            return index
        return index + 1 + (at - starts[k] - size)

    return owner


def _rewrite(text: str) -> str:
    """Rewrite every match, mapping skeleton positions back to the original characters."""
    if text.isascii():
        skeleton, owner = text.lower(), None  # one character each way: positions are the same
    else:
        # As the matching reads it, and as long as the characters' pieces joined (a whole-text
        # lower case differs from a per-character one only in final sigmas, never in length).
        skeleton, owner = _skeleton(text), _owner_of(text)
    spans = [(m.start("lt"), m.end("lt"), "\u2039") for m in _FENCE.finditer(skeleton)]
    spans += [(m.start(), m.end(), CLAIMED_LABEL) for m in _LABEL.finditer(skeleton)]
    # Chosen right to left (an overlapping span waits for the next pass), then the text is built
    # once, left to right: splicing each match into the whole text copied it once per match,
    # quadratic in an output of many closers (an XML dump: 800 KB took a minute per render).
    taken: list[tuple[int, int, str]] = []
    limit = len(text)
    for start, end, replacement in sorted(spans, reverse=True):
        first, last = (start, end) if owner is None else (owner(start), owner(end - 1) + 1)
        if last <= limit:
            taken.append((first, last, replacement))
            limit = first
    out: list[str] = []
    at = 0
    for first, last, replacement in reversed(taken):
        out += (text[at:first], replacement)
        at = last
    out.append(text[at:])
    return "".join(out)


def _legacy_neutralise(text: str) -> str:
    text = _LEGACY_FENCE.sub(lambda m: f"\u2039{m.group(1)}{m.group(2)}", text)
    return _LEGACY_LABEL.sub(CLAIMED_LABEL, text)


def block_safe(text: str) -> str:
    """Drop blank leading lines and trailing whitespace, end with one newline ("" stays "")."""
    lines = text.split("\n")
    start = 0
    while start < len(lines) and not lines[start].strip():
        start += 1
    body = "\n".join(lines[start:]).rstrip()
    return f"{body}\n" if body else ""


def record_body(record: Record) -> str:
    """The record's main text, block-safe and fence-safe ("" when it has none)."""
    return block_safe(neutralise_fences(_raw_body(record)))


def record_body_counted(record: Record) -> tuple[str, bool]:
    """:func:`record_body`, and whether a count cached by an earlier holon-ctx may be stale.

    Stores cache each body's count at append. Before lookalikes were neutralised, bodies were
    neutralised by exact match only; for the rare body where the two differ, a count cached then
    counts other text, and the renderer recounts it (``True``).
    """
    raw = _raw_body(record)
    body = neutralise_fences(raw)
    if body == raw:
        return block_safe(body), False
    return block_safe(body), body != _legacy_neutralise(raw)


def _raw_body(record: Record) -> str:
    match record:
        case Message() | Brief() | ExternalEvent():
            return record.text
        case TaskResult():
            return record.summary
        case Tool():
            return record.output
        case Turn():
            return record.label or ""
        case Wait():
            return record.condition
        case Pin():
            return record.note
        case Environment():
            return record.guidance
        case WorkItem():
            return record.objective or record.completion_report or record.blocker or ""


# --- ids --------------------------------------------------------------------------------------
#: Characters that delimit markup where ids are rendered: fence attributes (``"``, ``'``), tags
#: (``<``, ``>``), entities (``&``) and code spans (`````).
_MARKUP: Final = frozenset("\"'<>&`")
_INVISIBLE: Final = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp", "Zs"})


def id_problem(value: str) -> str | None:
    """Why ``value`` may not be a ledger id beyond length and whitespace, or None (RFC 0007).

    An id holds no markup character (``" ' < > & ```, also as its full-width or other NFKC
    form), no control, format (zero-width, bidi), surrogate or separator character, and nothing
    the fence neutraliser would rewrite (a fence-tag or trusted-label lookalike). So an id
    rendered anywhere, unescaped, cannot close an attribute, open a tag or pose as a label.
    """
    # ASCII is its own NFKC form and its only invisible characters are the controls (not
    # printable) and the space, so for a clean ASCII value the per-character loop below (a
    # normalisation and a category lookup per character: most of a cold episode's fence lines)
    # finds nothing; any other value takes the loop, which says what is wrong.
    if not (value.isascii() and value.isprintable() and " " not in value
            and _MARKUP.isdisjoint(value)):
        problem = _char_problem(value)
        if problem is not None:
            return problem
    if neutralise_fences(value) != value:
        return "must not look like a data fence tag or the 'operator (trusted)' label"
    return None


def _char_problem(value: str) -> str | None:
    """:func:`id_problem`'s per-character checks: markup in any width, invisible characters."""
    for char in value:
        if char in _MARKUP or any(c in _MARKUP for c in unicodedata.normalize("NFKC", char)):
            return "must not contain markup characters (\" ' < > & `), in any width"
        if unicodedata.category(char) in _INVISIBLE:
            return f"must not contain invisible or control character U+{ord(char):04X}"
    return None


def attribute_value(value: str) -> str:
    """``value`` as a fence attribute: unchanged when it is a valid id (refs, origins, trusts).

    Anything else (a ledger written before the id rule) is escaped so it cannot end the
    attribute or the tag: markup as numeric entities (``&#34;``), invisibles as ``\\uXXXX``, and
    what remains neutralised.
    """
    if id_problem(value) is None:
        return value
    out = []
    for char in value:
        if char in _MARKUP:
            out.append(f"&#{ord(char)};")
        elif unicodedata.category(char) in _INVISIBLE or not char.isprintable():
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return neutralise_fences("".join(out))
