"""What answered a state line: the records that resolve a few keys, read once per store.

The store derives a wait's state from its ``wait`` records alone (RFC 0001): a wait a runtime
opened and never closed stays ``open`` there after the task result or external event that answers
it (``wait_id`` set). Every reader that states a wait as open — the projection's work item and
tail, an episode's ``STILL OPEN`` item — asks :func:`answered_waits` first. It sits in the ledger
layer so that memory (episode recall) and the projection read it alike.

The resolving record may lie anywhere after what it resolves: a wait opened at record 10 and
answered at record 20 of a 100,000-record ledger is answered at every later position. Reading
back only the newest records (4,096 until 2026-12-05) left such a wait stated open, so a state
line contradicted a newer record (issue 25, item 2). Reading every record from the wait's opening
at every projection would make each projection pay for the whole ledger. :class:`KeyedEvents`
does neither: per store, it keeps the events of each key asked about (a wait's answers, a call's
runs) over the span read so far, and reads only the records past that span the next time. Records
never change once appended, so what was read stays true; a process pays for each record once.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Final, Protocol, runtime_checkable

import attrs

from holon_ctx.ledger.records import ExternalEvent, TaskResult, Wait
from holon_ctx.ledger.state import WaitState
from holon_ctx.ledger.store import LedgerStore, StoredRecord

__all__ = ["SETTLE_SCAN", "Event", "Extract", "answered_waits", "closed_before", "keyed_events"]

#: Records read per page when an index catches up: bounds what one read holds in memory, not how
#: far back a resolving record is found. A projection pays the read only for records no earlier
#: projection on the same store read (on a 6,000-record SQLite ledger with a wait never closed,
#: 8,192 tokens, 2026-12-03, load 15: 8.8 ms without the read, 13.0 ms reading all 6,000 records
#: at every projection, which is what this index saves after the first).
SETTLE_SCAN: Final = 4096
#: Keys an index keeps per store before it starts afresh (a key is a wait id or a call: a few per
#: compaction; this only bounds a process that runs for months).
_KEYS: Final = 4096

#: ``(pos, ref, tag)``: a record at ``pos`` did ``tag`` (the extractor's word) to a key.
Event = tuple[int, str, str]
#: The ``(key, tag)`` events one record carries (most carry none).
Extract = Callable[[StoredRecord], Iterable[tuple[str, str]]]


@attrs.define
class _Span:
    """A key's events at ``lo <= pos < hi``, in ledger order."""

    lo: int
    hi: int
    events: list[Event]


class _Index:
    def __init__(self) -> None:
        self.spans: dict[str, _Span] = {}

    def events(self, store: LedgerStore, extract: Extract, wanted: Mapping[str, int],
               limit_pos: int) -> dict[str, list[Event]]:
        need: dict[str, int] = {}  # key -> the first position whose events it lacks
        for key, lo in wanted.items():
            span = self.spans.get(key)
            if span is None or span.lo > lo or span.hi < lo:
                if span is None and len(self.spans) >= _KEYS:
                    self.spans.clear()
                self.spans[key] = span = _Span(lo, lo, [])
            if span.hi < limit_pos:
                need[key] = span.hi
        if need:
            reached = self._read(store, extract, need, limit_pos)
            for key, start in need.items():
                span = self.spans[key]
                span.hi = max(span.hi, min(reached, limit_pos)) if reached > start else span.hi
        return {key: [e for e in self.spans[key].events if lo <= e[0] < limit_pos]
                for key, lo in wanted.items()}

    def _read(self, store: LedgerStore, extract: Extract, need: dict[str, int],
              limit_pos: int) -> int:
        """Reads ``min(need) <= pos < limit_pos`` page by page, adding each key's events at or
        after its own start; returns one past the last position read (a store stops at its
        end, which may be short of ``limit_pos``)."""
        start = min(need.values())
        reached = start
        for lo in range(start, limit_pos, SETTLE_SCAN):
            page = store.records_between(lo, min(lo + SETTLE_SCAN, limit_pos))
            if not page:
                break
            for stored in page:
                for key, tag in extract(stored):
                    first = need.get(key)
                    if first is not None and stored.pos >= first:
                        self.spans[key].events.append((stored.pos, stored.ref, tag))
            reached = page[-1].pos + 1
        return reached


