"""After a context reset: load, verify, reconcile-or-rebuild, trace. Total: never raises.

Theory of operation. :func:`rehydrate` is the shell around the pure validator:

1. read the clock and the store's latest recorded time; a naive, failing or backwards clock is an
   ``untrusted_clock`` finding (expiry is then not evaluated, and the decision fails);
2. load the envelope *from the store* by id (the summary text is never parsed for control state);
3. load the governed state the checks need; each part that cannot be read becomes a
   ``governed_state_unavailable`` finding instead of an exception;
4. run every check (:mod:`validator`);
5. only if the decision is ``reauthorization_required``: rebuild the view from the envelope, the
   governed constraints and the caller's summary (labelled untrusted), and emit
   ``context_rehydration``; otherwise emit ``continuity_validation_failed`` carrying the stable
   reason codes. An unknown or partial side effect therefore never yields a rehydration event, and
   nothing is retried here: reconciliation is the runtime's next job.

The next capability call still needs policy and authorisation checks: every decision says
``requires_reauthorization`` and none is ``authorized``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar

from holon_ctx.continuity.codes import DecisionKind, ReasonCode
from holon_ctx.continuity.compaction import Clock
from holon_ctx.continuity.decision import ConstraintView, Decision, Finding, RehydratedView
from holon_ctx.continuity.digest import stored_envelope_sha256
from holon_ctx.continuity.envelope import Envelope, decode_envelope, id_problem
from holon_ctx.continuity.records import CompactionStep, SideEffectRecord, TraceEventType
from holon_ctx.continuity.state import CompactionRecord, GovernedState, ResumeContext
from holon_ctx.continuity.store import ContinuityStore
from holon_ctx.continuity.trace import failure_payload, rehydration_payload
from holon_ctx.continuity.validator import collect_findings
from holon_ctx.errors import quote_value

__all__ = ["load_governed_state", "read_clock", "rehydrate"]

_T = TypeVar("_T")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _attempt(part: str, load: Callable[[], _T], default: _T, findings: list[Finding]) -> _T:
    try:
        return load()
    except Exception as exc:  # Totality: any backend failure becomes a finding.
        detail = f"{type(exc).__name__}: {exc}"[:200]
        findings.append(Finding(ReasonCode.GOVERNED_STATE_UNAVAILABLE, f"governed.{part}", detail))
        return default


def read_clock(clock: Clock, last_recorded_at: datetime | None, findings: list[Finding]) -> datetime | None:
    """The current time if it can be trusted, else ``None`` plus an ``untrusted_clock`` finding."""
    try:
        now = clock()
    except Exception as exc:  # Totality: a broken clock is a finding, not a crash.
        findings.append(Finding(ReasonCode.UNTRUSTED_CLOCK, "clock", f"raised {type(exc).__name__}"))
        return None
    if not isinstance(now, datetime) or now.tzinfo is None or now.utcoffset() is None:
        findings.append(Finding(ReasonCode.UNTRUSTED_CLOCK, "clock",
                                f"not an aware datetime: {quote_value(now)}"[:120]))
        return None
    if last_recorded_at is not None and now < last_recorded_at:
        findings.append(
            Finding(
                ReasonCode.UNTRUSTED_CLOCK,
                "clock",
                f"went backwards: {now.isoformat()} < recorded {last_recorded_at.isoformat()}",
            )
        )
        return None
    return now


def load_governed_state(
    store: ContinuityStore,
    envelope_id: str,
    fields: Mapping[str, Any],
    resume: ResumeContext,
    raw: bytes | None,
    findings: list[Finding],
) -> GovernedState:
    """Read everything the checks compare against; unreadable parts become findings."""
    claimed = resume.session_id if isinstance(resume.session_id, str) else None
    session = fields.get("session_id", claimed)
    tenant = fields.get("tenant_id")
    capability_name = fields.get("capability_name")
    approval_id = fields.get("approval_id")
    key = fields.get("idempotency_key")

    def get(part: str, load: Callable[[], _T], default: _T) -> _T:
        return _attempt(part, load, default, findings)

    side_effects: list[SideEffectRecord] = []
    for sid in dict.fromkeys(s for s in (session, claimed) if s is not None):
        empty: tuple[SideEffectRecord, ...] = ()
        side_effects.extend(get("side_effects", functools.partial(store.side_effects, sid), empty))
    no_steps: dict[CompactionStep, Any] = {}
    steps = get("journal", lambda: store.compaction_steps(envelope_id), no_steps)
    sealed = steps.get(CompactionStep.ENVELOPE)
    sealed_sha256 = sealed.envelope_sha256 if sealed is not None else None
    no_ids: tuple[str, ...] = ()
    complete = get("envelopes", lambda: store.complete_envelope_ids(session), no_ids)
    return GovernedState(
        session_identity=get("identity", lambda: store.session_identity(session), None),
        policy_version=(get("policy", lambda: store.policy_version(tenant), None) if tenant else None),
        capability=(
            get("capability", lambda: store.capability(capability_name), None) if capability_name else None
        ),
        approval=get("approval", lambda: store.approval(approval_id), None) if approval_id else None,
        side_effect=get("side_effect", lambda: store.side_effect(key), None) if key else None,
        session_side_effects=tuple(side_effects),
        checkpoint_ref=get("checkpoint", lambda: store.checkpoint(session), None),
        resources=get("resources", lambda: store.session_resources(session), None),
        open_obligations=get("obligations", lambda: store.open_obligations(session), ()),
        active_constraint_refs=get("constraints", lambda: store.constraint_refs(session), ()),
        record=CompactionRecord(
            boundary=steps.get(CompactionStep.BOUNDARY),
            checkpoint=steps.get(CompactionStep.CHECKPOINT),
            snapshot=steps.get(CompactionStep.GOVERNED_SNAPSHOT),
            sealed=steps.get(CompactionStep.ENVELOPE),
            compaction_event=steps.get(CompactionStep.COMPACTION_EVENT),
        ),
        latest_complete_envelope_id=complete[-1] if complete else None,
        stored_envelope_sha256=None if raw is None else stored_envelope_sha256(raw, sealed_sha256),
    )


def _build_view(store: ContinuityStore, envelope: Envelope, summary_bytes: bytes) -> RehydratedView:
    texts = {c.ref: c.text for c in store.constraints(envelope.session_id)}
    span = envelope.source_event_range
    return RehydratedView(
        envelope_id=envelope.envelope_id,
        session_id=envelope.session_id,
        objective=envelope.objective,
        checkpoint_ref=envelope.checkpoint_ref,
        constraints=tuple(ConstraintView(r, texts[r]) for r in envelope.exact_constraint_refs),
        pending_obligations=envelope.pending_obligations,
        source_event_range=(span.first, span.last),
        selected_event_refs=tuple(dict.fromkeys((*envelope.exact_constraint_refs, *envelope.evidence_refs))),
        reloaded_versions=(
            ("policy_version", envelope.policy_version),
            ("capability_name", envelope.capability_name),
            ("capability_version", envelope.capability_version),
        ),
        summary_sha256=envelope.summary_sha256,
        untrusted_summary=bytes(summary_bytes),
        side_effects=tuple(
            (r.idempotency_key, r.status.value) for r in store.side_effects(envelope.session_id)
        ),
    )


def rehydrate(
    store: ContinuityStore,
    envelope_id: str,
    *,
    summary_bytes: bytes,
    resume: ResumeContext,
    clock: Clock,
) -> Decision:
    """Validate the stored envelope for ``resume`` and, only if it passes, rebuild the view.

    Never raises and never authorises. The returned decision's ``event_types`` are the trace
    events this call recorded (``context_rehydration`` or ``continuity_validation_failed``).
    """
    problem = id_problem(envelope_id) if isinstance(envelope_id, str) else "is not a string"
    if problem:
        # Nothing can be loaded or traced under a malformed id.
        finding = Finding(ReasonCode.MALFORMED_FIELD, "envelope_id", problem)
        return Decision.from_findings([finding])
    try:
        return _rehydrate(store, envelope_id, summary_bytes=summary_bytes, resume=resume, clock=clock)
    except Exception as exc:  # Totality, failing closed: input no check anticipated.
        detail = f"rehydration could not complete: {type(exc).__name__}"
        finding = Finding(ReasonCode.GOVERNED_STATE_UNAVAILABLE, "rehydrate", detail)
        return Decision.from_findings([finding], envelope_id=str(envelope_id)[:256])


def _rehydrate(
    store: ContinuityStore,
    envelope_id: str,
    *,
    summary_bytes: bytes,
    resume: ResumeContext,
    clock: Clock,
) -> Decision:
    findings: list[Finding] = []
    last = _attempt("clock_history", store.last_recorded_at, None, findings)
    now = read_clock(clock, last, findings)
    before = len(findings)
    raw = _attempt("envelope", lambda: store.envelope_bytes(envelope_id), None, findings)
    if raw is None and len(findings) == before:
        findings.append(Finding(ReasonCode.ENVELOPE_NOT_FOUND, "$", "no envelope with this id"))
    decoded = decode_envelope(raw) if raw is not None else None
    fields: Mapping[str, Any] = decoded.fields if decoded is not None else {}
    if decoded is not None:
        findings.extend(decoded.findings)
    summary: bytes | None = None
    if isinstance(summary_bytes, bytes | bytearray):
        summary = bytes(summary_bytes)
    else:
        findings.append(Finding(ReasonCode.MALFORMED_FIELD, "summary", "expected bytes"))
    governed = load_governed_state(store, envelope_id, fields, resume, raw, findings)
    findings += collect_findings(
        fields,
        resume=resume,
        governed=governed,
        now=now,
        envelope_mode=True,
        envelope_id=envelope_id,
        summary_bytes=summary,
    )
    session_id = fields.get("session_id", resume.session_id)
    session_id = session_id if isinstance(session_id, str) else ""
    decision = Decision.from_findings(findings, envelope_id=envelope_id, session_id=session_id)
    at = now or last or _EPOCH  # an untrusted clock never stamps the trace
    compaction = governed.record.compaction_event if governed.record else None
    compaction_seq = compaction.event_seq if compaction else None

    if decision.kind is DecisionKind.REAUTHORIZATION_REQUIRED and decoded and decoded.envelope:
        envelope = decoded.envelope
        try:
            view = _build_view(store, envelope, summary or b"")
            store.append_event(
                TraceEventType.CONTEXT_REHYDRATION,
                envelope_id=envelope_id,
                session_id=envelope.session_id,
                payload=rehydration_payload(
                    envelope, decision, compaction_event_seq=compaction_seq,
                    side_effects=view.side_effects,
                ),
                at=at,
            )
        except Exception as exc:  # Totality: without a view and a trace there is no continuity.
            detail = f"could not rebuild or trace: {type(exc).__name__}"
            findings.append(Finding(ReasonCode.GOVERNED_STATE_UNAVAILABLE, "governed.view", detail))
        else:
            return Decision.from_findings(
                findings,
                envelope_id=envelope_id,
                session_id=envelope.session_id,
                view=view,
                event_types=(TraceEventType.CONTEXT_REHYDRATION.value,),
            )
        decision = Decision.from_findings(findings, envelope_id=envelope_id, session_id=session_id)

    payload = failure_payload(envelope_id, session_id, decision, compaction_event_seq=compaction_seq)
    try:
        store.append_event(
            TraceEventType.CONTINUITY_VALIDATION_FAILED,
            envelope_id=envelope_id,
            session_id=session_id,
            payload=payload,
            at=at,
        )
    except Exception as exc:  # Totality: report that the failure could not be traced.
        detail = f"could not record the failure event: {type(exc).__name__}"
        findings.append(Finding(ReasonCode.GOVERNED_STATE_UNAVAILABLE, "governed.trace", detail))
        return Decision.from_findings(findings, envelope_id=envelope_id, session_id=session_id)
    return Decision.from_findings(
        findings,
        envelope_id=envelope_id,
        session_id=session_id,
        event_types=(TraceEventType.CONTINUITY_VALIDATION_FAILED.value,),
    )
