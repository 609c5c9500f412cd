"""Read-side caches every persistent store shares: decoded records and the open-wait set.

Both exist because records never change once appended. A projection per turn reads mostly the
window the previous one read, so a store keeps what it decoded (by position, bounded) and decodes
only what is new. And "which waits are open as of ``limit_pos``" needs every wait's latest
transition, O(all waits) in a query, so a store computes it once and then keeps it current from
the transitions appended since (by anyone: it reads past a watermark). How a store fetches rows is
its own business (SQLite reads positions from an index, PostgreSQL reads rows in one round trip);
the bookkeeping is here, once.
"""

from __future__ import annotations

from typing import Final, Protocol

import msgspec

from holon_ctx.ledger.body import record_body
from holon_ctx.ledger.records import Record
from holon_ctx.ledger.state import WaitState
from holon_ctx.ledger.store import StoredRecord
from holon_ctx.tokens import TokenCounter

__all__ = ["DECODED_ROWS", "DecodedRecords", "OpenWaits", "WaitTransitions"]

#: Decoded records a store keeps for the next read (a projection window is ~1-10k records).
DECODED_ROWS: Final = 32_768

_record_decoder = msgspec.json.Decoder(Record)
_wait_decoder = msgspec.json.Decoder(WaitState)


class DecodedRecords:
    """Decoded records by position (and by ref), bounded; cleared whole when full."""

    def __init__(self, counter: TokenCounter, limit: int = DECODED_ROWS) -> None:
        self._counter = counter
        self._limit = limit
        self._by_pos: dict[int, StoredRecord] = {}
        self._by_ref: dict[str, StoredRecord] = {}
        #: ``(pos, tokens)`` of records counted here because the store held no count under this
        #: counter: a store writes them with its next append (:meth:`take_recounted`), so each
        #: record is counted once per counter, not once per process.
        self._recounted: list[tuple[int, int]] = []

    @property
    def counter(self) -> TokenCounter:
        return self._counter

    @property
    def recounted(self) -> bool:
        """Whether counts made here wait to be written (see ``take_recounted``)."""
        return bool(self._recounted)

    def take_recounted(self) -> list[tuple[int, int]]:
        """The counts made since the last call (see ``_recounted``), handed over once."""
        found, self._recounted = self._recounted, []
        return found

    def __contains__(self, pos: int) -> bool:
        return pos in self._by_pos

    def __getitem__(self, pos: int) -> StoredRecord:
        return self._by_pos[pos]

    def by_ref(self, ref: str) -> StoredRecord | None:
        return self._by_ref.get(ref)

    def clear(self) -> None:
        self._by_pos.clear()
        self._by_ref.clear()

    def stored(self, pos: int, ref: str, turn_seq: int | None, line: bytes,
               tokens: int | None) -> StoredRecord:
        """The record of one row, decoded unless already known (a count that changed is taken
        afresh). ``tokens`` None: no count under this store's counter, so it is recounted."""
        hit = self._by_pos.get(pos)
        if hit is not None and (tokens is None or hit.tokens == tokens):
            return hit
        if len(self._by_pos) >= self._limit:
            self.clear()
        record = _record_decoder.decode(line)
        if tokens is None:
            # Counted under another counter: recount rather than trust a foreign count. Reads never
            # write: the store persists the count with its next append (take_recounted).
            tokens = self._counter.count(record_body(record))
            if len(self._recounted) < self._limit:
                self._recounted.append((pos, tokens))
        found = StoredRecord(pos=pos, ref=ref, record=record, tokens=tokens, turn_seq=turn_seq)
        self._by_pos[pos] = found
        self._by_ref[ref] = found
        return found


class WaitTransitions(Protocol):
    """What :class:`OpenWaits` asks of a store's ``wait_states`` (states as encoded bytes)."""

    def initial_open_waits(self) -> tuple[int, list[bytes]]:
        """``(watermark, states)``: one past the newest transition, and the latest state of every
        wait whose latest transition below the watermark is open."""
        ...

    def transitions_since(self, seen: int) -> list[tuple[int, str, str, bytes]]:
        """``(pos, wait_id, status, state)`` of every transition at ``pos >= seen``, by pos."""
        ...

    def changed_waits(self, lo: int, hi: int) -> dict[str, tuple[str, bytes] | None]:
        """Waits with a transition at ``lo <= pos < hi``, each with its latest ``(status, state)``
        below ``lo`` (None when it had none)."""
        ...


class OpenWaits:
    """``open_waits(limit_pos)`` in O(open waits + transitions since the last call).

    The open set is kept as of every transition below a watermark. An earlier ``limit_pos`` is
    answered by re-deciding only the waits that changed at or after it.
    """

    def __init__(self, source: WaitTransitions) -> None:
        self._source = source
        self._open: dict[str, WaitState] | None = None
        self._seen = 0

    def reset(self) -> None:
        self._open = None
        self._seen = 0

    def at(self, limit_pos: int) -> list[WaitState]:
        current = self._current()
        found = {w: s for w, s in current.items() if s.pos < limit_pos}
        if limit_pos < self._seen:
            for wait_id, latest in self._source.changed_waits(limit_pos, self._seen).items():
                if latest is not None and latest[0] == "open":
                    found[wait_id] = _wait_decoder.decode(latest[1])
                else:
                    found.pop(wait_id, None)
        return sorted(found.values(), key=lambda w: w.pos)

    def _current(self) -> dict[str, WaitState]:
        if self._open is None:
            seen, states = self._source.initial_open_waits()
            decoded = [_wait_decoder.decode(s) for s in states]
            self._open = {w.wait_id: w for w in decoded}
            self._seen = seen
            return self._open
        for pos, wait_id, status, state in self._source.transitions_since(self._seen):
            if status == "open":
                self._open[wait_id] = _wait_decoder.decode(state)
            else:
                self._open.pop(wait_id, None)
            self._seen = pos + 1
        return self._open
