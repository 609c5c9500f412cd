"""A turn with the records it owns: the unit every reader of the ledger above it walks.

Here rather than in the projection because episode memory (which the projection reads) cuts and
builds episodes from the same units: a shared fact of the ledger belongs below both (RFC 0028).
"""

from __future__ import annotations

import attrs

from holon_ctx.ledger.records import Turn
from holon_ctx.ledger.store import StoredRecord

__all__ = ["TurnUnit"]


@attrs.frozen
class TurnUnit:
    """A turn with the records it owns (exact ``turn_id`` match), in append order."""

    stored: StoredRecord
    records: tuple[StoredRecord, ...]
    #: The turn record itself (``stored.record``), kept typed: read thousands of times a call.
    turn: Turn = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        rec = self.stored.record
        if not isinstance(rec, Turn):
            raise TypeError(f"a TurnUnit holds a turn record, got {self.stored.ref}")
        object.__setattr__(self, "turn", rec)

    @property
    def ref(self) -> str:
        return self.stored.ref
