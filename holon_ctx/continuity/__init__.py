"""The continuity envelope: control state that survives a context reset without trusting a summary.

A compacted summary is a derived, untrusted view and carries no authority. This package keeps the
control state (identity, delegation, policy and capability versions, approvals, idempotency and
side effects, checkpoint, sandbox, budget, obligations, exact constraints, event lineage) in a
governed store, seals it in a ``continuity-envelope/v1`` before compaction, and validates it after
a reset. No outcome authorises anything: the best is ``reauthorization_required``.

It imports nothing from the rest of holon_ctx except :mod:`holon_ctx.errors`.

Integration (what the projection engine calls)::

    store = ContinuityStore("ledger.db")          # or a sqlite3.Connection, or ContinuityStore.in_memory()
    request = CompactionRequest(envelope_id=..., session_id=..., source_trace_id=...,
                                source_event_range=(first_id, last_id), summary_bytes=...,
                                objective=..., exact_constraint_refs=[...], pending_obligations=[...],
                                tenant_id=..., principal_id=..., authorization_mode="user_delegated",
                                checkpoint_ref=..., budget_remaining=...)
    envelope = prepare_compaction(store, request, clock=clock)
    decision = rehydrate(store, envelope.envelope_id, summary_bytes=...,
                         resume=ResumeContext(...), clock=clock)
    store.latest_envelope(session_id)           # newest complete envelope, or None
    store.open_obligations(session_id)          # obligations to pin in the next projection
    store.constraint_refs(session_id)           # exact constraint refs to pin
    store.reconciliation_blocking(session_id)   # show a blocking notice when true
    store.unresolved_side_effects(session_id)   # what the notice names
"""

from __future__ import annotations

from holon_ctx.continuity.backend import ContinuityBackend, MemoryBackend
from holon_ctx.continuity.codes import (
    CODE_CLASS,
    DECISION_RANK,
    PRECEDENCE,
    REFERENCE_CODES,
    DecisionKind,
    FindingClass,
    ReasonCode,
)
from holon_ctx.continuity.compaction import (
    Clock,
    CompactionRequest,
    FaultHook,
    prepare_compaction,
)
from holon_ctx.continuity.decision import (
    SUMMARY_TRUST,
    ConstraintView,
    Decision,
    Finding,
    RehydratedView,
    is_same_or_stricter,
)
from holon_ctx.continuity.digest import envelope_sha256, summary_digest
from holon_ctx.continuity.envelope import (
    SCHEMA_VERSION,
    AuthorizationMode,
    DecodedEnvelope,
    Envelope,
    EventRange,
    ResetReason,
    SideEffectStatus,
    decode_envelope,
    encode_envelope,
    id_problem,
)
from holon_ctx.continuity.exceptions import (
    CompactionConflictError,
    ContinuityInputError,
    DuplicateRecordError,
    GovernedStateError,
    UntrustedClockError,
)
from holon_ctx.continuity.records import (
    ApprovalRecord,
    ApprovalStatus,
    BudgetGrant,
    CompactionStep,
    ConstraintRecord,
    SessionIdentity,
    SessionResources,
    SideEffectRecord,
    TraceEvent,
    TraceEventType,
)
from holon_ctx.continuity.rehydration import rehydrate
from holon_ctx.continuity.state import GovernedState, ResumeContext
from holon_ctx.continuity.store import ContinuityStore
from holon_ctx.continuity.validator import verify_control_state, verify_envelope

__all__ = [
    "CODE_CLASS",
    "DECISION_RANK",
    "PRECEDENCE",
    "REFERENCE_CODES",
    "SCHEMA_VERSION",
    "SUMMARY_TRUST",
    "ApprovalRecord",
    "ApprovalStatus",
    "AuthorizationMode",
    "BudgetGrant",
    "Clock",
    "CompactionConflictError",
    "CompactionRequest",
    "CompactionStep",
    "ConstraintRecord",
    "ConstraintView",
    "ContinuityBackend",
    "ContinuityInputError",
    "ContinuityStore",
    "Decision",
    "DecisionKind",
    "DecodedEnvelope",
    "DuplicateRecordError",
    "Envelope",
    "EventRange",
    "FaultHook",
    "Finding",
    "FindingClass",
    "GovernedState",
    "GovernedStateError",
    "MemoryBackend",
    "ReasonCode",
    "RehydratedView",
    "ResetReason",
    "ResumeContext",
    "SessionIdentity",
    "SessionResources",
    "SideEffectRecord",
    "SideEffectStatus",
    "TraceEvent",
    "TraceEventType",
    "UntrustedClockError",
    "decode_envelope",
    "encode_envelope",
    "envelope_sha256",
    "id_problem",
    "is_same_or_stricter",
    "prepare_compaction",
    "rehydrate",
    "summary_digest",
    "verify_control_state",
    "verify_envelope",
]
