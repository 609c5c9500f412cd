"""Fitting runtime text to the envelope's rules, where the envelope's input is built.

The envelope refuses what a person cannot see or what would break a line (RFC 0004): ids,
obligations and refs hold no control, format (zero-width, bidi), surrogate or separator
character, no white space but U+0020, nothing around them, at most :data:`MAX_ID_CHARS`
characters; the objective no control character but newline and tab, at most
:data:`MAX_OBJECTIVE_CHARS`. Runtime text is none of that by construction: a wait condition
pasted from a terminal carries ESC, a chat message a ZWJ or U+202E, a work item's objective runs
to pages. So the code that *builds* an envelope's input from runtime text fits it first, and the
validator stays as strict as it is (RFC 0020):

* text the rules accept is returned unchanged (keys already stored keep matching);
* otherwise every forbidden character, and every white space but U+0020, becomes a space, runs of
  spaces become one, and the ends are trimmed — the visible words stay, in order;
* text still too long is cut, and the cut says so and where the full text is: ``…
  [clipped; full text: episode:e3-4; sha256:0123456789ab]``. The digest is of the text as given,
  so two long texts that share their first 200 characters still fit to two different ids.

Both functions are pure and deterministic: any process fitting the same text gets the same bytes,
which is what lets a compaction resumed in another process find its own journaled steps.
"""

from __future__ import annotations

import hashlib
import unicodedata
from typing import Final

from holon_ctx.continuity.envelope import MAX_ID_CHARS, MAX_OBJECTIVE_CHARS, id_problem

__all__ = ["fit_id", "fit_text"]

#: Categories no envelope text holds: control, format (zero-width, bidi), surrogate, separators.
_INVISIBLE: Final = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_DIGEST_HEX: Final = 12


def _spaced(text: str, keep: frozenset[str]) -> str:
    """Forbidden characters and white space other than ``keep`` as single spaces, ends trimmed."""
    out: list[str] = []
    for char in text:
        if char in keep:
            out.append(char)
        elif unicodedata.category(char) in _INVISIBLE or char.isspace():
            if out and out[-1] != " ":
                out.append(" ")
        else:
            out.append(char)
    return "".join(out).strip()


def _clip_note(original: str, where: str | None) -> str:
    digest = hashlib.sha256(original.encode("utf-8", "surrogatepass")).hexdigest()[:_DIGEST_HEX]
    full = f"full text: {_spaced(where, frozenset())}; " if where else ""
    return f"… [clipped; {full}sha256:{digest}]"


def fit_id(text: str, *, suffix: str = "", where: str | None = None,
           limit: int = MAX_ID_CHARS) -> str:
    """``text + suffix`` as an envelope id (obligation, ref, key): unchanged when the rules
    accept it, else normalised and, if still too long, cut before ``suffix`` (which names the
    item: kept whole when it fits) with a note naming ``where`` the full text is."""
    whole = text + suffix
    if id_problem(whole) is None and len(whole) <= limit:
        return whole
    head, tail = _spaced(text, frozenset()), _spaced(suffix, frozenset())
    joined = f"{head} {tail}" if head and tail else head or tail
    if joined and len(joined) <= limit:
        return joined
    note = _clip_note(whole, where)
    tail = f" {tail}" if tail else ""
    if len(note) + len(tail) >= limit:
        tail = ""  # a suffix too long to keep: the note (its digest) still tells items apart
    room = max(limit - len(note) - len(tail), 0)
    cut = head[:room].rstrip() if head else joined[:room].rstrip()
    fitted = f"{cut}{note}{tail}".strip()
    return fitted[:limit]


def fit_text(text: str, *, where: str | None = None, limit: int = MAX_OBJECTIVE_CHARS) -> str:
    """``text`` as an envelope objective: newlines and tabs stay, other forbidden characters
    become spaces, and text over ``limit`` is cut with a note naming ``where`` the full text is.
    ``""`` when nothing visible is left (the caller supplies its own wording then)."""
    lines = [_spaced(line, frozenset("\t")) for line in text.replace("\r\n", "\n").split("\n")]
    fitted = "\n".join(lines).strip()
    if len(fitted) <= limit:
        return fitted
    note = _clip_note(text, where)
    return fitted[:max(limit - len(note), 0)].rstrip() + note
