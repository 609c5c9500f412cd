"""Closed vocabularies of the continuity validator: decisions, reason codes and their precedence.

Theory of operation: every check produces *findings*, each carrying one :class:`ReasonCode`. A
code belongs to one :class:`FindingClass`. The decision is a function of the classes present:

* any ``fail`` finding            → ``continuity_validation_failed``
* else any ``reconcile`` finding  → ``blocked_on_reconciliation``
* else                            → ``reauthorization_required`` (reason ``continuity_validated``)

``reconciliation_required`` is true whenever a ``reconcile`` finding exists, whatever the decision,
so a digest mismatch can never hide an unknown side effect. The *primary* reason is the finding
of the deciding class that comes first in :data:`PRECEDENCE`. There is deliberately no decision
that authorises anything: the best outcome still requires re-authorisation.

The reference package's codes are kept verbatim; the others are added for the checks it does not
perform. The set is closed: a snapshot test pins it, so adding or renaming a code is a visible,
reviewed change (other tools key on these strings).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import Final

__all__ = [
    "CODE_CLASS",
    "DECISION_RANK",
    "FIELD_CODE",
    "PRECEDENCE",
    "REFERENCE_CODES",
    "SET_FIELD_CODES",
    "DecisionKind",
    "FindingClass",
    "ReasonCode",
]


class DecisionKind(StrEnum):
    """The three outcomes of rehydration; none of them authorises an action."""

    REAUTHORIZATION_REQUIRED = "reauthorization_required"
    BLOCKED_ON_RECONCILIATION = "blocked_on_reconciliation"
    CONTINUITY_VALIDATION_FAILED = "continuity_validation_failed"


class FindingClass(StrEnum):
    """What a finding does to the decision."""

    PASS = "pass"
    RECONCILE = "reconcile"
    FAIL = "fail"


class ReasonCode(StrEnum):
    """Stable reason codes. Values are part of the public contract; never rename one."""

    # The only passing reason.
    CONTINUITY_VALIDATED = "continuity_validated"
    # Kept verbatim from the reference package.
    SUMMARY_DIGEST_MISMATCH = "summary_digest_mismatch"
    UNKNOWN_SIDE_EFFECT = "unknown_side_effect"
    PARTIAL_SIDE_EFFECT = "partial_side_effect"
    TENANT_MISMATCH = "tenant_mismatch"
    PRINCIPAL_MISMATCH = "principal_mismatch"
    AUTHORIZATION_MODE_CHANGED = "authorization_mode_changed"
    DELEGATED_PRINCIPAL_CHANGED = "delegated_principal_changed"
    DELEGATED_SCOPE_CHANGED = "delegated_scope_changed"
    POLICY_VERSION_CHANGED = "policy_version_changed"
    CAPABILITY_CHANGED = "capability_changed"
    CAPABILITY_VERSION_CHANGED = "capability_version_changed"
    APPROVAL_BINDING_CHANGED = "approval_binding_changed"
    ACTION_DIGEST_CHANGED = "action_digest_changed"
    IDEMPOTENCY_KEY_CHANGED = "idempotency_key_changed"
    SIDE_EFFECT_STATUS_CHANGED = "side_effect_status_changed"
    CHECKPOINT_CHANGED = "checkpoint_changed"
    APPROVAL_REVOKED = "approval_revoked"
    APPROVAL_NOT_ACTIVE = "approval_not_active"
    APPROVAL_EXPIRED = "approval_expired"
    # Added: what the reference documents but does not check.
    GOVERNED_STATE_UNAVAILABLE = "governed_state_unavailable"
    ENVELOPE_NOT_FOUND = "envelope_not_found"
    ENVELOPE_UNDECODABLE = "envelope_undecodable"
    SCHEMA_VERSION_MISSING = "schema_version_missing"
    SCHEMA_VERSION_UNSUPPORTED = "schema_version_unsupported"
    UNKNOWN_FIELD = "unknown_field"
    MISSING_FIELD = "missing_field"
    MALFORMED_FIELD = "malformed_field"
    ENVELOPE_ID_MISMATCH = "envelope_id_mismatch"
    COMPACTION_INCOMPLETE = "compaction_incomplete"
    ENVELOPE_SUPERSEDED = "envelope_superseded"
    ENVELOPE_RECORD_MISMATCH = "envelope_record_mismatch"
    UNTRUSTED_CLOCK = "untrusted_clock"
    SESSION_MISMATCH = "session_mismatch"
    EVENT_LINEAGE_BROKEN = "event_lineage_broken"
    EVENT_RANGE_MISMATCH = "event_range_mismatch"
    APPROVAL_RECORD_MISSING = "approval_record_missing"
    APPROVAL_RECORD_MISMATCH = "approval_record_mismatch"
    SANDBOX_SNAPSHOT_CHANGED = "sandbox_snapshot_changed"
    BUDGET_CHANGED = "budget_changed"
    BUDGET_EXHAUSTED = "budget_exhausted"
    CONSTRAINT_DROPPED = "constraint_dropped"
    CONSTRAINT_UNKNOWN = "constraint_unknown"
    OBLIGATION_DROPPED = "obligation_dropped"
    OBLIGATION_UNKNOWN = "obligation_unknown"
    REAUTHORIZATION_FLAG_CLEARED = "reauthorization_flag_cleared"


R = ReasonCode

#: The reference package's codes, which must never change spelling.
REFERENCE_CODES: Final[frozenset[ReasonCode]] = frozenset(
    {
        R.CONTINUITY_VALIDATED, R.SUMMARY_DIGEST_MISMATCH, R.UNKNOWN_SIDE_EFFECT,
        R.PARTIAL_SIDE_EFFECT, R.TENANT_MISMATCH, R.PRINCIPAL_MISMATCH,
        R.AUTHORIZATION_MODE_CHANGED, R.DELEGATED_PRINCIPAL_CHANGED, R.DELEGATED_SCOPE_CHANGED,
        R.POLICY_VERSION_CHANGED, R.CAPABILITY_CHANGED, R.CAPABILITY_VERSION_CHANGED,
        R.APPROVAL_BINDING_CHANGED, R.ACTION_DIGEST_CHANGED, R.IDEMPOTENCY_KEY_CHANGED,
        R.SIDE_EFFECT_STATUS_CHANGED, R.CHECKPOINT_CHANGED, R.APPROVAL_REVOKED,
        R.APPROVAL_NOT_ACTIVE, R.APPROVAL_EXPIRED,
    }
)  # fmt: skip

#: Primary-reason precedence, most fundamental first. Why this order: a problem that makes later
#: checks meaningless (no readable state, no envelope, bad schema, untrusted time) outranks the
#: problems those checks find; identity outranks contract versions, which outrank approvals, which
#: outrank bookkeeping drift. Side-effect codes come last because they only decide when nothing
#: fails, and then they are reported through ``reconciliation_required`` as well.
PRECEDENCE: Final[tuple[ReasonCode, ...]] = (
    R.GOVERNED_STATE_UNAVAILABLE,
    R.ENVELOPE_NOT_FOUND,
    R.ENVELOPE_UNDECODABLE,
    R.SCHEMA_VERSION_MISSING,
    R.SCHEMA_VERSION_UNSUPPORTED,
    R.UNKNOWN_FIELD,
    R.MISSING_FIELD,
    R.MALFORMED_FIELD,
    R.ENVELOPE_ID_MISMATCH,
    R.COMPACTION_INCOMPLETE,
    R.ENVELOPE_SUPERSEDED,
    R.ENVELOPE_RECORD_MISMATCH,
    R.UNTRUSTED_CLOCK,
    R.SESSION_MISMATCH,
    R.EVENT_LINEAGE_BROKEN,
    R.EVENT_RANGE_MISMATCH,
    R.SUMMARY_DIGEST_MISMATCH,
    R.TENANT_MISMATCH,
    R.PRINCIPAL_MISMATCH,
    R.AUTHORIZATION_MODE_CHANGED,
    R.DELEGATED_PRINCIPAL_CHANGED,
    R.DELEGATED_SCOPE_CHANGED,
    R.POLICY_VERSION_CHANGED,
    R.CAPABILITY_CHANGED,
    R.CAPABILITY_VERSION_CHANGED,
    R.APPROVAL_RECORD_MISSING,
    R.APPROVAL_REVOKED,
    R.APPROVAL_EXPIRED,
    R.APPROVAL_NOT_ACTIVE,
    R.APPROVAL_RECORD_MISMATCH,
    R.APPROVAL_BINDING_CHANGED,
    R.ACTION_DIGEST_CHANGED,
    R.IDEMPOTENCY_KEY_CHANGED,
    R.SIDE_EFFECT_STATUS_CHANGED,
    R.CHECKPOINT_CHANGED,
    R.SANDBOX_SNAPSHOT_CHANGED,
    R.BUDGET_CHANGED,
    R.BUDGET_EXHAUSTED,
    R.CONSTRAINT_DROPPED,
    R.CONSTRAINT_UNKNOWN,
    R.OBLIGATION_DROPPED,
    R.OBLIGATION_UNKNOWN,
    R.REAUTHORIZATION_FLAG_CLEARED,
    R.UNKNOWN_SIDE_EFFECT,
    R.PARTIAL_SIDE_EFFECT,
    R.CONTINUITY_VALIDATED,
)

_RECONCILE: Final = frozenset({R.UNKNOWN_SIDE_EFFECT, R.PARTIAL_SIDE_EFFECT})

#: Which class each code belongs to (the decision table's input).
CODE_CLASS: Final[MappingProxyType[ReasonCode, FindingClass]] = MappingProxyType(
    {
        code: (
            FindingClass.PASS
            if code is R.CONTINUITY_VALIDATED
            else FindingClass.RECONCILE
            if code in _RECONCILE
            else FindingClass.FAIL
        )
        for code in ReasonCode
    }
)

#: Strictness of a decision: higher is stricter. Validation failure is the strictest because
#: nothing in the envelope may be used; blocking still lets the envelope stand once reconciled.
DECISION_RANK: Final[MappingProxyType[DecisionKind, int]] = MappingProxyType(
    {
        DecisionKind.REAUTHORIZATION_REQUIRED: 0,
        DecisionKind.BLOCKED_ON_RECONCILIATION: 1,
        DecisionKind.CONTINUITY_VALIDATION_FAILED: 2,
    }
)

#: The reason code reported when a field disagrees with its counterpart, whoever holds it.
FIELD_CODE: Final[Mapping[str, ReasonCode]] = MappingProxyType(
    {
        "envelope_id": R.ENVELOPE_ID_MISMATCH,
        "session_id": R.SESSION_MISMATCH,
        "source_trace_id": R.EVENT_LINEAGE_BROKEN,
        "source_event_range": R.EVENT_RANGE_MISMATCH,
        "reset_reason": R.ENVELOPE_RECORD_MISMATCH,
        "objective": R.ENVELOPE_RECORD_MISMATCH,
        "evidence_refs": R.ENVELOPE_RECORD_MISMATCH,
        "tenant_id": R.TENANT_MISMATCH,
        "principal_id": R.PRINCIPAL_MISMATCH,
        "authorization_mode": R.AUTHORIZATION_MODE_CHANGED,
        "delegated_principal_id": R.DELEGATED_PRINCIPAL_CHANGED,
        "delegated_scope": R.DELEGATED_SCOPE_CHANGED,
        "policy_version": R.POLICY_VERSION_CHANGED,
        "capability_name": R.CAPABILITY_CHANGED,
        "capability_version": R.CAPABILITY_VERSION_CHANGED,
        "approval_id": R.APPROVAL_BINDING_CHANGED,
        "action_digest": R.ACTION_DIGEST_CHANGED,
        "approval_expires_at": R.APPROVAL_RECORD_MISMATCH,
        "idempotency_key": R.IDEMPOTENCY_KEY_CHANGED,
        "side_effect_status": R.SIDE_EFFECT_STATUS_CHANGED,
        "checkpoint_ref": R.CHECKPOINT_CHANGED,
        "sandbox_snapshot_ref": R.SANDBOX_SNAPSHOT_CHANGED,
        "budget_remaining": R.BUDGET_CHANGED,
        "summary_sha256": R.SUMMARY_DIGEST_MISMATCH,
    }
)

#: Set-valued fields: (code when the reference has an item the envelope lacks, code for extras).
SET_FIELD_CODES: Final = {
    "exact_constraint_refs": (R.CONSTRAINT_DROPPED, R.CONSTRAINT_UNKNOWN),
    "pending_obligations": (R.OBLIGATION_DROPPED, R.OBLIGATION_UNKNOWN),
}
