"""Persisted shapes of the governed store: registry records, compaction journal steps, trace events.

All are msgspec Structs that forbid unknown fields and are decoded against their type on every
read, so a corrupt or foreign row is detected instead of half-trusted. Governed records are the
source of truth after a context reset; the envelope only *refers* to them.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from types import MappingProxyType
from typing import Annotated, Any, Final

import msgspec

from holon_ctx.continuity.envelope import (
    AuthorizationMode,
    AwareDatetime,
    EventRange,
    ResetReason,
    SideEffectStatus,
)

__all__ = [
    "APPROVAL_TRANSITIONS",
    "STEP_BODY",
    "UNRESOLVED",
    "ApprovalRecord",
    "ApprovalStatus",
    "BoundaryStep",
    "BudgetGrant",
    "CapabilityRecord",
    "CheckpointRecord",
    "CheckpointStep",
    "CompactionEventStep",
    "CompactionStep",
    "ConstraintRecord",
    "ControlSnapshot",
    "EnvelopeStep",
    "GovernedSnapshot",
    "ObligationRecord",
    "PolicyRecord",
    "SessionIdentity",
    "SessionResources",
    "SideEffectEntry",
    "SideEffectRecord",
    "TraceEvent",
    "TraceEventType",
    "format_time",
    "parse_time",
]

NonNegativeInt = Annotated[int, msgspec.Meta(ge=0)]


class _Record(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    pass


class ApprovalStatus(StrEnum):
    """Lifecycle of an approval in the registry. Only ``approved`` is usable."""

    PENDING = "pending"
    APPROVED = "approved"
    DENIED = "denied"
    REVOKED = "revoked"
    CONSUMED = "consumed"


class ApprovalRecord(_Record, frozen=True):
    """One approval as the registry knows it: status, expiry and what it is bound to."""

    approval_id: str
    tenant_id: str
    principal_id: str
    capability_name: str
    action_digest: str
    status: ApprovalStatus
    expires_at: AwareDatetime


class SideEffectRecord(_Record, frozen=True):
    """The side-effect ledger's entry for one idempotency key."""

    idempotency_key: str
    tenant_id: str
    session_id: str
    status: SideEffectStatus


class SideEffectEntry(_Record, frozen=True):
    """One side effect as sealed at compaction: its idempotency key and the status it had then."""

    idempotency_key: str
    status: SideEffectStatus


class SessionIdentity(_Record, frozen=True):
    """Who a session acts for; identity never comes from a summary."""

    session_id: str
    tenant_id: str
    principal_id: str
    authorization_mode: AuthorizationMode
    delegated_principal_id: str | None = None
    delegated_scope: str | None = None


class SessionResources(_Record, frozen=True):
    """Budget and sandbox state of a session."""

    session_id: str
    budget_remaining: NonNegativeInt
    sandbox_snapshot_ref: str | None = None


class BudgetGrant(_Record, frozen=True):
    """An explicit raise of a session's governed budget: the only way it ever rises (RFC 0020).
    ``granted_by`` names who raised it (a principal or an operator id)."""

    session_id: str
    budget_remaining: NonNegativeInt
    granted_by: str


class ControlSnapshot(_Record, frozen=True):
    """What a prompt states of the governed state from the ledger position ``ledger_pos`` on: the
    session's open obligations, active constraints and unreconciled side effects as they stood
    when the envelope ``envelope_id`` was sealed, with the ledger's end then (RFC 0020). A
    projection as of a position reads the newest snapshot at or before it, so a continuing
    runtime and a rebuild state the same governed facts at every position."""

    session_id: str
    envelope_id: str
    ledger_pos: NonNegativeInt
    obligations: tuple[str, ...]
    #: ``(ref, text)`` of each active exact constraint.
    constraints: tuple[tuple[str, str], ...]
    #: ``(idempotency key, status)`` of each side effect that must be reconciled first.
    blocking: tuple[tuple[str, str], ...]


class ConstraintRecord(_Record, frozen=True):
    """Exact user constraint. Its text may be sensitive: it stays here; envelopes hold the ref."""

    session_id: str
    ref: str
    text: str
    active: bool = True


class ObligationRecord(_Record, frozen=True):
    """An unfinished obligation of a session (``open`` until fulfilled)."""

    session_id: str
    obligation: str
    open: bool = True


class CheckpointRecord(_Record, frozen=True):
    """The current checkpoint of a session."""

    session_id: str
    checkpoint_ref: str


class PolicyRecord(_Record, frozen=True):
    """The policy version currently in force for a tenant."""

    tenant_id: str
    policy_version: str


class CapabilityRecord(_Record, frozen=True):
    """The current version of a capability; ``None`` means withdrawn."""

    capability_name: str
    capability_version: str | None


