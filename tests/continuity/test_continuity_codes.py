"""The closed vocabularies and the decision table."""

from __future__ import annotations

import attrs
import pytest

from holon_ctx.continuity import (
    CODE_CLASS,
    PRECEDENCE,
    REFERENCE_CODES,
    Decision,
    DecisionKind,
    Finding,
    FindingClass,
    ReasonCode,
    is_same_or_stricter,
)

R = ReasonCode
K = DecisionKind

REASON_CODES_SNAPSHOT = [
    "action_digest_changed",
    "approval_binding_changed",
    "approval_expired",
    "approval_not_active",
    "approval_record_mismatch",
    "approval_record_missing",
    "approval_revoked",
    "authorization_mode_changed",
    "budget_changed",
    "budget_exhausted",
    "capability_changed",
    "capability_version_changed",
    "checkpoint_changed",
    "compaction_incomplete",
    "constraint_dropped",
    "constraint_unknown",
    "continuity_validated",
    "delegated_principal_changed",
    "delegated_scope_changed",
    "envelope_id_mismatch",
    "envelope_not_found",
    "envelope_record_mismatch",
    "envelope_superseded",
    "envelope_undecodable",
    "event_lineage_broken",
    "event_range_mismatch",
    "governed_state_unavailable",
    "idempotency_key_changed",
    "malformed_field",
    "missing_field",
    "obligation_dropped",
    "obligation_unknown",
    "partial_side_effect",
    "policy_version_changed",
    "principal_mismatch",
    "reauthorization_flag_cleared",
    "sandbox_snapshot_changed",
    "schema_version_missing",
    "schema_version_unsupported",
    "session_mismatch",
    "side_effect_status_changed",
    "summary_digest_mismatch",
    "tenant_mismatch",
    "unknown_field",
    "unknown_side_effect",
    "untrusted_clock",
]

REFERENCE_SNAPSHOT = {
    "continuity_validated", "summary_digest_mismatch", "unknown_side_effect",
    "partial_side_effect", "tenant_mismatch", "principal_mismatch",
    "authorization_mode_changed", "delegated_principal_changed", "delegated_scope_changed",
    "policy_version_changed", "capability_changed", "capability_version_changed",
    "approval_binding_changed", "action_digest_changed", "idempotency_key_changed",
    "side_effect_status_changed", "checkpoint_changed", "approval_revoked",
    "approval_not_active", "approval_expired",
}  # fmt: skip


def test_reason_code_set_is_closed_and_pinned() -> None:
    """The reason codes are exactly the snapshot; changing one is a visible contract change."""
    assert sorted(code.value for code in ReasonCode) == REASON_CODES_SNAPSHOT


def test_reference_codes_are_kept_verbatim() -> None:
    """Every reference package code exists with its exact spelling."""
    assert {code.value for code in REFERENCE_CODES} == REFERENCE_SNAPSHOT


def test_decision_kinds_are_the_three_of_the_seed() -> None:
    """There are three decisions and none of them is an authorisation."""
    assert [k.value for k in DecisionKind] == [
        "reauthorization_required",
        "blocked_on_reconciliation",
        "continuity_validation_failed",
    ]
    assert all("authorized" not in k.value for k in DecisionKind)


def test_precedence_orders_every_code_exactly_once() -> None:
    """The precedence table is a permutation of the code set."""
    assert sorted(PRECEDENCE) == sorted(ReasonCode)
    assert len(set(PRECEDENCE)) == len(PRECEDENCE)


def test_only_side_effect_codes_reconcile_and_only_validated_passes() -> None:
    """The class table: two reconcile codes, one pass code, everything else fails."""
    assert {c for c, k in CODE_CLASS.items() if k is FindingClass.RECONCILE} == {
        R.UNKNOWN_SIDE_EFFECT,
        R.PARTIAL_SIDE_EFFECT,
    }
    assert {c for c, k in CODE_CLASS.items() if k is FindingClass.PASS} == {R.CONTINUITY_VALIDATED}


