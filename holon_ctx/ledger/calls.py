"""The state of each tool call, as its newest record says (RFC 0008 decision 5).

A call is named by its ``call_id``. Its records are the assistant reply that announced it (the
reply's ``tool_calls``) and ``tool`` records of its id: a ``pending`` one (written when a turn
opened with the call still out) and its result. The newest of them is the call's state:

- ``announced``: waiting in the reply's turn; a ``pending`` record is due when a turn opens;
- ``pending``: waiting, and takes a late result however many turns later;
- ``answered``: a further result is refused.

Every store keeps the newest record's position and state per call id, written in the append's own
transaction (a derived index, rebuilt from the records as the others are), so a session reads the
calls still waiting in one query, however old, and never the ledger they are in.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

from holon_ctx.ledger.records import Message, Record, Tool
from holon_ctx.ledger.store import CallRecord, CallState

__all__ = ["CallRecord", "CallState", "call_marks", "last_per_call", "newest_marks"]

_Row = TypeVar("_Row", bound=Sequence[Any])


def call_marks(record: Record) -> list[tuple[str, CallState]]:
    """The calls ``record`` gives a new state: each call a reply announces, or the call of a
    ``tool`` record (``pending``, or its result)."""
    if isinstance(record, Message):
        return [(call.call_id, CallState.ANNOUNCED) for call in record.tool_calls]
    if isinstance(record, Tool) and record.call_id is not None:
        return [(record.call_id, CallState.PENDING if record.pending else CallState.ANSWERED)]
    return []


def newest_marks(rows: Iterable[tuple[int, Record]]) -> dict[str, tuple[int, CallState]]:
    """Each call's newest ``(position, state)`` among ``(position, record)`` pairs in ledger
    order: what one statement may write per call (an upsert touches a row once)."""
    newest: dict[str, tuple[int, CallState]] = {}
    for pos, record in rows:
        for call_id, state in call_marks(record):
            newest[call_id] = (pos, state)
    return newest


def last_per_call(rows: Iterable[_Row]) -> list[_Row]:
    """Index rows in ledger order, each ``(…key, pos, state)`` (the key: the call id, with the
    session before it on PostgreSQL), the last of each key only: a reply's call and its result
    are often in one batch of an import, and one upsert per call is half the statements."""
    return list({tuple(row[:-2]): row for row in rows}.values())
