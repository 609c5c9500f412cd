"""The governed store: typed records over an append-only backend (SQLite by default).

It holds everything that must survive a context reset *outside* the summary: envelopes, the
compaction journal, the approval registry, the side-effect ledger by idempotency key, current
policy and capability versions, checkpoints, session identity and resources, exact constraints,
obligations and trace events. Every record is validated on write (malformed ids or naive times
raise) and decoded strictly on read (a corrupt row raises ``StoreError``, which rehydration turns
into a ``governed_state_unavailable`` finding).

Time: every write carries an aware ``at``. The store remembers the latest time it has recorded and
refuses a write stamped earlier (:class:`UntrustedClockError`), so a clock that jumps backwards is
caught instead of silently reviving an expired approval.
"""

from __future__ import annotations

import os
import sqlite3
from datetime import datetime
from enum import StrEnum
from types import TracebackType
from typing import Any, Final, TypeVar

import msgspec

from holon_ctx.continuity.backend import ContinuityBackend, MemoryBackend
from holon_ctx.continuity.envelope import (
    Envelope,
    decode_envelope,
    encode_envelope,
    id_problem,
)
from holon_ctx.continuity.exceptions import ContinuityInputError, UntrustedClockError
from holon_ctx.continuity.records import (
    APPROVAL_TRANSITIONS,
    STEP_BODY,
    UNRESOLVED,
    ApprovalRecord,
    ApprovalStatus,
    BudgetGrant,
    CapabilityRecord,
    CheckpointRecord,
    CompactionStep,
    ConstraintRecord,
    ObligationRecord,
    PolicyRecord,
    SessionIdentity,
    SessionResources,
    SideEffectRecord,
    TraceEvent,
    TraceEventType,
    format_time,
    parse_time,
)
from holon_ctx.continuity.sqlite_backend import SQLiteBackend
from holon_ctx.errors import StoreError

__all__ = ["ContinuityStore", "FactKind"]

_R = TypeVar("_R", bound=msgspec.Struct)


class FactKind(StrEnum):
    """Kinds of governed facts in the backend's fact log."""

    POLICY = "policy"
    CAPABILITY = "capability"
    APPROVAL = "approval"
    SIDE_EFFECT = "side_effect"
    CHECKPOINT = "checkpoint"
    IDENTITY = "identity"
    RESOURCES = "resources"
    CONSTRAINT = "constraint"
    OBLIGATION = "obligation"
    BUDGET_GRANT = "budget_grant"
    CONTROL_SNAPSHOT = "control_snapshot"  # continuity.snapshots


# Ids never contain control characters, so U+001F cannot occur inside either half of a pair key.
_SEP: Final = "\x1f"
_FREE_TEXT_FIELDS: Final = frozenset({"text"})


def _require_aware(at: object, what: str) -> datetime:
    if not isinstance(at, datetime) or at.tzinfo is None or at.utcoffset() is None:
        raise UntrustedClockError(f"{what} must be an aware datetime, got {at!r}")
    return at


def _check_record(record: _R) -> _R:
    """Round-trip through msgspec (types, constraints) and apply the id rules to string fields."""
    try:
        msgspec.json.decode(msgspec.json.encode(record), type=type(record))
    except (msgspec.ValidationError, msgspec.DecodeError, TypeError) as exc:
        raise ContinuityInputError(str(exc), source=type(record).__name__) from exc
    for name in record.__struct_fields__:
        value = getattr(record, name)
        if isinstance(value, str) and name not in _FREE_TEXT_FIELDS:
            problem = id_problem(value)
            if problem:
                raise ContinuityInputError(problem, source=type(record).__name__, path=name)
    return record


def _check_id(value: str, what: str) -> str:
    problem = id_problem(value) if isinstance(value, str) else "is not a string"
    if problem:
        raise ContinuityInputError(f"{what} {problem}", path=what)
    return value


