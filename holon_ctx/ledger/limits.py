"""Where a reader of the ledger stops: the current turn and the position limit "as of" a turn or a
position. Here rather than in the projection because the archiver asks the same question, and
memory sits below projection (RFC 0028); ``holon_ctx.projection.planning.view`` re-exports it."""

from __future__ import annotations

from holon_ctx.errors import InputError, UnknownRefError
from holon_ctx.ledger.records import Turn
from holon_ctx.ledger.store import LedgerStore, StoredRecord

__all__ = ["resolve_limit"]


def resolve_limit(store: LedgerStore, at: str | None,
                  limit_pos: int | None = None) -> tuple[StoredRecord, int]:
    """The current turn and the exclusive position limit for projecting as of ``at`` (a turn:
    everything up to the next turn), or as of position ``limit_pos`` (the latest turn before it,
    with the records before it: a session projection walks the ledger record by record)."""
    end = store.end_pos() if limit_pos is None else min(limit_pos, store.end_pos())
    if at is None:
        current = store.latest_turn(end)
        if current is None:
            raise InputError("the ledger has no turns to project (it holds no turn record yet)")
        return current, end
    turn_id = at.removeprefix("turn:")
    current = store.turn(turn_id)
    if current is None:
        raise UnknownRefError(f"turn:{turn_id}", hint="no such turn in the ledger")
    assert isinstance(current.record, Turn)
    nxt = store.next_turn_pos(current.record.seq)
    return current, end if nxt is None else nxt
