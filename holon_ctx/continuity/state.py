"""Inputs of the validator as plain data: the resume claim and the loaded governed state.

Nothing here holds a handle: the shell (``rehydrate``) loads these from the store, the pure
validator only reads them, and tests build them directly.
"""

from __future__ import annotations

import attrs

from holon_ctx.continuity.records import (
    ApprovalRecord,
    BoundaryStep,
    CapabilityRecord,
    CheckpointStep,
    CompactionEventStep,
    CompactionStep,
    EnvelopeStep,
    GovernedSnapshot,
    SessionIdentity,
    SessionResources,
    SideEffectRecord,
)

__all__ = ["CompactionRecord", "GovernedState", "ResumeContext"]


@attrs.frozen
class ResumeContext:
    """Who resumes the session, as the runtime claims it; optional fields name the next action.

    Identity fields are always compared. ``capability_name``, ``approval_id``, ``action_digest``
    and ``idempotency_key`` are compared only when given (``None``: no next action chosen yet).
    """

    session_id: str
    tenant_id: str
    principal_id: str
    authorization_mode: str
    delegated_principal_id: str | None = None
    delegated_scope: str | None = None
    capability_name: str | None = None
    approval_id: str | None = None
    action_digest: str | None = None
    idempotency_key: str | None = None


@attrs.frozen
class CompactionRecord:
    """The compaction journal of one envelope (``None`` for a step never recorded)."""

    boundary: BoundaryStep | None = None
    checkpoint: CheckpointStep | None = None
    snapshot: GovernedSnapshot | None = None
    sealed: EnvelopeStep | None = None
    compaction_event: CompactionEventStep | None = None

    def missing_steps(self) -> tuple[CompactionStep, ...]:
        present = (
            self.boundary,
            self.checkpoint,
            self.snapshot,
            self.sealed,
            self.compaction_event,
        )
        return tuple(step for step, body in zip(CompactionStep, present, strict=True) if body is None)


@attrs.frozen
class GovernedState:
    """What the governed store says now, loaded before validation (pure data, no handles)."""

    session_identity: SessionIdentity | None = None
    policy_version: str | None = None
    capability: CapabilityRecord | None = None
    approval: ApprovalRecord | None = None
    side_effect: SideEffectRecord | None = None
    session_side_effects: tuple[SideEffectRecord, ...] = ()
    checkpoint_ref: str | None = None
    resources: SessionResources | None = None
    open_obligations: tuple[str, ...] = ()
    active_constraint_refs: tuple[str, ...] = ()
    # Envelope mode only:
    record: CompactionRecord | None = None
    latest_complete_envelope_id: str | None = None
    stored_envelope_sha256: str | None = None