_LOCK = threading.Lock()
_INDEXES: weakref.WeakKeyDictionary[object, dict[str, _Index]] = weakref.WeakKeyDictionary()


def keyed_events(store: LedgerStore, kind: str, extract: Extract, wanted: Mapping[str, int],
                 limit_pos: int) -> dict[str, list[Event]]:
    """For each key of ``wanted`` (key → the first position that counts), the events
    ``extract`` finds for it at ``wanted[key] <= pos < limit_pos``, in ledger order.

    ``kind`` names the extractor (one index per store and kind). Only records no earlier call
    on this store read for these keys are read; a store that cannot be weakly referenced is
    read afresh each time."""
    if not wanted:
        return {}
    with _LOCK:
        try:
            per_store = _INDEXES.setdefault(store, {})
        except TypeError:
            return _Index().events(store, extract, wanted, limit_pos)
        index = per_store.setdefault(kind, _Index())
        return index.events(store, extract, wanted, limit_pos)


def _answers(stored: StoredRecord) -> Iterable[tuple[str, str]]:
    rec = stored.record
    if isinstance(rec, TaskResult | ExternalEvent) and rec.wait_id is not None:
        return ((rec.wait_id, "answer"),)
    return ()


def answered_waits(store: LedgerStore, waits: Sequence[WaitState], limit_pos: int) -> dict[str, str]:
    """Wait id → the ref of the first task result or external event naming it after its latest
    transition, for each of ``waits`` (open by their records, as of ``limit_pos``) so answered,
    however far back that record lies."""
    if not waits:
        return {}
    wanted = {w.wait_id: w.pos + 1 for w in waits}
    found = keyed_events(store, "answers", _answers, wanted, limit_pos)
    return {wait_id: events[0][1] for wait_id, events in found.items() if events}


@runtime_checkable
class _LatestWait(Protocol):
    def wait_state(self, wait_id: str) -> WaitState | None: ...


def closed_before(store: LedgerStore, pos: int, wait_id: str) -> str | None:
    """How wait ``wait_id`` stood just before ledger position ``pos`` when it was no longer
    waiting: its status (``"resolved"``, ``"cancelled"``, ``"expired"``; ``"closed"`` when
    that is not known), or ``"answered by REF"`` (an earlier task result or event named it
    since); None when it was still open.

    A record at ``pos`` naming the wait is then a late or repeated answer (a webhook delivered
    twice, a result after the wait was cancelled), not the one that resolved it: the prompt's
    label must not say it matched. Only records before ``pos`` count, so the answer is the same
    at every later projection and in a rebuild."""
    wait = next((w for w in store.open_waits(pos) if w.wait_id == wait_id), None)
    if wait is None:
        # The status that closed it: the wait's latest transition when that is before ``pos``
        # (every store keeps the latest); else the last one before ``pos``, read from the
        # wait's first opening on. A transition after ``pos`` (the id opened again, a closed
        # wait expired) must not change the label: a restarted session would not send what
        # the running one did.
        latest = store.wait_state(wait_id) if isinstance(store, _LatestWait) else None
        if latest is not None and latest.pos < pos:
            return latest.status.value
        opened = store.get(latest.opened_ref) if latest is not None else None
        if opened is None:
            return "closed"
        events = keyed_events(store, "wait_transitions", _transitions,
                              {wait_id: opened.pos}, pos)[wait_id]
        return events[-1][2] if events else "closed"
    by = answered_waits(store, [wait], pos).get(wait_id)
    return None if by is None else f"answered by {by}"


def _transitions(stored: StoredRecord) -> Iterable[tuple[str, str]]:
    rec = stored.record
    return ((rec.wait_id, rec.status.value),) if isinstance(rec, Wait) else ()
