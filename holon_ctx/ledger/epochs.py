"""Where a session projection keeps its re-plan state: beside the ledger, derived, rebuildable.

A session projection (RFC 0010) walks the ledger record by record; at a re-plan it freezes a
stable prefix and a history, and starts an *epoch*. What an epoch froze is derived data — walking
the ledger again from its last checkpoint re-creates it byte for byte — but that costs a re-plan
and a walk, so it is persisted: a new process loads the current epoch and renders only the
records appended since it began.

The SQLite store (:mod:`holon_ctx.ledger.epochs_sqlite`) keeps two tables in the ledger's file,
created on first use with ``IF NOT EXISTS`` (the ledger's own schema keeps its version; dropping
these tables loses nothing the ledger cannot rebuild):

``session_epochs``  (key, epoch) → the turn it started at and its ledger position: one small row
                    per re-plan, so ``preview``, ``explain`` and ``replay`` can say which epoch a
                    turn belongs to.
``session_state``   key → the latest epoch's frozen state (:class:`EpochState`, msgspec JSON).

The types and the in-memory store live here, with no I/O, so the projection core can name them.
``key`` digests everything the walk depends on besides the ledger (budget, format, policy, counter,
engine version), so states of different settings never mix. Writes happen at re-plans only.
Two processes walking the same ledger with the same key write identical rows (the walk is
deterministic), so concurrent writers need no coordination beyond SQLite's own locking.
The PostgreSQL store (:mod:`holon_ctx.postgres.epochs`) keeps the same two tables, keyed by the
session's ``sid`` first, in the database that holds the session's ledger.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final, Protocol

import msgspec

__all__ = ["EPOCH_FORMAT", "EpochStart", "EpochState", "EpochStore", "MemoryEpochStore",
           "ReadThroughEpochs", "decode_starts", "decode_state"]

#: Version of the persisted :class:`EpochState` layout; part of every key, so a new layout starts
#: afresh instead of misreading an old one (3: a part's spans carry their block's mark, the
#: preview's styles; an epoch saved at 2 has none, so it is re-planned rather than shown plain).
EPOCH_FORMAT: Final = 3


class EpochStart(msgspec.Struct, frozen=True, kw_only=True):
    """Where an epoch began: the turn the re-plan was made for and the ledger position limit."""

    epoch: int
    turn_id: str
    turn_seq: int
    limit_pos: int
    #: Why the re-plan happened (``first_turn``, ``over_budget``, ``environment_changed``, …).
    reason: str


class EpochState(msgspec.Struct, frozen=True, kw_only=True):
    """What the current epoch froze, encoded by the session projection (its parts, their token
    counts, what they show); opaque here."""

    key: str
    start: EpochStart
    frozen: bytes


class EpochStore(Protocol):
    """Persistence for session projections; every store offers one (see ``epoch_store_for``).

    What was persisted is derived data: a row that no longer decodes is treated as absent (the
    walk rebuilds it), never trusted and never an error. Failures of the storage itself are
    one-line ``StoreError``s.
    """

    def load(self, key: str) -> EpochState | None:
        """The key's current epoch, or None (nothing kept, or what is kept no longer decodes)."""
        ...

    def save(self, state: EpochState) -> None:
        """Log ``state``'s start, and keep it as the key's current epoch unless a later epoch is
        already kept (a request for an earlier turn re-plans an old epoch; it must not replace
        the current one). Idempotent."""
        ...

    def starts(self, key: str, limit: int = 1000) -> list[EpochStart]:
        """The newest ``limit`` epoch starts of ``key`` (by epoch), oldest first; none for a
        ``limit`` of 0 or less."""
        ...

    def clear(self, key: str | None = None) -> None:
        """Forget the state of ``key`` (or of every key): the next request rebuilds it."""
        ...

    def close(self) -> None: ...


_encode = msgspec.json.encode
_state_decoder = msgspec.json.Decoder(EpochState)
_start_decoder = msgspec.json.Decoder(EpochStart)


def decode_state(raw: bytes) -> EpochState | None:
    """A persisted state, or None when it no longer decodes (rebuilt, never trusted)."""
    try:
        return _state_decoder.decode(raw)
    except msgspec.DecodeError:
        return None


def decode_starts(raws: Iterable[bytes]) -> list[EpochStart]:
    """The persisted starts that still decode, in the order given (one that does not is left
    out: it only labels turns, and the next re-plan writes it again)."""
    out: list[EpochStart] = []
    for raw in raws:
        try:
            out.append(_start_decoder.decode(raw))
        except msgspec.DecodeError:
            continue
    return out


class MemoryEpochStore:
    """Epoch state in a dict: for in-memory ledgers and tests."""

    def __init__(self) -> None:
        self._states: dict[str, bytes] = {}
        self._starts: dict[str, dict[int, bytes]] = {}

    def load(self, key: str) -> EpochState | None:
        raw = self._states.get(key)
        return None if raw is None else decode_state(raw)

    def save(self, state: EpochState) -> None:
        # Stored encoded, as the SQLite store does: a caller can never mutate what was saved.
        kept = self.load(state.key)
        if kept is None or kept.start.epoch <= state.start.epoch:
            self._states[state.key] = _encode(state)
        self._starts.setdefault(state.key, {})[state.start.epoch] = _encode(state.start)

    def starts(self, key: str, limit: int = 1000) -> list[EpochStart]:
        rows = self._starts.get(key, {})
        return decode_starts(rows[n] for n in sorted(rows)[len(rows) - max(limit, 0):])

    def clear(self, key: str | None = None) -> None:
        if key is None:
            self._states.clear()
            self._starts.clear()
        else:
            self._states.pop(key, None)
            self._starts.pop(key, None)

    def close(self) -> None:
        """Nothing to release (the state lives as long as the object)."""


class ReadThroughEpochs:
    """A reader's view of a persisted epoch store: the re-plans a runtime saved are read, the
    reader's own are kept in memory. The CLI never writes to the database it reads, yet a
    ``preview`` of a ledger a runtime worked on starts from the runtime's newest epoch instead
    of walking from the last checkpoint (RFC 0024: the same request, at a fraction of the
    cost; the walk's determinism makes it the same bytes either way)."""

    def __init__(self, persisted: EpochStore) -> None:
        self._persisted = persisted
        self._memory = MemoryEpochStore()
        #: Keys cleared here: their persisted state is not read again.
        self._cleared: set[str] = set()
        self._all_cleared = False

    def _reads(self, key: str) -> bool:
        return not self._all_cleared and key not in self._cleared

    def load(self, key: str) -> EpochState | None:
        mine = self._memory.load(key)
        theirs = self._persisted.load(key) if self._reads(key) else None
        if mine is None or (theirs is not None and theirs.start.epoch > mine.start.epoch):
            return theirs
        return mine

    def save(self, state: EpochState) -> None:
        self._memory.save(state)

    def starts(self, key: str, limit: int = 1000) -> list[EpochStart]:
        found = {s.epoch: s for s in (self._persisted.starts(key, limit)
                                      if self._reads(key) else [])}
        found.update((s.epoch, s) for s in self._memory.starts(key, limit))
        ordered = [found[n] for n in sorted(found)]
        return ordered[len(ordered) - max(limit, 0):]

    def clear(self, key: str | None = None) -> None:
        self._memory.clear(key)
        if key is None:
            self._all_cleared = True
        else:
            self._cleared.add(key)

    def close(self) -> None:
        self._persisted.close()
