"""The canonical body text of a record: what the renderer prints and what append-time counts cover.

A body is *block-safe* (RFC 0002): it starts with a non-blank line and ends with exactly one
``"\\n"``, so its token count adds exactly to the counts of the lines around it. It is also
*fence-safe*: any text that could open or close a data fence (``<data``, ``</data``) is neutralised,
so untrusted text can never end its own fence. The same function runs when a record is appended
(to cache its count) and when it is rendered, which is what makes the cached count exact.
"""

from __future__ import annotations

import re

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

__all__ = ["CLAIMED_LABEL", "FENCE_TAG", "OPERATOR_LABEL", "block_safe", "neutralise_fences",
           "record_body"]

#: The element name of data fences; see :func:`neutralise_fences`.
FENCE_TAG = "data"
#: The label the renderer puts above the operator's own words, and what a forgery of it becomes.
OPERATOR_LABEL = "operator (trusted)"
CLAIMED_LABEL = "operator (claimed)"
_FENCE_LIKE = re.compile(rf"<(/?)({FENCE_TAG})\b", re.IGNORECASE)
_TRUSTED_LABEL = re.compile(r"operator\s*\(trusted\)", re.IGNORECASE)


def neutralise_fences(text: str) -> str:
    """Make text unable to open or close a fence, or to wear the trusted-operator label.

    ``<data`` / ``</data`` become ``‹data`` / ``‹/data``; the renderer's trusted label
    ``operator (trusted)`` becomes ``operator (claimed)`` so quoted text cannot pose as it.
    """
    text = _FENCE_LIKE.sub(lambda m: f"\u2039{m.group(1)}{m.group(2)}", text)
    return _TRUSTED_LABEL.sub(CLAIMED_LABEL, text)


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
