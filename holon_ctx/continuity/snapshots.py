"""Control snapshots: the governed state a prompt states, by ledger position (RFC 0020).

A compaction records one with each envelope it seals: the session's open obligations, active
constraints and unreconciled side effects right after sealing, with the ledger's end then. A
session projection as of a position reads the newest snapshot at or before it, so a runtime that
continued and a rebuild from the ledger state the same governed facts at every position. They
live in the governed store's fact log (kind ``control_snapshot``, one key per envelope).
"""

from __future__ import annotations

from datetime import datetime

import msgspec

from holon_ctx.continuity.records import ControlSnapshot
from holon_ctx.continuity.store import ContinuityStore, FactKind
from holon_ctx.errors import StoreError

__all__ = ["control_snapshots", "record_control_snapshot"]

# As the store's pair keys: ids never hold control characters.
_SEP = "\x1f"
_decoder = msgspec.json.Decoder(ControlSnapshot)


def record_control_snapshot(store: ContinuityStore, snapshot: ControlSnapshot, *,
                            at: datetime) -> None:
    """Keep ``snapshot`` (stamped ``at``, which must not go below the store's clock)."""
    store.backend.append_fact(FactKind.CONTROL_SNAPSHOT.value,
                              snapshot.session_id + _SEP + snapshot.envelope_id,
                              snapshot.session_id, msgspec.json.encode(snapshot), store.stamp(at))


def control_snapshots(store: ContinuityStore, session_id: str,
                      envelope_id: str | None = None) -> tuple[ControlSnapshot, ...]:
    """The session's snapshots in the order recorded; with ``envelope_id``, that envelope's
    only (empty when none was recorded: sealed before snapshots were, or the sealing process
    stopped before recording it)."""
    kind = FactKind.CONTROL_SNAPSHOT.value
    if envelope_id is None:
        bodies = store.backend.latest_facts_in_scope(kind, session_id)
    else:
        body = store.backend.latest_fact(kind, session_id + _SEP + envelope_id)
        bodies = [] if body is None else [body]
    try:
        return tuple(_decoder.decode(b) for b in bodies)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise StoreError(f"corrupt control snapshot in continuity store: {exc}") from None
