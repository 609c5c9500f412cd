"""The seed's support-ticket session as a replayable history, plus a manual clock.

A *history* is the ordered list of governed facts a runtime records while a session runs (who it
acts for, which policy and capability versions are in force, approvals granted, side effects
attempted, constraints stated, obligations opened, checkpoints taken). Replaying it into a store
(:func:`apply_history`) gives the governed state; folding it (:func:`fold_history`) gives the
control state a runtime holding the *complete* history knows, without any summary. The CLI
experiment and the full-vs-compacted evaluation are both built from it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import attrs

from holon_ctx.continuity.envelope import AuthorizationMode, SideEffectStatus
from holon_ctx.continuity.records import (
    ApprovalRecord,
    ApprovalStatus,
    ConstraintRecord,
    SessionIdentity,
    SessionResources,
    SideEffectRecord,
)
from holon_ctx.continuity.state import ResumeContext
from holon_ctx.continuity.store import ContinuityStore

__all__ = [
    "SEED",
    "SEED_SUMMARY",
    "T0",
    "ApprovalGranted",
    "CapabilityInForce",
    "CheckpointTaken",
    "ConstraintStated",
    "HistoryEvent",
    "ManualClock",
    "ObligationOpened",
    "PolicyInForce",
    "SeedValues",
    "SessionStarted",
    "SideEffectObserved",
    "apply_history",
    "compaction_kwargs",
    "fold_history",
    "resume_from",
    "seed_history",
]

#: The fixed instant the built-in scenarios start at (the seed's date).
T0: Final = datetime(2026, 7, 21, 12, 0, tzinfo=UTC)


@attrs.define
class ManualClock:
    """An injectable clock that only moves when told to."""

    now: datetime

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta) -> datetime:
        self.now = self.now + delta
        return self.now


@attrs.frozen
class SeedValues:
    """The seed's minimal envelope values (§1)."""

    envelope_id: str = "ce-2026-07-21-001"
    session_id: str = "session-support-001"
    source_trace_id: str = "trace-support-042"
    objective: str = "Resolve the support request without creating a duplicate ticket."
    constraint_ref: str = "event:user-constraint-017"
    constraint_text: str = "Do not open a second ticket for this request."
    obligation: str = "reconcile_ticket_write"
    tenant_id: str = "tenant-acme"
    principal_id: str = "user-42"
    delegated_scope: str = "tickets:create"
    policy_version: str = "policy-v4"
    capability_name: str = "create_ticket"
    capability_version: str = "create-ticket-v3"
    approval_id: str = "apr-017"
    action_digest: str = "sha256:approved-action"
    approval_expires_at: datetime = datetime(2026, 7, 21, 18, 0, tzinfo=UTC)
    idempotency_key: str = "ticket-intent-017"
    checkpoint_ref: str = "checkpoint:support-042-step-6"
    sandbox_snapshot_ref: str = "snapshot:support-042"
    budget_remaining: int = 7
    first_event: str = "event-0001"
    last_event: str = "event-0142"


SEED: Final = SeedValues()

#: The derived summary of events 0001–0142. Only its digest is ever checked.
SEED_SUMMARY: Final = (
    b"The customer cannot sign in to the support portal. A ticket write was attempted "
    b"(intent ticket-intent-017); its outcome must be reconciled before any retry."
)


@attrs.frozen
class SessionStarted:
    identity: SessionIdentity
    resources: SessionResources
    objective: str


@attrs.frozen
class PolicyInForce:
    tenant_id: str
    policy_version: str


@attrs.frozen
class CapabilityInForce:
    capability_name: str
    capability_version: str


@attrs.frozen
class ConstraintStated:
    record: ConstraintRecord


@attrs.frozen
class ApprovalGranted:
    record: ApprovalRecord


@attrs.frozen
class SideEffectObserved:
    record: SideEffectRecord


@attrs.frozen
class ObligationOpened:
    session_id: str
    obligation: str


@attrs.frozen
class CheckpointTaken:
    session_id: str
    checkpoint_ref: str


HistoryEvent = (
    SessionStarted
    | PolicyInForce
    | CapabilityInForce
    | ConstraintStated
    | ApprovalGranted
    | SideEffectObserved
    | ObligationOpened
    | CheckpointTaken
)


def seed_history(
    seed: SeedValues = SEED, *, side_effect_status: SideEffectStatus = SideEffectStatus.NONE
) -> list[HistoryEvent]:
    """The seed session up to its compaction point."""
    return [
        SessionStarted(
            identity=SessionIdentity(
                session_id=seed.session_id,
                tenant_id=seed.tenant_id,
                principal_id=seed.principal_id,
                authorization_mode=AuthorizationMode.USER_DELEGATED,
                delegated_principal_id=seed.principal_id,
                delegated_scope=seed.delegated_scope,
            ),
            resources=SessionResources(
                session_id=seed.session_id,
                budget_remaining=seed.budget_remaining,
                sandbox_snapshot_ref=seed.sandbox_snapshot_ref,
            ),
            objective=seed.objective,
        ),
        PolicyInForce(seed.tenant_id, seed.policy_version),
        CapabilityInForce(seed.capability_name, seed.capability_version),
        ConstraintStated(
            ConstraintRecord(session_id=seed.session_id, ref=seed.constraint_ref, text=seed.constraint_text)
        ),
        ApprovalGranted(
            ApprovalRecord(
                approval_id=seed.approval_id,
                tenant_id=seed.tenant_id,
                principal_id=seed.principal_id,
                capability_name=seed.capability_name,
                action_digest=seed.action_digest,
                status=ApprovalStatus.APPROVED,
                expires_at=seed.approval_expires_at,
            )
        ),
        SideEffectObserved(
            SideEffectRecord(
                idempotency_key=seed.idempotency_key,
                tenant_id=seed.tenant_id,
                session_id=seed.session_id,
                status=side_effect_status,
            )
        ),
        ObligationOpened(seed.session_id, seed.obligation),
        CheckpointTaken(seed.session_id, seed.checkpoint_ref),
    ]