# --- compaction journal: one body per protocol step, written before the next step starts ---


class BoundaryStep(_Record, frozen=True):
    """Step 1: the safe boundary and the durable source event range."""

    session_id: str
    source_trace_id: str
    reset_reason: ResetReason
    source_event_range: EventRange


class CheckpointStep(_Record, frozen=True):
    """Step 2: the checkpoint and the unfinished obligations."""

    checkpoint_ref: str
    pending_obligations: tuple[str, ...]


class GovernedSnapshot(_Record, frozen=True):
    """Step 3: every control field, captured from governed state, never from the summary."""

    objective: str
    exact_constraint_refs: tuple[str, ...]
    tenant_id: str
    principal_id: str
    authorization_mode: AuthorizationMode
    delegated_principal_id: str | None
    delegated_scope: str | None
    policy_version: str
    capability_name: str | None
    capability_version: str | None
    approval_id: str | None
    action_digest: str | None
    approval_expires_at: AwareDatetime | None
    idempotency_key: str | None
    side_effect_status: SideEffectStatus
    sandbox_snapshot_ref: str | None
    budget_remaining: NonNegativeInt
    evidence_refs: tuple[str, ...]
    #: Every side effect of the session at sealing, whatever its status, sorted by key: the
    #: envelope names one idempotency key, the sealed state carries them all (RFC 0004). Journals
    #: written before this field existed decode with none, so their sessions' side effects all
    #: count as "not carried" and rehydration fails closed.
    side_effects: tuple[SideEffectEntry, ...] = ()


class EnvelopeStep(_Record, frozen=True):
    """Step 4: the digest that binds the summary, and the SHA-256 of the stored envelope bytes."""

    summary_sha256: str
    envelope_sha256: str


class CompactionEventStep(_Record, frozen=True):
    """Step 5: the sequence number of the ``context_compaction`` trace event."""

    event_seq: int


class TraceEventType(StrEnum):
    """The three trace events of the protocol (the seed's §5)."""

    CONTEXT_COMPACTION = "context_compaction"
    CONTEXT_REHYDRATION = "context_rehydration"
    CONTINUITY_VALIDATION_FAILED = "continuity_validation_failed"


class TraceEvent(_Record, frozen=True):
    """A trace event as stored. ``payload`` never holds secrets, summary text or prompts."""

    seq: int
    event_type: TraceEventType
    envelope_id: str
    session_id: str
    recorded_at: AwareDatetime
    payload: dict[str, Any]


class CompactionStep(StrEnum):
    """The five before-steps of the seed's §3, in order; each is journaled before the next runs."""

    BOUNDARY = "boundary"
    CHECKPOINT = "checkpoint"
    GOVERNED_SNAPSHOT = "governed_snapshot"
    ENVELOPE = "envelope"
    COMPACTION_EVENT = "compaction_event"


#: The journal body type of each step (decoded strictly on every read).
STEP_BODY: dict[CompactionStep, type[msgspec.Struct]] = {
    CompactionStep.BOUNDARY: BoundaryStep,
    CompactionStep.CHECKPOINT: CheckpointStep,
    CompactionStep.GOVERNED_SNAPSHOT: GovernedSnapshot,
    CompactionStep.ENVELOPE: EnvelopeStep,
    CompactionStep.COMPACTION_EVENT: CompactionEventStep,
}


#: Side-effect states that block until reconciled; never retried automatically.
UNRESOLVED: Final = frozenset({SideEffectStatus.UNKNOWN, SideEffectStatus.PARTIAL})

#: Allowed approval status changes. Terminal states have no exits: a revoked approval is never
#: revived, it is replaced by a new approval with a new id.
APPROVAL_TRANSITIONS: Final = MappingProxyType(
    {
        ApprovalStatus.PENDING: frozenset({ApprovalStatus.APPROVED, ApprovalStatus.DENIED}),
        ApprovalStatus.APPROVED: frozenset({ApprovalStatus.REVOKED, ApprovalStatus.CONSUMED}),
        ApprovalStatus.DENIED: frozenset(),
        ApprovalStatus.REVOKED: frozenset(),
        ApprovalStatus.CONSUMED: frozenset(),
    }
)

_TIME_FORMAT: Final = "%Y-%m-%dT%H:%M:%S.%fZ"


def format_time(at: datetime) -> str:
    """Fixed-width UTC text of an aware datetime (so string order is time order)."""
    return at.astimezone(UTC).strftime(_TIME_FORMAT)


def parse_time(text: str) -> datetime:
    """Inverse of :func:`format_time`."""
    return datetime.strptime(text, _TIME_FORMAT).replace(tzinfo=UTC)
