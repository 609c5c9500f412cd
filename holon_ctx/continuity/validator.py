"""The continuity validator: a pure function from (envelope, governed state, resume claim, time) to
a :class:`Decision`.

Theory of operation. Nothing here does I/O: the caller (``rehydrate``) loads the governed state and
reads the clock first, turning any failure into findings, then calls in. Validation runs *every*
check in :data:`CHECKS`, in order, and keeps every finding; a check whose inputs failed to decode
simply skips (the decode already reported it). That is the "schema first, but keep collecting"
rule: a malformed field or a digest mismatch never hides an unknown side effect, because the
side-effect check runs regardless and also scans the session's whole side-effect ledger.

Three comparisons catch three different failures:

* envelope vs compaction record (journal steps 1–4): tampering after the envelope was sealed;
* envelope vs governed state (registry, ledger, versions): drift since compaction;
* envelope vs resume claim (who resumes, what they intend next): a different actor or action.

Each field maps to one reason code (:data:`FIELD_CODE`) whichever comparison finds it. The
full-history path (:func:`verify_control_state`) runs the governed and resume comparisons on
control state derived from the complete history instead of from an envelope.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any, Final

import attrs

from holon_ctx.continuity.codes import ReasonCode
from holon_ctx.continuity.comparison import CheckContext, compare, show
from holon_ctx.continuity.decision import Decision, Finding
from holon_ctx.continuity.digest import digests_equal, summary_digest
from holon_ctx.continuity.envelope import (
    AuthorizationMode,
    EventRange,
    decode_envelope,
    id_problem,
)
from holon_ctx.continuity.records import ApprovalStatus
from holon_ctx.continuity.side_effect_checks import check_side_effects
from holon_ctx.continuity.state import CompactionRecord, GovernedState, ResumeContext

__all__ = [
    "CHECKS",
    "collect_findings",
    "verify_control_state",
    "verify_envelope",
]

R = ReasonCode

_MODES: Final = frozenset(m.value for m in AuthorizationMode)
_IDENTITY_FIELDS: Final = (
    "tenant_id", "principal_id", "authorization_mode", "delegated_principal_id", "delegated_scope",
)  # fmt: skip


def _check_resume(ctx: CheckContext) -> Iterable[Finding]:
    for name, value in attrs.asdict(ctx.resume).items():
        if value is None and name not in {"session_id", "tenant_id", "principal_id"}:
            continue
        problem = id_problem(value) if isinstance(value, str) else "is not a string"
        if problem:
            yield Finding(R.MALFORMED_FIELD, f"resume.{name}", problem)
    mode = ctx.resume.authorization_mode
    if not isinstance(mode, str) or mode not in _MODES:
        yield Finding(R.MALFORMED_FIELD, "resume.authorization_mode", "unknown authorization mode")


def _check_record(ctx: CheckContext) -> Iterable[Finding]:
    if not ctx.envelope_mode:
        return
    if ctx.fields.get("envelope_id", ctx.envelope_id) != ctx.envelope_id:
        yield Finding(R.ENVELOPE_ID_MISMATCH, "$.envelope_id", "stored under another id")
    record = ctx.governed.record or CompactionRecord()
    missing = record.missing_steps()
    if missing:
        yield Finding(
            R.COMPACTION_INCOMPLETE,
            "journal",
            "steps not recorded: " + ", ".join(step.value for step in missing),
        )
    where = "compaction record"
    if record.boundary is not None:
        yield from compare(ctx.fields, _struct_fields(record.boundary), where)
    if record.checkpoint is not None:
        yield from compare(ctx.fields, _struct_fields(record.checkpoint), where)
    if record.snapshot is not None:
        yield from compare(ctx.fields, _struct_fields(record.snapshot), where)
    if record.sealed is not None:
        yield from compare(ctx.fields, {"summary_sha256": record.sealed.summary_sha256}, where)
        stored = ctx.governed.stored_envelope_sha256
        if stored is not None and not digests_equal(stored, record.sealed.envelope_sha256):
            yield Finding(
                R.ENVELOPE_RECORD_MISMATCH,
                "$",
                "stored envelope bytes differ from the sealed bytes",
            )


def _struct_fields(struct: Any) -> dict[str, Any]:
    # Journal bodies and registry records share the envelope's field names by design.
    return {name: getattr(struct, name) for name in struct.__struct_fields__}


def _check_superseded(ctx: CheckContext) -> Iterable[Finding]:
    latest = ctx.governed.latest_complete_envelope_id
    if ctx.envelope_mode and latest is not None and latest != ctx.envelope_id:
        yield Finding(R.ENVELOPE_SUPERSEDED, "$.envelope_id", f"superseded by {show(latest)}")


def _check_digest(ctx: CheckContext) -> Iterable[Finding]:
    f = ctx.fields
    if not ctx.envelope_mode or ctx.envelope_id is None or ctx.summary_bytes is None:
        return
    if not all(k in f for k in ("session_id", "source_event_range", "summary_sha256")):
        return
    span: EventRange = f["source_event_range"]
    expected = summary_digest(
        envelope_id=ctx.envelope_id,
        session_id=f["session_id"],
        source_event_range=(span.first, span.last),
        summary_bytes=ctx.summary_bytes,
    )
    if not digests_equal(expected, f["summary_sha256"]):
        yield Finding(
            R.SUMMARY_DIGEST_MISMATCH,
            "$.summary_sha256",
            "the summary given is not the one bound to this envelope, session and event range",
        )


def _check_identity(ctx: CheckContext) -> Iterable[Finding]:
    resume = attrs.asdict(ctx.resume)
    yield from compare(ctx.fields, {"session_id": resume["session_id"]}, "resume claim")
    yield from compare(ctx.fields, {k: resume[k] for k in _IDENTITY_FIELDS}, "resume claim")
    identity = ctx.governed.session_identity
    if identity is None:
        yield Finding(R.SESSION_MISMATCH, "governed.identity", "no governed identity for session")
        return
    yield from compare(ctx.fields, _struct_fields(identity), "governed identity")


def _check_contract_versions(ctx: CheckContext) -> Iterable[Finding]:
    f, governed = ctx.fields, ctx.governed
    if "tenant_id" in f:  # the policy in force is the tenant's; unknown tenant, nothing to compare
        yield from compare(f, {"policy_version": governed.policy_version}, "policy in force")
    name = f.get("capability_name")
    if name is not None and "capability_version" in f:
        capability = governed.capability
        if capability is None or capability.capability_version is None:
            yield Finding(R.CAPABILITY_CHANGED, "$.capability_name", "capability withdrawn or unknown")
        elif capability.capability_name != name:
            detail = f"the record given is for {show(capability.capability_name)}"
            yield Finding(R.CAPABILITY_CHANGED, "governed.capability", detail)
        else:
            current = {"capability_version": capability.capability_version}
            yield from compare(f, current, "capability catalogue")
    if ctx.resume.capability_name is not None:
        yield from compare(f, {"capability_name": ctx.resume.capability_name}, "resume claim")


def _check_approval(ctx: CheckContext) -> Iterable[Finding]:
    f, resume = ctx.fields, ctx.resume
    claims = (("approval_id", resume.approval_id), ("action_digest", resume.action_digest))
    intended = {name: value for name, value in claims if value is not None}
    yield from compare(f, intended, "resume claim")
    if f.get("approval_id") is None:
        return
    record = ctx.governed.approval
    if record is None:
        yield Finding(R.APPROVAL_RECORD_MISSING, "$.approval_id", "not in the approval registry")
        return
    if record.approval_id != f["approval_id"]:
        # A record of another approval proves nothing about this one (verify_envelope callers
        # load state themselves): every other comparison below is then against the wrong record.
        detail = f"the record given is for {show(record.approval_id)}"
        yield Finding(R.APPROVAL_RECORD_MISMATCH, "governed.approval", detail)
    where = "approval registry"
    for name in ("tenant_id", "principal_id", "approval_expires_at"):
        key = "expires_at" if name == "approval_expires_at" else name
        if name in f and f[name] != getattr(record, key):
            yield Finding(
                R.APPROVAL_RECORD_MISMATCH,
                f"$.{name}",
                f"{show(f[name])} != {where} {show(getattr(record, key))}",
            )
    bound = {"capability_name": record.capability_name, "action_digest": record.action_digest}
    for finding in compare(f, bound, where):
        # The registry binding moved: that is the approval binding, not the capability, changing.
        code = R.APPROVAL_BINDING_CHANGED if finding.code is R.CAPABILITY_CHANGED else finding.code
        yield attrs.evolve(finding, code=code)
    if record.status is ApprovalStatus.REVOKED:
        yield Finding(R.APPROVAL_REVOKED, "governed.approval", "revoked in the registry")
    elif record.status is not ApprovalStatus.APPROVED:
        yield Finding(R.APPROVAL_NOT_ACTIVE, "governed.approval", f"status {record.status.value}")
    # Inclusive boundary: at the instant of expiry the approval is already expired.
    if ctx.now is not None and ctx.now >= record.expires_at:
        yield Finding(R.APPROVAL_EXPIRED, "governed.approval", f"expired at {record.expires_at}")


def _check_session_state(ctx: CheckContext) -> Iterable[Finding]:
    f, governed = ctx.fields, ctx.governed
    yield from compare(f, {"checkpoint_ref": governed.checkpoint_ref}, "governed checkpoint")
    resources = governed.resources
    if resources is None:
        yield Finding(R.BUDGET_CHANGED, "governed.resources", "no governed budget for session")
        return
    if "session_id" in f and resources.session_id != f["session_id"]:
        detail = f"the record given is for {show(resources.session_id)}"
        yield Finding(R.SESSION_MISMATCH, "governed.resources", detail)
    current = {
        "budget_remaining": resources.budget_remaining,
        "sandbox_snapshot_ref": resources.sandbox_snapshot_ref,
    }
    yield from compare(f, current, "governed resources")
    if resources.budget_remaining <= 0:
        yield Finding(R.BUDGET_EXHAUSTED, "governed.resources", "no budget remaining")


def _check_obligations_and_constraints(ctx: CheckContext) -> Iterable[Finding]:
    current = {
        "pending_obligations": ctx.governed.open_obligations,
        "exact_constraint_refs": ctx.governed.active_constraint_refs,
    }
    yield from compare(ctx.fields, current, "governed store")


#: Every check, in evaluation order. All run; none short-circuits another.
CHECKS: Final[tuple[tuple[str, Callable[[CheckContext], Iterable[Finding]]], ...]] = (
    ("resume claim is well-formed", _check_resume),
    ("envelope matches its compaction record", _check_record),
    ("envelope is the session's latest", _check_superseded),
    ("summary digest binds envelope, session, range and bytes", _check_digest),
    ("session, tenant, principal and delegation unchanged", _check_identity),
    ("policy and capability versions unchanged", _check_contract_versions),
    ("approval valid in the registry", _check_approval),
    ("no unknown or partial side effect", check_side_effects),
    ("checkpoint, sandbox and budget unchanged", _check_session_state),
    ("obligations and constraints all carried", _check_obligations_and_constraints),
)


def collect_findings(
    fields: Mapping[str, Any],
    *,
    resume: ResumeContext,
    governed: GovernedState,
    now: datetime | None,
    envelope_mode: bool,
    envelope_id: str | None = None,
    summary_bytes: bytes | None = None,
) -> list[Finding]:
    """Run every check in :data:`CHECKS` and return all findings, in check order."""
    ctx = CheckContext(
        fields=fields,
        resume=resume,
        governed=governed,
        now=now,
        envelope_mode=envelope_mode,
        envelope_id=envelope_id,
        summary_bytes=summary_bytes,
    )
    findings: list[Finding] = []
    for name, check in CHECKS:
        try:
            findings.extend(check(ctx))
        except Exception as exc:  # Totality, failing closed: a check that cannot run fails.
            detail = f"could not be evaluated: {type(exc).__name__}"
            findings.append(Finding(R.MALFORMED_FIELD, f"check:{name}", detail))
    return findings


def verify_envelope(
    raw: object,
    *,
    envelope_id: str,
    summary_bytes: bytes,
    resume: ResumeContext,
    governed: GovernedState,
    now: datetime | None,
    prior_findings: Iterable[Finding] = (),
) -> Decision:
    """Validate raw envelope data against governed state. Total: never raises on any input.

    ``now`` is ``None`` when the clock could not be trusted; the caller then passes the
    ``untrusted_clock`` finding in ``prior_findings`` (as it does for unreadable governed state).
    """
    decoded = decode_envelope(raw)
    findings = [*prior_findings, *decoded.findings]
    findings += collect_findings(
        decoded.fields,
        resume=resume,
        governed=governed,
        now=now,
        envelope_mode=True,
        envelope_id=envelope_id,
        summary_bytes=summary_bytes,
    )
    return Decision.from_findings(
        findings, envelope_id=envelope_id, session_id=decoded.fields.get("session_id")
    )


def verify_control_state(
    fields: Mapping[str, Any],
    *,
    resume: ResumeContext,
    governed: GovernedState,
    now: datetime | None,
    prior_findings: Iterable[Finding] = (),
) -> Decision:
    """The full-history path: control state from the complete history, no envelope or summary."""
    findings = [*prior_findings]
    findings += collect_findings(fields, resume=resume, governed=governed, now=now, envelope_mode=False)
    return Decision.from_findings(findings, session_id=resume.session_id)
