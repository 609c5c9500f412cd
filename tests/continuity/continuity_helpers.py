"""Shared fixtures for the continuity tests: the seed world after compaction, and strategies.

The world runs on a SQLite database in memory over a connection the test owns, so tests can
tamper with stored rows exactly as an attacker with database access would.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import attrs
import msgspec
from hypothesis import strategies as st

from holon_ctx.continuity import (
    CompactionRequest,
    ContinuityStore,
    Decision,
    Envelope,
    GovernedState,
    ResumeContext,
    encode_envelope,
    prepare_compaction,
    rehydrate,
    verify_envelope,
)
from holon_ctx.continuity.rehydration import load_governed_state
from holon_ctx.continuity.scenario import (
    SEED_SUMMARY,
    T0,
    ManualClock,
    apply_history,
    compaction_kwargs,
    fold_history,
    resume_from,
    seed_history,
)

__all__ = [
    "COMPACTED_AT",
    "RESUMED_AT",
    "World",
    "json_values",
    "make_world",
]

COMPACTED_AT = T0 + timedelta(minutes=1)
RESUMED_AT = T0 + timedelta(minutes=5)


@attrs.define
class World:
    """The seed session, compacted at 12:01Z; the clock stands at the resumption time 12:05Z."""

    conn: sqlite3.Connection
    store: ContinuityStore
    clock: ManualClock
    control: dict[str, Any]
    envelope: Envelope
    resume: ResumeContext
    summary: bytes = SEED_SUMMARY

    @property
    def envelope_id(self) -> str:
        return self.envelope.envelope_id

    def rehydrate(
        self,
        *,
        summary: bytes | None = None,
        resume: ResumeContext | None = None,
        clock: Callable[[], Any] | None = None,
        envelope_id: str | None = None,
    ) -> Decision:
        return rehydrate(
            self.store,
            envelope_id or self.envelope_id,
            summary_bytes=self.summary if summary is None else summary,
            resume=resume or self.resume,
            clock=clock or self.clock,
        )

    def envelope_dict(self) -> dict[str, Any]:
        result: dict[str, Any] = msgspec.json.decode(encode_envelope(self.envelope))
        return result

    def tamper_envelope(self, body: bytes | dict[str, Any]) -> None:
        """Rewrite the stored envelope row, dropping the append-only guard first."""
        raw = body if isinstance(body, bytes) else msgspec.json.encode(body)
        self.conn.execute("DROP TRIGGER continuity_envelopes_no_update")
        self.conn.execute(
            "UPDATE continuity_envelopes SET body = ? WHERE envelope_id = ?",
            (raw, self.envelope_id),
        )

    def tamper_field(self, name: str, value: Any) -> None:
        self.tamper_envelope({**self.envelope_dict(), name: value})

    def governed(self, resume: ResumeContext | None = None) -> GovernedState:
        fields = {f: getattr(self.envelope, f) for f in self.envelope.__struct_fields__}
        raw = self.store.envelope_bytes(self.envelope_id)
        findings: list[Any] = []
        state = load_governed_state(
            self.store, self.envelope_id, fields, resume or self.resume, raw, findings
        )
        assert not findings
        return state

    def verify(
        self,
        raw: object = None,
        *,
        governed: GovernedState | None = None,
        now: datetime | None = RESUMED_AT,
        summary: bytes | None = None,
        resume: ResumeContext | None = None,
        keep_stored_hash: bool = False,
    ) -> Decision:
        """The pure validator on (possibly altered) raw data and governed state."""
        state = governed or self.governed()
        if not keep_stored_hash:
            # Without the stored-bytes hash, every change must be caught field by field.
            state = attrs.evolve(state, stored_envelope_sha256=None)
        return verify_envelope(
            self.envelope_dict() if raw is None else raw,
            envelope_id=self.envelope_id,
            summary_bytes=self.summary if summary is None else summary,
            resume=resume or self.resume,
            governed=state,
            now=now,
        )


def make_world(
    *,
    before_compaction: Callable[[ContinuityStore], None] | None = None,
    compactor: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    **history_options: Any,
) -> World:
    """Record the seed history at 12:00Z, compact at 12:01Z, set the clock to 12:05Z.

    ``before_compaction`` records more governed state at 12:00Z; ``compactor`` rewrites the
    ``prepare_compaction`` arguments (a lossy or hostile compactor).
    """
    conn = sqlite3.connect(":memory:", isolation_level=None)
    store = ContinuityStore(conn)
    clock = ManualClock(T0)
    history = seed_history(**history_options)
    apply_history(store, history, clock())
    if before_compaction is not None:
        before_compaction(store)
    control = fold_history(history)
    clock.now = COMPACTED_AT
    kwargs = compaction_kwargs(control)
    if compactor is not None:
        kwargs = compactor(kwargs)
    envelope = prepare_compaction(
        store, CompactionRequest(summary_bytes=SEED_SUMMARY, **kwargs), clock=clock)
    clock.now = RESUMED_AT
    return World(conn, store, clock, control, envelope, resume_from(control))


#: Arbitrary JSON values (what a hostile or corrupt envelope row may decode to).
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=12,
)
