"""A test oracle for RFC 0016's folds of repeated output lines, independent of the code under test.

A tool output is *shown whole* in a prompt when its fence's body, with every repeat note read
back, is exactly its text: ``[line above ×N]`` (or ``[P lines above ×N]``) stands for N copies in
all of the line (group) right above it, and ``[N lines as in REF]`` for N consecutive lines that
the output ``REF``, fenced *above* in the same prompt, shows in the same order. A note that reads
back to anything else — a different line, a ref shown below or not at all — is a fold that hides
a different result.
"""

from __future__ import annotations

import re

from holon_ctx.ledger.body import record_body
from holon_ctx.ledger.records import Record
from holon_ctx.projection.base.formats import neutralise_repeat_marks

_ABOVE = re.compile(r"^\[(?:line|(\d+) lines) above ×(\d+)\]$")
_AS_IN = re.compile(r"^\[(?:line|(\d+) lines) as in (\S+)\]$")


def fence_body(text: str, ref: str, before: int | None = None) -> tuple[int, list[str]] | None:
    """Where the fence of ``ref`` opens in ``text`` (searched before offset ``before``), and the
    lines of its body; None when it is not there."""
    opener = re.compile(rf"^<data {re.escape(ref)}(?: [^\n]*)?>\n", re.MULTILINE)
    found = opener.search(text, 0, len(text) if before is None else before)
    if found is None:
        return None
    end = text.find("\n</data>\n", found.end() - 1)
    return found.start(), text[found.end():end + 1].split("\n")[:-1]


def reads_back(want: list[str], shown: list[str], text: str, at: int) -> bool:
    """Whether ``shown`` (a fence body's lines, the fence at offset ``at`` of ``text``) reads back
    to exactly ``want``."""
    i = 0
    for line in shown:
        if (m := _ABOVE.match(line)) is not None:
            period, count = int(m.group(1) or 1), int(m.group(2))
            group = want[i - period:i]
            more = want[i:i + (count - 1) * period]
            if len(group) != period or more != group * (count - 1):
                return False
            i += len(more)
        elif (m := _AS_IN.match(line)) is not None:
            count, ref = int(m.group(1) or 1), m.group(2)
            other = fence_body(text, ref, before=at)
            run = want[i:i + count]
            if other is None or len(run) != count or not any(
                    other[1][k:k + count] == run for k in range(len(other[1]))):
                return False
            i += count
        elif i < len(want) and want[i] == line:
            i += 1
        else:
            return False
    return i == len(want)


def shown_whole(record: Record, ref: str, text: str) -> bool:
    """``record``'s text in ``text`` verbatim, or its fence's body reading back to it exactly."""
    body = record_body(record)
    if body in text:
        return True
    fence = fence_body(text, ref)
    return fence is not None and reads_back(body.split("\n")[:-1], fence[1], text, fence[0])


def _as_quoted_label(body: str) -> str:
    """A one-line runtime text as a label line shows it whole (RFC 0027): between straight
    double quotes, its own quotes and backslashes escaped. A text of several lines never matches
    (a label flattens it, which is not verbatim)."""
    line = body.removesuffix("\n")
    if not line or "\n" in line:
        return "\0"
    return '"' + line.replace("\\", "\\\\").replace('"', '\\"') + '"'


def verbatim_or_pointer(record: Record, ref: str, text: str) -> str:
    """``""`` when ``record``'s text is in ``text`` with every line as the record has it — no
    note of RFC 0016 in place of any line, only quoted notes neutralised — or cut to fit with a
    pointer to its full text (an excerpt's ``full text: REF``, or a ``[clipped`` note right
    after its fence); else why not. Stricter than :func:`shown_whole`: the newest evidence is read
    as it is, never resolved through notes (RFC 0023)."""
    body = record_body(record)
    if not body.strip():
        return ""
    fence = fence_body(text, ref)
    if fence is None:
        return "" if (body in text or _as_quoted_label(body) in text
                      or f"full text: {ref}" in text) else f"{ref}: not shown"
    at, lines = fence
    for line in lines:
        if _ABOVE.match(line) or _AS_IN.match(line):
            return f"{ref}: note {line}"
    shown = "".join(line + "\n" for line in lines)
    # A tool's line that reads as a note keeps its text with ⁅ for its bracket (RFC 0016).
    if shown in (body, body + "\n", neutralise_repeat_marks(body)) or body in text:
        return ""
    end = text.find("\n</data>\n", at)
    if any(f"full text: {ref}" in line for line in lines) or (
            end >= 0 and text[end + 1:].startswith("</data>\n[clipped")):
        return ""
    return f"{ref}: changed, no pointer to its full text"

