"""Before a context reset: the seed's five compaction steps, each journaled before the next runs.

Theory of operation. :func:`prepare_compaction` writes, in order:

1. ``boundary``          the safe boundary: session, source trace, trigger and the durable range
2. ``checkpoint``        the current checkpoint and the unfinished obligations
3. ``governed_snapshot`` identity, policy, capability, approval, idempotency, side-effect, sandbox
                         and budget state, read from the governed store, never from the summary
4. ``envelope``          the summary digest and the sealed envelope (appended, never replaced)
5. ``compaction_event``  the ``context_compaction`` trace event

A step is journaled under the envelope id only after its effects are stored, and the next step
starts only after that. So after a crash between any two steps the store holds either no envelope
(steps 1–3: rehydration reports ``envelope_not_found``) or an envelope whose journal lacks step 5
(rehydration reports ``compaction_incomplete``); ``latest_envelope`` ignores both. Nothing ever
rehydrates from the summary alone. Recovery is to call :func:`prepare_compaction` again with the
same envelope id and the same inputs: journaled steps are verified and skipped (a step 3 snapshot
is reused, not re-read), missing ones run. Different inputs under a reused id raise
:class:`CompactionConflictError`.

``fault_hook(step)`` is called after each step is journaled; tests raise from it to simulate a
crash at every point.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import attrs
import msgspec

from holon_ctx.continuity.digest import envelope_sha256, summary_digest
from holon_ctx.continuity.envelope import (
    ENVELOPE_FIELDS,
    SCHEMA_VERSION,
    AuthorizationMode,
    Envelope,
    EventRange,
    ResetReason,
    SideEffectStatus,
    check_field,
    decode_envelope,
    encode_envelope,
)
from holon_ctx.continuity.exceptions import (
    CompactionConflictError,
    ContinuityInputError,
    GovernedStateError,
    UntrustedClockError,
)
from holon_ctx.continuity.records import (
    BoundaryStep,
    CheckpointStep,
    CompactionEventStep,
    CompactionStep,
    EnvelopeStep,
    GovernedSnapshot,
    SessionIdentity,
    SessionResources,
    SideEffectEntry,
    TraceEventType,
)
from holon_ctx.continuity.store import ContinuityStore
from holon_ctx.continuity.trace import compaction_payload
from holon_ctx.errors import quote_value

__all__ = ["Clock", "CompactionRequest", "FaultHook", "prepare_compaction"]

#: An injected clock: returns the current time as an *aware* datetime.
Clock = Callable[[], datetime]
#: Called with each step right after it is journaled (crash injection in tests).
FaultHook = Callable[[CompactionStep], None]


def _trusted_now(store: ContinuityStore, clock: Clock) -> datetime:
    now = clock()
    if not isinstance(now, datetime) or now.tzinfo is None or now.utcoffset() is None:
        raise UntrustedClockError(f"clock returned {quote_value(now)}; an aware datetime is required")
    store.stamp(now)  # raises if earlier than anything the store has recorded
    return now


def _validate_inputs(values: dict[str, Any]) -> None:
    problems = [f for name, value in values.items() for f in check_field(name, value)]
    if problems:
        first = problems[0]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise ContinuityInputError(first.detail + more, path=first.path)


def _journal(
    store: ContinuityStore,
    envelope_id: str,
    step: CompactionStep,
    body: msgspec.Struct,
    journaled: dict[CompactionStep, Any],
    now: datetime,
) -> None:
    if step in journaled:
        if journaled[step] != body:
            raise CompactionConflictError(envelope_id, step.value, "differs from the journaled step")
        return
    store.record_step(envelope_id, step, body, at=now)
    journaled[step] = body


def _snapshot(
    store: ContinuityStore,
    identity: SessionIdentity,
    req: CompactionRequest,
    exact_constraint_refs: tuple[str, ...],
    evidence_refs: tuple[str, ...],
    now: datetime,
) -> GovernedSnapshot:
    """Step 3: capture control state from the governed store (the runtime's truth)."""
    capability_name, approval_id = req.capability_name, req.approval_id
    idempotency_key, budget_remaining = req.idempotency_key, req.budget_remaining
    sandbox_snapshot_ref = req.sandbox_snapshot_ref
    policy_version = store.policy_version(identity.tenant_id)
    if policy_version is None:
        raise GovernedStateError(f"no policy version in force for tenant {quote_value(identity.tenant_id)}")
    capability_version = None
    if capability_name is not None:
        capability = store.capability(capability_name)
        if capability is None or capability.capability_version is None:
            raise GovernedStateError(f"capability {quote_value(capability_name)} is unknown or withdrawn")
        capability_version = capability.capability_version
    action_digest = expires_at = None
    if approval_id is not None:
        approval = store.approval(approval_id)
        if approval is None:
            raise GovernedStateError(f"approval {quote_value(approval_id)} is not in the registry")
        action_digest, expires_at = approval.action_digest, approval.expires_at
    status = SideEffectStatus.NONE
    if idempotency_key is not None:
        effect = store.side_effect(idempotency_key)
        if effect is None:
            raise GovernedStateError(f"idempotency key {quote_value(idempotency_key)} has no "
                                     "side-effect ledger record")
        status = effect.status
    # Every side effect of the session, whatever its status, read from the ledger (never from the
    # caller): a compactor that names no key, or another key, cannot make one disappear.
    side_effects = tuple(sorted(
        (SideEffectEntry(idempotency_key=r.idempotency_key, status=r.status)
         for r in store.side_effects(identity.session_id)),
        key=lambda entry: entry.idempotency_key,
    ))
    governed_identity = store.session_identity(identity.session_id)
    if governed_identity is None:
        store.set_session_identity(identity, at=now)
    elif governed_identity != identity:
        raise ContinuityInputError(
            "identity differs from the session's governed identity; record the change first",
            path="tenant_id",
        )
    # A governed budget never rises through compaction (RFC 0020): a request stating more than
    # the store holds seals the store's budget; only ``grant_budget`` raises it.
    governed = store.session_resources(identity.session_id)
    if governed is not None:
        budget_remaining = min(budget_remaining, governed.budget_remaining)
    resources = SessionResources(
        session_id=identity.session_id,
        budget_remaining=budget_remaining,
        sandbox_snapshot_ref=sandbox_snapshot_ref,
    )
    if governed != resources:
        store.set_session_resources(resources, at=now)
    return GovernedSnapshot(
        objective=req.objective,
        exact_constraint_refs=exact_constraint_refs,
        tenant_id=identity.tenant_id,
        principal_id=identity.principal_id,
        authorization_mode=identity.authorization_mode,
        delegated_principal_id=identity.delegated_principal_id,
        delegated_scope=identity.delegated_scope,
        policy_version=policy_version,
        capability_name=capability_name,
        capability_version=capability_version,
        approval_id=approval_id,
        action_digest=action_digest,
        approval_expires_at=expires_at,
        idempotency_key=idempotency_key,
        side_effect_status=status,
        sandbox_snapshot_ref=sandbox_snapshot_ref,
        budget_remaining=budget_remaining,
        evidence_refs=evidence_refs,
        side_effects=side_effects,
    )


def _seal(
    envelope_id: str,
    boundary: BoundaryStep,
    checkpoint: CheckpointStep,
    snapshot: GovernedSnapshot,
    digest: str,
) -> Envelope:
    """Step 4's envelope, built only from journaled steps 1–3 plus the digest."""
    # The snapshot holds more than the envelope (every side effect); the envelope takes its fields.
    fields = {name: getattr(snapshot, name) for name in snapshot.__struct_fields__
              if name in ENVELOPE_FIELDS}
    return Envelope(
        schema_version=SCHEMA_VERSION,
        envelope_id=envelope_id,
        session_id=boundary.session_id,
        source_trace_id=boundary.source_trace_id,
        reset_reason=boundary.reset_reason,
        pending_obligations=checkpoint.pending_obligations,
        checkpoint_ref=checkpoint.checkpoint_ref,
        source_event_range=boundary.source_event_range,
        summary_sha256=digest,
        requires_reauthorization=True,
        **fields,
    )


@attrs.frozen(kw_only=True)
class CompactionRequest:
    """What one compaction records: the summary, the boundary it covers, and the control state
    the runtime states for it (checked against the governed store, never taken on trust).

    ``source_event_range`` is the closed range ``(first_id, last_id)`` of ledger events the
    summary was derived from; the caller has made them durable. ``evidence_refs`` defaults to
    ``trace:<source_trace_id>`` plus ``approval:<approval_id>``. Values are validated by
    :func:`prepare_compaction`, which names the first bad field in the order declared here.
    """

    envelope_id: str
    session_id: str
    source_trace_id: str
    source_event_range: tuple[str, str]
    summary_bytes: bytes
    objective: str
    exact_constraint_refs: Sequence[str]
    pending_obligations: Sequence[str]
    tenant_id: str
    principal_id: str
    authorization_mode: AuthorizationMode | str
    delegated_principal_id: str | None = None
    delegated_scope: str | None = None
    capability_name: str | None = None
    approval_id: str | None = None
    idempotency_key: str | None = None
    checkpoint_ref: str
    sandbox_snapshot_ref: str | None = None
    budget_remaining: int
    evidence_refs: Sequence[str] | None = None
    reset_reason: ResetReason | str = ResetReason.CONTEXT_COMPACTION

    def evidence(self) -> tuple[str, ...]:
        if self.evidence_refs is not None:
            return tuple(self.evidence_refs)
        refs = [f"trace:{self.source_trace_id}"]
        if self.approval_id is not None:
            refs.append(f"approval:{self.approval_id}")
        return tuple(refs)


#: Request fields the governed snapshot (step 3) records and a resumed compaction must repeat.
_SNAPSHOT_FIELDS = ("objective", "exact_constraint_refs", "tenant_id", "principal_id",
                    "authorization_mode", "delegated_principal_id", "delegated_scope",
                    "capability_name", "approval_id", "idempotency_key", "sandbox_snapshot_ref",
                    "budget_remaining", "evidence_refs")


def _check_snapshot(snapshot: GovernedSnapshot, values: dict[str, Any], envelope_id: str) -> None:
    """Resuming after a crash reuses the journaled snapshot: it must be the same compaction's
    (every field the caller gives is the same, the budget at most the governed one)."""
    for name in _SNAPSHOT_FIELDS:
        value = values[name]
        if name == "budget_remaining" and isinstance(value, int) \
                and snapshot.budget_remaining <= value:
            continue  # sealed at the governed budget, which a request may not raise
        if getattr(snapshot, name) != value:
            raise CompactionConflictError(envelope_id, "governed_snapshot", f"{name} differs")


def _store_envelope(store: ContinuityStore, envelope: Envelope, body: bytes,
                    now: datetime) -> None:
    """Append the sealed envelope (encoded as ``body``) once: an equal one stored before is
    kept; a different one under its id is a conflict."""
    problems = decode_envelope(body).findings
    if problems:
        raise ContinuityInputError(problems[0].detail, path=problems[0].path)
    envelope_id = envelope.envelope_id
    stored = store.envelope_bytes(envelope_id)
    if stored is None:
        store.append_envelope(envelope, at=now)
    elif stored != body:
        # Compared by meaning: an envelope stored in another (older) encoding is the same one.
        previous = decode_envelope(stored).envelope
        if previous is None or encode_envelope(previous) != body:
            raise CompactionConflictError(envelope_id, "envelope", "a different envelope is stored")


def prepare_compaction(store: ContinuityStore, request: CompactionRequest, *, clock: Clock,
                       fault_hook: FaultHook | None = None) -> Envelope:
    """Run (or resume) the five compaction steps for ``request`` and return the sealed envelope.

    Policy and capability versions, the approval's action digest and expiry, and the side-effect
    status are read from the store. Raises ``ContinuityInputError`` for malformed input,
    ``GovernedStateError`` when governed state the envelope must carry is missing,
    ``UntrustedClockError`` for a naive or backwards clock.
    """
    req = request
    if not isinstance(req.summary_bytes, bytes | bytearray):
        raise ContinuityInputError("summary must be bytes (it is hashed exactly)", path="summary")
    constraint_refs, obligations, evidence = (
        tuple(req.exact_constraint_refs), tuple(req.pending_obligations), req.evidence())
    first, last = req.source_event_range
    values = {name: getattr(req, name) for name in attrs.fields_dict(CompactionRequest)
              if name != "summary_bytes"}
    values.update(source_event_range={"first": first, "last": last},
                  exact_constraint_refs=constraint_refs, pending_obligations=obligations,
                  evidence_refs=evidence)
    _validate_inputs(values)
    now = _trusted_now(store, clock)
    hook = fault_hook or (lambda _step: None)
    envelope_id = req.envelope_id
    journaled = store.compaction_steps(envelope_id)

    session_id = req.session_id
    boundary = BoundaryStep(
        session_id=session_id,
        source_trace_id=req.source_trace_id,
        reset_reason=ResetReason(req.reset_reason),
        source_event_range=EventRange(first=first, last=last),
    )
    _journal(store, envelope_id, CompactionStep.BOUNDARY, boundary, journaled, now)
    hook(CompactionStep.BOUNDARY)

    checkpoint = CheckpointStep(checkpoint_ref=req.checkpoint_ref, pending_obligations=obligations)
    if CompactionStep.CHECKPOINT not in journaled:
        store.record_checkpoint(session_id, req.checkpoint_ref, at=now)
        already_open = set(store.open_obligations(session_id))
        for obligation in obligations:
            if obligation not in already_open:
                store.open_obligation(session_id, obligation, at=now)
    _journal(store, envelope_id, CompactionStep.CHECKPOINT, checkpoint, journaled, now)
    hook(CompactionStep.CHECKPOINT)

    if CompactionStep.GOVERNED_SNAPSHOT not in journaled:
        identity = SessionIdentity(
            session_id=session_id,
            tenant_id=req.tenant_id,
            principal_id=req.principal_id,
            authorization_mode=AuthorizationMode(req.authorization_mode),
            delegated_principal_id=req.delegated_principal_id,
            delegated_scope=req.delegated_scope,
        )
        snapshot = _snapshot(store, identity, req, constraint_refs, evidence, now)
        _journal(store, envelope_id, CompactionStep.GOVERNED_SNAPSHOT, snapshot, journaled, now)
    snapshot = journaled[CompactionStep.GOVERNED_SNAPSHOT]
    _check_snapshot(snapshot, values, envelope_id)
    hook(CompactionStep.GOVERNED_SNAPSHOT)

    digest = summary_digest(
        envelope_id=envelope_id,
        session_id=session_id,
        source_event_range=(first, last),
        summary_bytes=bytes(req.summary_bytes),
    )
    envelope = _seal(envelope_id, boundary, checkpoint, snapshot, digest)
    body = encode_envelope(envelope)
    _store_envelope(store, envelope, body, now)
    sealed = EnvelopeStep(summary_sha256=digest, envelope_sha256=envelope_sha256(envelope))
    _journal(store, envelope_id, CompactionStep.ENVELOPE, sealed, journaled, now)
    hook(CompactionStep.ENVELOPE)

    if CompactionStep.COMPACTION_EVENT not in journaled:
        # A crash between appending the event and journaling it must not emit it twice.
        earlier = [
            e
            for e in store.events(envelope_id=envelope_id)
            if e.event_type is TraceEventType.CONTEXT_COMPACTION
        ]
        seq = (
            earlier[0].seq
            if earlier
            else store.append_event(
                TraceEventType.CONTEXT_COMPACTION,
                envelope_id=envelope_id,
                session_id=session_id,
                payload=compaction_payload(envelope),
                at=now,
            ).seq
        )
        event_step = CompactionEventStep(event_seq=seq)
        _journal(store, envelope_id, CompactionStep.COMPACTION_EVENT, event_step, journaled, now)
    hook(CompactionStep.COMPACTION_EVENT)
    return envelope
