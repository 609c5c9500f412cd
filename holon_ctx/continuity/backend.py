"""The storage Protocol under the governed store, and its in-memory implementation.

The Protocol is deliberately small and untyped (bytes in, bytes out): typed records, decoding and
the rules live once, in :class:`~holon_ctx.continuity.store.ContinuityStore`, and every backend
passes the same conformance suite. Four append-only logs:

* facts    (kind, key, scope, body): governed records; the current value of (kind, key) is its
           latest row, and ``scope`` (a session or tenant id) is what listings filter on;
* envelopes: one row per envelope id, never replaced;
* journal  (envelope_id, step): one row per compaction step, never replaced;
* events   : trace events, numbered by a store-wide sequence.

Times are passed as fixed-width UTC strings (``YYYY-MM-DDTHH:MM:SS.ffffffZ``) so that the latest
time a backend has seen is a plain string maximum.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol, runtime_checkable

from holon_ctx.continuity.exceptions import DuplicateRecordError
from holon_ctx.errors import StoreError, quote_value

__all__ = ["ContinuityBackend", "MemoryBackend", "StoredEvent"]


class StoredEvent(NamedTuple):
    """A trace event row as a backend returns it."""

    seq: int
    event_type: str
    envelope_id: str
    session_id: str
    payload: bytes
    recorded_at: str


@runtime_checkable
class ContinuityBackend(Protocol):
    """Append-only storage primitives. Implementations raise ``StoreError`` on storage failure."""

    def append_fact(self, kind: str, key: str, scope: str, body: bytes, at: str) -> None: ...

    def latest_fact(self, kind: str, key: str) -> bytes | None: ...

    def latest_facts_in_scope(self, kind: str, scope: str) -> list[bytes]:
        """Current body of every key of ``kind`` whose latest row is in ``scope``, oldest first."""
        ...

    def append_envelope(self, envelope_id: str, session_id: str, body: bytes, at: str) -> None:
        """Raise ``DuplicateRecordError`` if the id exists."""
        ...

    def envelope(self, envelope_id: str) -> bytes | None: ...

    def envelope_ids(self, session_id: str) -> list[str]:
        """Envelope ids of a session in append order."""
        ...

    def append_step(self, envelope_id: str, step: str, body: bytes, at: str) -> None:
        """Raise ``DuplicateRecordError`` if the step is already recorded."""
        ...

    def steps(self, envelope_id: str) -> dict[str, bytes]: ...

    def append_event(
        self, event_type: str, envelope_id: str, session_id: str, payload: bytes, at: str
    ) -> int:
        """Append a trace event; return its sequence number (strictly increasing)."""
        ...

    def events(self, *, envelope_id: str | None, session_id: str | None) -> list[StoredEvent]:
        """Events in sequence order, filtered by whichever ids are given."""
        ...

    def last_recorded_at(self) -> str | None: ...

    def close(self) -> None: ...


class MemoryBackend:
    """Process-local backend for tests, the CLI experiment and embedding without a database."""

    def __init__(self) -> None:
        self._facts: list[tuple[str, str, str, bytes]] = []
        self._latest: dict[tuple[str, str], int] = {}
        self._envelopes: dict[str, tuple[str, bytes]] = {}
        self._envelope_order: list[str] = []
        self._steps: dict[str, dict[str, bytes]] = {}
        self._events: list[StoredEvent] = []
        self._last_at: str | None = None
        self._closed = False

    def _touch(self, at: str) -> None:
        if self._closed:
            raise StoreError("continuity store is closed")
        self._last_at = at if self._last_at is None else max(self._last_at, at)

    def _open(self) -> None:
        if self._closed:
            raise StoreError("continuity store is closed")

    def append_fact(self, kind: str, key: str, scope: str, body: bytes, at: str) -> None:
        self._touch(at)
        self._facts.append((kind, key, scope, bytes(body)))
        self._latest[(kind, key)] = len(self._facts) - 1

    def latest_fact(self, kind: str, key: str) -> bytes | None:
        self._open()
        index = self._latest.get((kind, key))
        return None if index is None else self._facts[index][3]

    def latest_facts_in_scope(self, kind: str, scope: str) -> list[bytes]:
        self._open()
        indexes = sorted(
            index
            for (fact_kind, _), index in self._latest.items()
            if fact_kind == kind and self._facts[index][2] == scope
        )
        return [self._facts[index][3] for index in indexes]

    def append_envelope(self, envelope_id: str, session_id: str, body: bytes, at: str) -> None:
        self._open()
        if envelope_id in self._envelopes:
            raise DuplicateRecordError(f"envelope {quote_value(envelope_id)} already recorded")
        self._touch(at)
        self._envelopes[envelope_id] = (session_id, bytes(body))
        self._envelope_order.append(envelope_id)

    def envelope(self, envelope_id: str) -> bytes | None:
        self._open()
        row = self._envelopes.get(envelope_id)
        return None if row is None else row[1]

    def envelope_ids(self, session_id: str) -> list[str]:
        self._open()
        return [e for e in self._envelope_order if self._envelopes[e][0] == session_id]

    def append_step(self, envelope_id: str, step: str, body: bytes, at: str) -> None:
        self._open()
        steps = self._steps.setdefault(envelope_id, {})
        if step in steps:
            raise DuplicateRecordError(
                f"step {quote_value(step)} of {quote_value(envelope_id)} already recorded")
        self._touch(at)
        steps[step] = bytes(body)

    def steps(self, envelope_id: str) -> dict[str, bytes]:
        self._open()
        return dict(self._steps.get(envelope_id, {}))

    def append_event(
        self, event_type: str, envelope_id: str, session_id: str, payload: bytes, at: str
    ) -> int:
        self._touch(at)
        seq = len(self._events) + 1
        self._events.append(StoredEvent(seq, event_type, envelope_id, session_id, payload, at))
        return seq

    def events(self, *, envelope_id: str | None, session_id: str | None) -> list[StoredEvent]:
        self._open()
        return [
            e
            for e in self._events
            if (envelope_id is None or e.envelope_id == envelope_id)
            and (session_id is None or e.session_id == session_id)
        ]

    def last_recorded_at(self) -> str | None:
        self._open()
        return self._last_at

    def close(self) -> None:
        self._closed = True
