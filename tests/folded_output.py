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