@pytest.mark.parametrize(
    ("codes", "kind", "reason", "reconcile"),
    [
        ((), K.REAUTHORIZATION_REQUIRED, R.CONTINUITY_VALIDATED, False),
        ((R.UNKNOWN_SIDE_EFFECT,), K.BLOCKED_ON_RECONCILIATION, R.UNKNOWN_SIDE_EFFECT, True),
        (
            (R.PARTIAL_SIDE_EFFECT, R.UNKNOWN_SIDE_EFFECT),
            K.BLOCKED_ON_RECONCILIATION,
            R.UNKNOWN_SIDE_EFFECT,
            True,
        ),
        (
            (R.UNKNOWN_SIDE_EFFECT, R.SUMMARY_DIGEST_MISMATCH),
            K.CONTINUITY_VALIDATION_FAILED,
            R.SUMMARY_DIGEST_MISMATCH,
            True,
        ),
        (
            (R.APPROVAL_EXPIRED, R.TENANT_MISMATCH, R.POLICY_VERSION_CHANGED),
            K.CONTINUITY_VALIDATION_FAILED,
            R.TENANT_MISMATCH,
            False,
        ),
        (
            (R.SUMMARY_DIGEST_MISMATCH, R.MALFORMED_FIELD),
            K.CONTINUITY_VALIDATION_FAILED,
            R.MALFORMED_FIELD,
            False,
        ),
    ],
)
def test_decision_table(
    codes: tuple[ReasonCode, ...], kind: DecisionKind, reason: ReasonCode, reconcile: bool
) -> None:
    """Kind, primary reason and reconciliation flag follow from the findings' classes."""
    decision = Decision.from_findings(Finding(code) for code in codes)
    assert (decision.kind, decision.reason, decision.reconciliation_required) == (
        kind,
        reason,
        reconcile,
    )
    assert set(decision.reasons) == set(codes)


def test_decision_cannot_be_constructed_authorized() -> None:
    """There is no ``authorized`` field to set; the property is always False."""
    decision = Decision.from_findings([])
    assert decision.authorized is False
    assert decision.to_dict()["authorized"] is False
    with pytest.raises(TypeError):
        Decision(  # type: ignore[call-arg]
            kind=K.REAUTHORIZATION_REQUIRED,
            reason=R.CONTINUITY_VALIDATED,
            findings=(),
            reconciliation_required=False,
            authorized=True,
        )
    with pytest.raises(TypeError):
        attrs.evolve(decision, authorized=True)
    with pytest.raises(AttributeError):
        decision.authorized = True  # type: ignore[misc]


def test_decision_refuses_a_kind_its_findings_do_not_support() -> None:
    """A passing kind cannot be paired with a failing finding."""
    with pytest.raises(ValueError, match="disagrees"):
        Decision(
            kind=K.REAUTHORIZATION_REQUIRED,
            reason=R.CONTINUITY_VALIDATED,
            findings=(Finding(R.TENANT_MISMATCH),),
            reconciliation_required=False,
        )
    with pytest.raises(ValueError, match="disagrees"):
        Decision(
            kind=K.BLOCKED_ON_RECONCILIATION,
            reason=R.UNKNOWN_SIDE_EFFECT,
            findings=(Finding(R.UNKNOWN_SIDE_EFFECT),),
            reconciliation_required=False,
        )


def test_duplicate_findings_are_reported_once() -> None:
    """Two checks seeing the same fact produce one finding."""
    finding = Finding(R.TENANT_MISMATCH, "$.tenant_id", "x")
    assert Decision.from_findings([finding, finding]).findings == (finding,)


@pytest.mark.parametrize(
    ("candidate", "baseline", "expected"),
    [
        ((), (), True),
        ((R.TENANT_MISMATCH,), (), True),
        ((), (R.TENANT_MISMATCH,), False),
        ((R.UNKNOWN_SIDE_EFFECT,), (R.UNKNOWN_SIDE_EFFECT,), True),
        ((R.TENANT_MISMATCH,), (R.UNKNOWN_SIDE_EFFECT,), False),
        ((R.TENANT_MISMATCH, R.UNKNOWN_SIDE_EFFECT), (R.UNKNOWN_SIDE_EFFECT,), True),
        ((R.UNKNOWN_SIDE_EFFECT,), (R.TENANT_MISMATCH,), False),
    ],
)
def test_strictness_order(
    candidate: tuple[ReasonCode, ...], baseline: tuple[ReasonCode, ...], expected: bool
) -> None:
    """Same-or-stricter: rank never drops and a required reconciliation never disappears."""
    assert (
        is_same_or_stricter(
            Decision.from_findings(Finding(c) for c in candidate),
            Decision.from_findings(Finding(c) for c in baseline),
        )
        is expected
    )
