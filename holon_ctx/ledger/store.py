"""The store Protocol: what the projection engine may ask of a ledger, and nothing more.

Positions (``pos``) number records in append order from 0. Every read takes ``limit_pos``, an
*exclusive* upper bound, so a projection "as of" an earlier turn sees exactly the records that were
appended before the next turn began. Each read is bounded by its arguments (a range of turn
sequence numbers, a work item, the newest N), never by the size of the history.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from enum import StrEnum
from typing import Protocol, runtime_checkable

import attrs

from holon_ctx.ledger.records import Record
from holon_ctx.ledger.state import WaitState, WorkItemState

__all__ = ["CallRecord", "CallState", "LedgerStats", "LedgerStore", "StoredRecord"]


@attrs.frozen
class StoredRecord:
    """A record as stored: its position, ref, owning turn's sequence and cached token count."""

    pos: int
    ref: str
    record: Record
    #: Tokens of :func:`holon_ctx.ledger.body.record_body` under the store's counter.
    tokens: int
    turn_seq: int | None


class CallState(StrEnum):
    """A tool call's state, as its newest record says (``holon_ctx.ledger.calls``)."""

    ANNOUNCED = "announced"
    PENDING = "pending"
    ANSWERED = "answered"


@attrs.frozen
class CallRecord:
    """A call and its newest record (the announcing reply, its ``pending`` record or its result)."""

    call_id: str
    state: CallState
    stored: StoredRecord


@attrs.frozen
class LedgerStats:
    turns: int
    records: int
    records_by_kind: dict[str, int]
    tokens_by_kind: dict[str, int]
    tokens_by_trust: dict[str, int]
    counter: str


@runtime_checkable
class LedgerStore(Protocol):
    @property
    def counter_identity(self) -> str: ...

    def append(self, records: Iterable[Record], *, source: str = "<append>",
               renumber_turns: bool = False, expect_end: int | None = None) -> int:
        """Append atomically; returns how many records (derived turns included) were stored.

        Safe with other writers: the batch is numbered inside the store's write transaction.
        ``renumber_turns=True`` gives the batch's turns the next sequence numbers of the ledger
        (their order kept), for a writer that does not own the numbering (RFC 0006).
        ``expect_end``: append only if the ledger ends there (checked inside the transaction;
        else ``LedgerMovedError`` and nothing is written): a writer that minted ids from the
        position it read.
        """
        ...

    def append_lines(
        self, items: Iterable[tuple[int | None, Record]], *, source: str,
        renumber_turns: bool = False, expect_end: int | None = None,
    ) -> int:
        """Like :meth:`append` with the source line of each record, for located errors."""
        ...

    def end_pos(self) -> int: ...

    def get(self, ref: str) -> StoredRecord | None: ...

    def turn(self, turn_id: str) -> StoredRecord | None: ...

    def next_turn_pos(self, seq: int) -> int | None:
        """Position of the first turn with a sequence above ``seq`` (None when there is none)."""
        ...

    def latest_turn(self, limit_pos: int) -> StoredRecord | None: ...

    def turns_before(self, seq: int, count: int, limit_pos: int) -> list[StoredRecord]:
        """Up to ``count`` turns with sequence < ``seq``, newest first."""
        ...

    def records_of_turns(self, lo_seq: int, hi_seq: int, limit_pos: int) -> list[StoredRecord]:
        """Non-turn records owned by turns with ``lo_seq <= seq <= hi_seq``, in append order."""
        ...

    def records_between(self, lo_pos: int, hi_pos: int) -> list[StoredRecord]:
        """Every record (turns included) with ``lo_pos <= pos < hi_pos``, in append order: what a
        session projection walks since its last request (bounded by the caller's range)."""
        ...

    def high_turns_before(self, seq: int, count: int, limit_pos: int) -> list[StoredRecord]:
        """Up to ``count`` turns with sequence < ``seq`` that are *marked high* as of
        ``limit_pos``, newest first.

        A turn is marked high by the first record at a position < ``limit_pos`` — the turn record
        itself or a record it owns — for which :func:`holon_ctx.ledger.facts.marks_high` holds
        (the append path sets ``Row.marks_high``). A derived index: kept at append time,
        rebuilt by ``rebuild_derived``, and rebuilt when ``facts.HIGH_INDEX_KEY`` changes.
        """
        ...

    def latest_operator_turn(self, before_seq: int, limit_pos: int) -> StoredRecord | None:
        """Newest turn with seq < ``before_seq`` whose trigger is trusted operator input."""
        ...

    def work_item_state(self, work_item_id: str, limit_pos: int) -> WorkItemState | None: ...

    def open_waits(self, limit_pos: int) -> list[WaitState]: ...

    def latest_environment(self, limit_pos: int) -> StoredRecord | None: ...

    def pins(self, limit_pos: int, count: int) -> list[StoredRecord]:
        """The newest ``count`` pins, oldest first."""
        ...

    def waiting_calls(self) -> tuple[int, list[CallRecord]]:
        """The ledger's end and, as of that end (read together), every tool call whose newest
        record is its announcement or ``pending``, oldest record first: the calls still waiting
        for a result, however old (``holon_ctx.ledger.calls``; a derived index kept at append
        time, so the read is bounded by the calls waiting, never by the history)."""
        ...

    def call_record(self, call_id: str) -> CallRecord | None:
        """Call ``call_id``'s newest record, whatever its state (None: no record names it)."""
        ...

    def iter_records(self) -> Iterator[Record]: ...

    def stats(self) -> LedgerStats: ...

    def close(self) -> None: ...
