"""Conformance suite of the governed store, run against every backend, plus SQLite specifics."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import msgspec
import pytest

from holon_ctx.continuity import (
    ApprovalRecord,
    ApprovalStatus,
    AuthorizationMode,
    CompactionStep,
    ConstraintRecord,
    ContinuityBackend,
    ContinuityInputError,
    ContinuityStore,
    DuplicateRecordError,
    EventRange,
    MemoryBackend,
    ResetReason,
    SessionIdentity,
    SideEffectRecord,
    SideEffectStatus,
    TraceEventType,
    UntrustedClockError,
)
from holon_ctx.continuity.records import BoundaryStep
from holon_ctx.continuity.scenario import SEED
from holon_ctx.continuity.sqlite_backend import SQLiteBackend
from holon_ctx.errors import StoreError

T = datetime(2026, 7, 21, 12, 0, tzinfo=UTC)


@pytest.fixture(params=["memory", "sqlite_file", "sqlite_connection", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ContinuityStore]:
    if request.param == "memory":
        result = ContinuityStore.in_memory()
    elif request.param == "postgres":
        from holon_ctx.postgres.continuity import PostgresContinuityBackend

        result = ContinuityStore(PostgresContinuityBackend(
            request.getfixturevalue("pg_url"), session=request.getfixturevalue("pg_session_key")))
    elif request.param == "sqlite_file":
        result = ContinuityStore(tmp_path / "ledger.db")
    else:
        result = ContinuityStore(sqlite3.connect(":memory:", isolation_level=None))
    yield result
    result.close()


def _approval(**changes: object) -> ApprovalRecord:
    record = ApprovalRecord(
        approval_id="apr-1",
        tenant_id="tenant-acme",
        principal_id="user-42",
        capability_name="create_ticket",
        action_digest="sha256:a",
        status=ApprovalStatus.APPROVED,
        expires_at=T + timedelta(hours=6),
    )
    return msgspec.structs.replace(record, **changes)


def _effect(key: str, status: SideEffectStatus, session: str = "s1") -> SideEffectRecord:
    return SideEffectRecord(idempotency_key=key, tenant_id="t", session_id=session, status=status)


def test_backends_satisfy_the_protocol(tmp_path: Path) -> None:
    """Both backends implement the storage Protocol."""
    assert isinstance(MemoryBackend(), ContinuityBackend)
    assert isinstance(SQLiteBackend(tmp_path / "x.db"), ContinuityBackend)


def test_latest_fact_wins(store: ContinuityStore) -> None:
    """Policy and capability versions read back as the latest write."""
    store.set_policy_version("tenant-acme", "policy-v4", at=T)
    store.set_policy_version("tenant-acme", "policy-v5", at=T)
    store.set_capability_version("create_ticket", "v3", at=T)
    store.set_capability_version("create_ticket", None, at=T)
    assert store.policy_version("tenant-acme") == "policy-v5"
    assert store.policy_version("tenant-beta") is None
    capability = store.capability("create_ticket")
    assert capability is not None
    assert capability.capability_version is None


def test_session_listings_are_scoped(store: ContinuityStore) -> None:
    """Obligations, constraints and side effects list per session, latest state only."""
    store.open_obligation("s1", "a", at=T)
    store.open_obligation("s1", "b", at=T)
    store.open_obligation("s2", "c", at=T)
    store.close_obligation("s1", "a", at=T)
    store.add_constraint(ConstraintRecord(session_id="s1", ref="event:c1", text="no"), at=T)
    store.add_constraint(ConstraintRecord(session_id="s1", ref="event:c2", text="never"), at=T)
    store.withdraw_constraint("s1", "event:c1", at=T)
    store.record_side_effect(_effect("k1", SideEffectStatus.UNKNOWN), at=T)
    store.record_side_effect(_effect("k2", SideEffectStatus.PARTIAL), at=T)
    store.record_side_effect(_effect("k2", SideEffectStatus.COMMITTED), at=T)
    store.record_side_effect(_effect("k3", SideEffectStatus.UNKNOWN, session="s2"), at=T)
    assert store.open_obligations("s1") == ("b",)
    assert store.constraint_refs("s1") == ("event:c2",)
    assert [r.idempotency_key for r in store.unresolved_side_effects("s1")] == ["k1"]
    assert store.reconciliation_blocking("s1") is True
    assert store.reconciliation_blocking("s9") is False


def test_approval_registry_lifecycle(store: ContinuityStore) -> None:
    """Approvals register once and move only along the transition table."""
    store.put_approval(_approval(), at=T)
    with pytest.raises(ContinuityInputError, match="already registered"):
        store.put_approval(_approval(), at=T)
    store.set_approval_status("apr-1", ApprovalStatus.REVOKED, at=T)
    with pytest.raises(ContinuityInputError, match="not allowed"):
        store.set_approval_status("apr-1", ApprovalStatus.APPROVED, at=T)
    with pytest.raises(ContinuityInputError, match="unknown approval"):
        store.set_approval_status("apr-2", ApprovalStatus.REVOKED, at=T)
    record = store.approval("apr-1")
    assert record is not None
    assert record.status is ApprovalStatus.REVOKED


def test_idempotency_key_cannot_move_to_another_session(store: ContinuityStore) -> None:
    """A key recorded for one session is refused for another."""
    store.record_side_effect(_effect("k1", SideEffectStatus.NONE), at=T)
    with pytest.raises(ContinuityInputError, match="another session"):
        store.record_side_effect(_effect("k1", SideEffectStatus.NONE, session="s2"), at=T)


@pytest.mark.parametrize("bad", ["tenant-acme ", "", "tenant\x00", "tenant\u200b"])
def test_writes_refuse_malformed_ids(store: ContinuityStore, bad: str) -> None:
    """Governed writes refuse malformed ids instead of repairing them."""
    with pytest.raises(ContinuityInputError):
        store.set_policy_version(bad, "policy-v4", at=T)
    with pytest.raises(ContinuityInputError):
        store.put_approval(_approval(tenant_id=bad), at=T)


def test_writes_refuse_naive_and_backwards_time(store: ContinuityStore) -> None:
    """A naive or earlier-than-recorded write time is an untrusted clock."""
    store.set_policy_version("t", "p1", at=T)
    with pytest.raises(UntrustedClockError):
        store.set_policy_version("t", "p2", at=datetime(2026, 7, 21, 13, 0))
    with pytest.raises(UntrustedClockError, match="backwards"):
        store.set_policy_version("t", "p2", at=T - timedelta(microseconds=1))
    store.set_policy_version("t", "p2", at=T)  # the same instant is not backwards
    assert store.last_recorded_at() == T
    with pytest.raises(ContinuityInputError):
        store.put_approval(_approval(expires_at=datetime(2026, 7, 22)), at=T)


def test_envelopes_and_journal_are_append_only(store: ContinuityStore) -> None:
    """An envelope id or a journal step cannot be written twice."""
    store.backend.append_envelope("e1", "s1", b"{}", "2026-07-21T12:00:00.000000Z")
    with pytest.raises(DuplicateRecordError):
        store.backend.append_envelope("e1", "s1", b"{}", "2026-07-21T12:00:00.000000Z")
    body = BoundaryStep(
        session_id="s1",
        source_trace_id="t",
        reset_reason=ResetReason.CONTEXT_COMPACTION,
        source_event_range=EventRange(first="a", last="b"),
    )
    store.record_step("e1", CompactionStep.BOUNDARY, body, at=T)
    with pytest.raises(DuplicateRecordError):
        store.record_step("e1", CompactionStep.BOUNDARY, body, at=T)
    assert set(store.compaction_steps("e1")) == {CompactionStep.BOUNDARY}
    assert store.envelope_ids("s1") == ("e1",)
    assert store.latest_envelope("s1") is None  # not complete


def test_events_are_numbered_and_filtered(store: ContinuityStore) -> None:
    """Trace events get increasing sequence numbers and filter by envelope and session."""
    first = store.append_event(
        TraceEventType.CONTEXT_COMPACTION, envelope_id="e1", session_id="s1", payload={"a": 1}, at=T
    )
    second = store.append_event(
        TraceEventType.CONTEXT_REHYDRATION, envelope_id="e2", session_id="s1", payload={}, at=T
    )
    assert second.seq > first.seq
    assert [e.seq for e in store.events(session_id="s1")] == [first.seq, second.seq]
    assert [e.payload for e in store.events(envelope_id="e1")] == [{"a": 1}]
    assert store.events(envelope_id="e1", session_id="s2") == ()


def test_identity_round_trips(store: ContinuityStore) -> None:
    """Session identity is stored and read back exactly, Unicode untouched."""
    identity = SessionIdentity(
        session_id="s1",
        tenant_id="tenant-\u0430cme",
        principal_id="user-42",
        authorization_mode=AuthorizationMode.USER_DELEGATED,
        delegated_principal_id="user-42",
        delegated_scope="tickets:create",
    )
    store.set_session_identity(identity, at=T)
    assert store.session_identity("s1") == identity
    assert store.session_identity("s1").tenant_id != "tenant-acme"  # type: ignore[union-attr]


def test_closed_store_raises_store_error(store: ContinuityStore) -> None:
    """Every operation on a closed store is a StoreError."""
    store.close()
    with pytest.raises(StoreError):
        store.policy_version("t")


# --- SQLite specifics -----------------------------------------------------------------------


def test_sqlite_tables_are_prefixed(tmp_path: Path) -> None:
    """Every table, index and trigger the store creates is prefixed ``continuity_``."""
    conn = sqlite3.connect(tmp_path / "shared.db", isolation_level=None)
    conn.execute("CREATE TABLE records (id TEXT)")
    ContinuityStore(conn)
    names = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE name != 'records'")]
    assert names
    assert all(n.startswith(("continuity_", "sqlite_")) for n in names)


def test_sqlite_append_only_guard(tmp_path: Path) -> None:
    """UPDATE and DELETE on envelopes, journal and events abort."""
    conn = sqlite3.connect(tmp_path / "g.db", isolation_level=None)
    store = ContinuityStore(conn)
    store.backend.append_envelope("e1", "s1", b"{}", "2026-07-21T12:00:00.000000Z")
    store.append_event(TraceEventType.CONTEXT_COMPACTION, envelope_id="e1", session_id="s1", payload={}, at=T)
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        conn.execute("UPDATE continuity_envelopes SET body = x'00'")
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        conn.execute("DELETE FROM continuity_events")


def test_sqlite_refuses_other_schema_version(tmp_path: Path) -> None:
    """A database written by another layout version is refused with a StoreError."""
    path = tmp_path / "v.db"
    ContinuityStore(path).close()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("UPDATE continuity_meta SET value = '99' WHERE key = 'schema_version'")
    conn.close()
    with pytest.raises(StoreError, match="schema version"):
        ContinuityStore(path)


def test_sqlite_persists_across_reopen(tmp_path: Path) -> None:
    """Governed state written through one handle is read through a new one."""
    path = tmp_path / "p.db"
    with ContinuityStore(path) as first:
        first.set_policy_version("tenant-acme", "policy-v4", at=T)
    with ContinuityStore(str(path)) as second:
        assert second.policy_version("tenant-acme") == "policy-v4"
        assert second.last_recorded_at() == T


def test_borrowed_connection_joins_the_callers_transaction(tmp_path: Path) -> None:
    """On a borrowed connection, writes commit or roll back with the caller's transaction."""
    conn = sqlite3.connect(tmp_path / "t.db")  # default: implicit transactions
    store = ContinuityStore(conn)
    conn.commit()
    conn.execute("BEGIN")
    store.set_policy_version("tenant-acme", "policy-v4", at=T)
    conn.rollback()
    assert store.policy_version("tenant-acme") is None
    store.close()  # does not close what it did not open
    assert conn.execute("SELECT 1").fetchone() == (1,)


def test_sqlite_reads_text_bodies_as_bytes(tmp_path: Path) -> None:
    """A row whose body was stored as TEXT still reads back as bytes."""
    conn = sqlite3.connect(tmp_path / "b.db", isolation_level=None)
    store = ContinuityStore(conn)
    conn.execute(
        "INSERT INTO continuity_envelopes (envelope_id, session_id, body, recorded_at) "
        "VALUES ('e1', 's1', '{\"x\": 1}', 'now')"
    )
    assert store.envelope_bytes("e1") == b'{"x": 1}'


def test_seed_ids_fit_the_rules() -> None:
    """Every id of the built-in scenario passes the id rules the store enforces."""
    store = ContinuityStore.in_memory()
    store.set_policy_version(SEED.tenant_id, SEED.policy_version, at=T)
    assert store.policy_version(SEED.tenant_id) == SEED.policy_version
