"""Checkpoint turns of the session projection (split from session_state.py): turn numbers come in
blocks of ``SessionPolicy.checkpoint_turns``, and a walk with no saved state starts at the first
turn of the latest block, so every process starts a given position's walk at the same turn.
``session_state`` re-exports both functions.
"""

from __future__ import annotations

from holon_ctx.errors import InputError
from holon_ctx.ledger.records import Turn
from holon_ctx.ledger.store import LedgerStore, StoredRecord
from holon_ctx.projection.base.model import TurnUnit

__all__ = ["checkpoint_turn", "opens_block"]


def checkpoint_turn(store: LedgerStore, end: int, block: int) -> StoredRecord:
    """The newest checkpoint turn before ``end``: the first turn of the block of ``block`` turn
    numbers that the latest turn before ``end`` is in (see ``session_state.SessionPolicy``)."""
    latest = store.latest_turn(end)
    if latest is None:
        raise InputError("the ledger has no turns to project (it holds no turn record yet)")
    assert isinstance(latest.record, Turn)
    first_seq = latest.record.seq // block * block
    found = latest
    before = latest.record.seq
    while True:
        older = store.turns_before(before, block, end)
        for turn in older:
            assert isinstance(turn.record, Turn)
            if turn.record.seq < first_seq:
                return found
            found = turn
        if len(older) < block:
            return found
        before = older[-1].record.seq  # type: ignore[union-attr]


def opens_block(store: LedgerStore, turn: Turn, limit: int, previous: TurnUnit | None,
                block: int) -> bool:
    """``turn`` is a checkpoint: it opens a block of turn numbers (``previous``: the turn before
    it, when the walk knows it)."""
    if previous is None:
        found = store.turns_before(turn.seq, 1, limit)
        if not found:
            return True
        prev = found[0].record
        assert isinstance(prev, Turn)
        return prev.seq // block != turn.seq // block
    return previous.turn.seq // block != turn.seq // block