class ContinuityStore:
    """Typed governed store. ``ContinuityStore(path | sqlite3.Connection | backend)``."""

    def __init__(self, source: str | os.PathLike[str] | sqlite3.Connection | ContinuityBackend,
                 *, timeout: float = 5.0) -> None:  # timeout: seconds a write waits (SQLite)
        if isinstance(source, str | os.PathLike | sqlite3.Connection):
            self._backend: ContinuityBackend = SQLiteBackend(source, timeout=timeout)
        else:
            self._backend = source
        self._newest: tuple[bytes | None, Envelope | None] = (None, None)  # validated once

    @classmethod
    def in_memory(cls) -> ContinuityStore:
        """A store on the in-memory backend (no database)."""
        return cls(MemoryBackend())

    @property
    def backend(self) -> ContinuityBackend:
        return self._backend

    def close(self) -> None:
        self._backend.close()

    def __enter__(self) -> ContinuityStore:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # --- time -------------------------------------------------------------------------------

    def last_recorded_at(self) -> datetime | None:
        """The latest time any write was stamped with (the clock must never go below it)."""
        text = self._backend.last_recorded_at()
        if text is None:
            return None
        try:
            return parse_time(text)
        except ValueError as exc:
            raise StoreError(f"corrupt last_recorded_at {text!r}") from exc

    def stamp(self, at: datetime) -> str:
        """Validate a write time: aware and not earlier than anything recorded."""
        _require_aware(at, "write time")
        text = format_time(at)
        last = self._backend.last_recorded_at()
        if last is not None and text < last:
            raise UntrustedClockError(f"clock went backwards: {text} is earlier than the recorded {last}")
        return text

    # --- facts ------------------------------------------------------------------------------

    def _put(self, kind: FactKind, key: str, scope: str, record: msgspec.Struct, at: datetime) -> None:
        self._backend.append_fact(
            kind.value, key, scope, msgspec.json.encode(_check_record(record)), self.stamp(at)
        )

    def _get(self, kind: FactKind, key: str, record_type: type[_R]) -> _R | None:
        body = self._backend.latest_fact(kind.value, key)
        return None if body is None else self._decode(body, record_type, kind.value)

    def _list(self, kind: FactKind, scope: str, record_type: type[_R]) -> tuple[_R, ...]:
        return tuple(
            self._decode(body, record_type, kind.value)
            for body in self._backend.latest_facts_in_scope(kind.value, scope)
        )

    @staticmethod
    def _decode(body: bytes, record_type: type[_R], what: str) -> _R:
        try:
            return msgspec.json.decode(body, type=record_type)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            raise StoreError(f"corrupt {what} record in continuity store: {exc}") from exc

    # --- governed writes --------------------------------------------------------------------

    def set_policy_version(self, tenant_id: str, policy_version: str, *, at: datetime) -> None:
        record = PolicyRecord(tenant_id=tenant_id, policy_version=policy_version)
        self._put(FactKind.POLICY, tenant_id, tenant_id, record, at)

    def set_capability_version(self, capability_name: str, capability_version: str | None, *,
                               at: datetime) -> None:
        """Record the current version of a capability (``None``: withdrawn)."""
        record = CapabilityRecord(capability_name=capability_name, capability_version=capability_version)
        self._put(FactKind.CAPABILITY, capability_name, "", record, at)

    def put_approval(self, record: ApprovalRecord, *, at: datetime) -> None:
        """Register a new approval; an existing id is never overwritten (use the status setter)."""
        if self._get(FactKind.APPROVAL, _check_id(record.approval_id, "approval_id"), ApprovalRecord):
            raise ContinuityInputError(f"approval {record.approval_id!r} already registered")
        self._put(FactKind.APPROVAL, record.approval_id, record.tenant_id, record, at)

    def set_approval_status(self, approval_id: str, status: ApprovalStatus, *, at: datetime) -> None:
        """Move an approval along :data:`APPROVAL_TRANSITIONS`; anything else raises."""
        current = self._get(FactKind.APPROVAL, approval_id, ApprovalRecord)
        if current is None:
            raise ContinuityInputError(f"unknown approval {approval_id!r}")
        if status not in APPROVAL_TRANSITIONS[current.status]:
            raise ContinuityInputError(
                f"approval {approval_id!r}: {current.status} -> {status} is not allowed"
            )
        updated = msgspec.structs.replace(current, status=status)
        self._put(FactKind.APPROVAL, approval_id, current.tenant_id, updated, at)

    def record_side_effect(self, record: SideEffectRecord, *, at: datetime) -> None:
        """Record what is known about the write behind an idempotency key (latest wins)."""
        existing = self._get(FactKind.SIDE_EFFECT, record.idempotency_key, SideEffectRecord)
        if existing is not None and (existing.tenant_id, existing.session_id) != (
                record.tenant_id, record.session_id):
            raise ContinuityInputError(
                f"idempotency key {record.idempotency_key!r} belongs to another session"
            )
        self._put(FactKind.SIDE_EFFECT, record.idempotency_key, record.session_id, record, at)

    def record_checkpoint(self, session_id: str, checkpoint_ref: str, *, at: datetime) -> None:
        record = CheckpointRecord(session_id=session_id, checkpoint_ref=checkpoint_ref)
        self._put(FactKind.CHECKPOINT, session_id, session_id, record, at)

    def set_session_identity(self, identity: SessionIdentity, *, at: datetime) -> None:
        self._put(FactKind.IDENTITY, identity.session_id, identity.session_id, identity, at)

    def set_session_resources(self, resources: SessionResources, *, at: datetime) -> None:
        """Budget and sandbox. A budget falls here, never rises: only :meth:`grant_budget`."""
        current = self.session_resources(resources.session_id)
        if current is not None and resources.budget_remaining > current.budget_remaining:
            raise ContinuityInputError(
                f"would rise from {current.budget_remaining} to {resources.budget_remaining}: "
                "only grant_budget raises a governed budget", source="SessionResources",
                path="budget_remaining")
        self._put(FactKind.RESOURCES, resources.session_id, resources.session_id, resources, at)

    def grant_budget(self, session_id: str, budget: int, *, granted_by: str, at: datetime) -> None:
        """Set the budget by an explicit grant, recorded (with who) first; sandbox kept."""
        grant = BudgetGrant(session_id=session_id, budget_remaining=budget, granted_by=granted_by)
        self._put(FactKind.BUDGET_GRANT, session_id, session_id, grant, at)
        sandbox = getattr(self.session_resources(session_id), "sandbox_snapshot_ref", None)
        self._put(FactKind.RESOURCES, session_id, session_id, SessionResources(
            session_id=session_id, budget_remaining=budget, sandbox_snapshot_ref=sandbox), at)

    def budget_grant(self, session_id: str) -> BudgetGrant | None:
        return self._get(FactKind.BUDGET_GRANT, session_id, BudgetGrant)

    def add_constraint(self, record: ConstraintRecord, *, at: datetime) -> None:
        key = record.session_id + _SEP + record.ref
        self._put(FactKind.CONSTRAINT, key, record.session_id, record, at)

    def withdraw_constraint(self, session_id: str, ref: str, *, at: datetime) -> None:
        current = self._get(FactKind.CONSTRAINT, session_id + _SEP + ref, ConstraintRecord)
        if current is None:
            raise ContinuityInputError(f"unknown constraint {ref!r} in session {session_id!r}")
        self.add_constraint(msgspec.structs.replace(current, active=False), at=at)

    def open_obligation(self, session_id: str, obligation: str, *, at: datetime) -> None:
        record = ObligationRecord(session_id=session_id, obligation=obligation, open=True)
        self._put(FactKind.OBLIGATION, session_id + _SEP + obligation, session_id, record, at)

    def close_obligation(self, session_id: str, obligation: str, *, at: datetime) -> None:
        record = ObligationRecord(session_id=session_id, obligation=obligation, open=False)
        self._put(FactKind.OBLIGATION, session_id + _SEP + obligation, session_id, record, at)

    # --- governed reads ---------------------------------------------------------------------

    def policy_version(self, tenant_id: str) -> str | None:
        record = self._get(FactKind.POLICY, tenant_id, PolicyRecord)
        return None if record is None else record.policy_version

    def capability(self, capability_name: str) -> CapabilityRecord | None:
        return self._get(FactKind.CAPABILITY, capability_name, CapabilityRecord)

    def approval(self, approval_id: str) -> ApprovalRecord | None:
        return self._get(FactKind.APPROVAL, approval_id, ApprovalRecord)

    def side_effect(self, idempotency_key: str) -> SideEffectRecord | None:
        return self._get(FactKind.SIDE_EFFECT, idempotency_key, SideEffectRecord)

    def side_effects(self, session_id: str) -> tuple[SideEffectRecord, ...]:
        return self._list(FactKind.SIDE_EFFECT, session_id, SideEffectRecord)

    def unresolved_side_effects(self, session_id: str) -> tuple[SideEffectRecord, ...]:
        """Side effects of the session whose outcome is unknown or partial."""
        return tuple(r for r in self.side_effects(session_id) if r.status in UNRESOLVED)

    def reconciliation_blocking(self, session_id: str) -> bool:
        """Whether the session must reconcile a side effect before anything else."""
        return bool(self.unresolved_side_effects(session_id))

    def checkpoint(self, session_id: str) -> str | None:
        record = self._get(FactKind.CHECKPOINT, session_id, CheckpointRecord)
        return None if record is None else record.checkpoint_ref

    def session_identity(self, session_id: str) -> SessionIdentity | None:
        return self._get(FactKind.IDENTITY, session_id, SessionIdentity)

    def session_resources(self, session_id: str) -> SessionResources | None:
        return self._get(FactKind.RESOURCES, session_id, SessionResources)

    def constraints(self, session_id: str) -> tuple[ConstraintRecord, ...]:
        """Active exact constraints of the session (text included: keep it out of traces)."""
        return tuple(r for r in self._list(FactKind.CONSTRAINT, session_id, ConstraintRecord) if r.active)

    def constraint_refs(self, session_id: str) -> tuple[str, ...]:
        return tuple(r.ref for r in self.constraints(session_id))

    def open_obligations(self, session_id: str) -> tuple[str, ...]:
        """Obligations of the session that are still open, oldest change first."""
        return tuple(
            r.obligation for r in self._list(FactKind.OBLIGATION, session_id, ObligationRecord) if r.open
        )

    # --- envelopes and the compaction journal -----------------------------------------------

    def append_envelope(self, envelope: Envelope, *, at: datetime) -> bytes:
        """Append an envelope (ids are unique; envelopes are never replaced). Returns its bytes."""
        body = encode_envelope(envelope)
        self._backend.append_envelope(envelope.envelope_id, envelope.session_id, body, self.stamp(at))
        return body

    def envelope_bytes(self, envelope_id: str) -> bytes | None:
        return self._backend.envelope(envelope_id)

    def envelope_ids(self, session_id: str) -> tuple[str, ...]:
        """Every envelope id of the session in append order, complete or not."""
        return tuple(self._backend.envelope_ids(session_id))

    def record_step(self, envelope_id: str, step: CompactionStep, body: msgspec.Struct, *,
                    at: datetime) -> None:
        if not isinstance(body, STEP_BODY[step]):
            raise ContinuityInputError(f"step {step} takes a {STEP_BODY[step].__name__}")
        self._backend.append_step(envelope_id, step.value, msgspec.json.encode(body), self.stamp(at))

    def compaction_steps(self, envelope_id: str) -> dict[CompactionStep, Any]:
        """The journaled steps of a compaction, decoded. Unknown step names are corruption."""
        steps: dict[CompactionStep, Any] = {}
        for name, body in self._backend.steps(envelope_id).items():
            try:
                step = CompactionStep(name)
            except ValueError as exc:
                raise StoreError(f"unknown compaction step {name!r} for {envelope_id!r}") from exc
            steps[step] = self._decode(body, STEP_BODY[step], f"{step} step")
        return steps

    def is_compaction_complete(self, envelope_id: str) -> bool:
        return CompactionStep.COMPACTION_EVENT.value in self._backend.steps(envelope_id)

    def complete_envelope_ids(self, session_id: str) -> tuple[str, ...]:
        """Envelope ids of the session whose compaction finished, in append order."""
        return tuple(e for e in self.envelope_ids(session_id) if self.is_compaction_complete(e))

    def latest_envelope(self, session_id: str) -> Envelope | None:
        """The newest *complete* envelope of the session (a crashed compaction never counts)."""
        ids = reversed(self.envelope_ids(session_id))  # newest first: not a read per envelope
        if (latest := next((e for e in ids if self.is_compaction_complete(e)), None)) is None:
            return None
        if (body := self._backend.envelope(latest)) == self._newest[0] and body is not None:
            return self._newest[1]
        if (envelope := decode_envelope(body).envelope) is None:
            raise StoreError(f"stored envelope {latest!r} does not validate")
        self._newest = (body, envelope)
        return envelope

    # --- trace events -----------------------------------------------------------------------

    def append_event(self, event_type: TraceEventType, *, envelope_id: str, session_id: str,
                     payload: dict[str, Any], at: datetime) -> TraceEvent:
        stamp = self.stamp(at)
        seq = self._backend.append_event(event_type.value, envelope_id, session_id,
                                         msgspec.json.encode(payload), stamp)
        return TraceEvent(seq=seq, event_type=event_type, envelope_id=envelope_id,
                          session_id=session_id, recorded_at=parse_time(stamp), payload=payload)

    def events(self, *, envelope_id: str | None = None,
               session_id: str | None = None) -> tuple[TraceEvent, ...]:
        """Trace events in sequence order, optionally filtered by envelope and/or session."""
        out = []
        for row in self._backend.events(envelope_id=envelope_id, session_id=session_id):
            try:
                out.append(
                    TraceEvent(
                        seq=row.seq,
                        event_type=TraceEventType(row.event_type),
                        envelope_id=row.envelope_id,
                        session_id=row.session_id,
                        recorded_at=parse_time(row.recorded_at),
                        payload=msgspec.json.decode(row.payload, type=dict[str, Any]),
                    )
                )
            except (ValueError, msgspec.DecodeError) as exc:
                raise StoreError(f"corrupt trace event {row.seq}: {exc}") from exc
        return tuple(out)