def apply_history(store: ContinuityStore, history: Iterable[HistoryEvent], at: datetime) -> None:
    """Record each history event as governed state (what the runtime writes as it goes)."""
    for event in history:
        match event:
            case SessionStarted(identity=identity, resources=resources):
                store.set_session_identity(identity, at=at)
                store.set_session_resources(resources, at=at)
            case PolicyInForce(tenant_id=tenant, policy_version=version):
                store.set_policy_version(tenant, version, at=at)
            case CapabilityInForce(capability_name=name, capability_version=version):
                store.set_capability_version(name, version, at=at)
            case ConstraintStated(record=record):
                store.add_constraint(record, at=at)
            case ApprovalGranted(record=record):
                store.put_approval(record, at=at)
            case SideEffectObserved(record=record):
                store.record_side_effect(record, at=at)
            case ObligationOpened(session_id=session, obligation=obligation):
                store.open_obligation(session, obligation, at=at)
            case CheckpointTaken(session_id=session, checkpoint_ref=ref):
                store.record_checkpoint(session, ref, at=at)


def fold_history(history: Sequence[HistoryEvent]) -> dict[str, Any]:
    """Control state known from the complete history, keyed like envelope fields."""
    state: dict[str, Any] = {
        "capability_name": None,
        "capability_version": None,
        "approval_id": None,
        "action_digest": None,
        "approval_expires_at": None,
        "idempotency_key": None,
        "side_effect_status": SideEffectStatus.NONE,
        "exact_constraint_refs": (),
        "pending_obligations": (),
    }
    versions: dict[str, str] = {}
    for event in history:
        match event:
            case SessionStarted(identity=identity, resources=resources, objective=objective):
                state.update(
                    session_id=identity.session_id,
                    tenant_id=identity.tenant_id,
                    principal_id=identity.principal_id,
                    authorization_mode=identity.authorization_mode,
                    delegated_principal_id=identity.delegated_principal_id,
                    delegated_scope=identity.delegated_scope,
                    budget_remaining=resources.budget_remaining,
                    sandbox_snapshot_ref=resources.sandbox_snapshot_ref,
                    objective=objective,
                )
            case PolicyInForce(policy_version=version):
                state["policy_version"] = version
            case CapabilityInForce(capability_name=name, capability_version=version):
                versions[name] = version
            case ConstraintStated(record=record):
                state["exact_constraint_refs"] += (record.ref,)
            case ApprovalGranted(record=record):
                state.update(
                    approval_id=record.approval_id,
                    action_digest=record.action_digest,
                    approval_expires_at=record.expires_at,
                    capability_name=record.capability_name,
                )
            case SideEffectObserved(record=record):
                state.update(idempotency_key=record.idempotency_key, side_effect_status=record.status)
            case ObligationOpened(obligation=obligation):
                state["pending_obligations"] += (obligation,)
            case CheckpointTaken(checkpoint_ref=ref):
                state["checkpoint_ref"] = ref
    if state["capability_name"] is not None:
        state["capability_version"] = versions.get(state["capability_name"])
    return state


def compaction_kwargs(control: dict[str, Any], seed: SeedValues = SEED) -> dict[str, Any]:
    """``prepare_compaction`` keyword arguments a runtime derives from its control state."""
    return {
        "envelope_id": seed.envelope_id,
        "session_id": control["session_id"],
        "source_trace_id": seed.source_trace_id,
        "source_event_range": (seed.first_event, seed.last_event),
        "objective": control["objective"],
        "exact_constraint_refs": control["exact_constraint_refs"],
        "pending_obligations": control["pending_obligations"],
        "tenant_id": control["tenant_id"],
        "principal_id": control["principal_id"],
        "authorization_mode": control["authorization_mode"],
        "delegated_principal_id": control["delegated_principal_id"],
        "delegated_scope": control["delegated_scope"],
        "capability_name": control["capability_name"],
        "approval_id": control["approval_id"],
        "idempotency_key": control["idempotency_key"],
        "checkpoint_ref": control["checkpoint_ref"],
        "sandbox_snapshot_ref": control["sandbox_snapshot_ref"],
        "budget_remaining": control["budget_remaining"],
    }


def resume_from(control: dict[str, Any]) -> ResumeContext:
    """The resume claim of the same actor that ran the history (no next action chosen yet)."""
    return ResumeContext(
        session_id=control["session_id"],
        tenant_id=control["tenant_id"],
        principal_id=control["principal_id"],
        authorization_mode=control["authorization_mode"],
        delegated_principal_id=control["delegated_principal_id"],
        delegated_scope=control["delegated_scope"],
    )
