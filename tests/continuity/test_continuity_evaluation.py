"""The §6 evaluation: full history vs compacted history, and the judge that compares them."""

from __future__ import annotations

import attrs
import pytest

from holon_ctx.continuity import Decision, DecisionKind, Finding, ReasonCode
from holon_ctx.continuity.evaluation import (
    SCENARIOS,
    EvalScenario,
    PathOutcome,
    judge,
    run_evaluation,
    run_scenario,
)

K = DecisionKind
R = ReasonCode

SEED_REQUIREMENTS = {
    "negative user constraints are still enforced",
    "expired or revoked approvals are not reusable",
    "a policy or capability change forces a new decision",
    "side_effect_unknown never becomes an automatic retry",
    "tenant and principal cannot change",
    "instructions injected into a summary stay untrusted data",
    "unfinished obligations stay visible",
    "the trace links pre-compaction and post-rehydration evidence",
}


def test_every_seed_requirement_has_a_scenario() -> None:
    """Each of the seed's eight §6 requirements is exercised by at least one scenario."""
    assert {s.requirement for s in SCENARIOS} == SEED_REQUIREMENTS


def test_all_scenarios_pass() -> None:
    """The compacted path is never more permissive than full history (blocking in CI)."""
    failures = {r.scenario.name: r.problems for r in run_evaluation() if not r.passed}
    assert failures == {}


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_scenario_decisions(scenario: EvalScenario) -> None:
    """Each scenario ends in its expected decision and reason, and is same-or-stricter."""
    result = run_scenario(scenario)
    compacted = result.compacted.decision
    assert (compacted.kind, compacted.reason) == scenario.expected
    assert compacted.authorized is False
    assert result.full.decision.authorized is False


def test_unknown_side_effect_scenario_never_rehydrates() -> None:
    """Both paths require reconciliation, and the compacted trace has no rehydration."""
    result = run_scenario(next(s for s in SCENARIOS if s.name == "unknown_side_effect"))
    assert result.full.decision.reconciliation_required
    assert result.compacted.decision.reconciliation_required
    types = [e.event_type.value for e in result.compacted.events]
    assert types == ["context_compaction", "continuity_validation_failed"]


def test_injected_instructions_change_nothing() -> None:
    """A summary claiming authority leaves the decision, constraints and approval untouched."""
    result = run_scenario(next(s for s in SCENARIOS if s.name == "injected_instructions"))
    full, compacted = result.full, result.compacted
    assert (compacted.decision.kind, compacted.decision.reason) == (
        full.decision.kind,
        full.decision.reason,
    )
    assert compacted.constraints == full.constraints
    assert compacted.summary_trust == "derived_untrusted"


def _outcome(*codes: ReasonCode, **extra: object) -> PathOutcome:
    return PathOutcome(decision=Decision.from_findings(Finding(c) for c in codes), **extra)  # type: ignore[arg-type]


PLAIN = EvalScenario(
    "probe",
    "negative user constraints are still enforced",
    (K.REAUTHORIZATION_REQUIRED, R.CONTINUITY_VALIDATED),
)


def test_judge_rejects_a_more_permissive_compacted_path() -> None:
    """A compacted pass where full history blocks is a failure."""
    problems = judge(
        attrs.evolve(PLAIN, expected=(K.REAUTHORIZATION_REQUIRED, R.CONTINUITY_VALIDATED)),
        _outcome(R.UNKNOWN_SIDE_EFFECT),
        _outcome(summary_trust="derived_untrusted"),
    )
    assert any("less strict" in p for p in problems)


def test_judge_rejects_a_failure_that_forgets_reconciliation() -> None:
    """Trading a required reconciliation for another failure is not stricter."""
    problems = judge(
        attrs.evolve(PLAIN, expected=(K.CONTINUITY_VALIDATION_FAILED, R.TENANT_MISMATCH)),
        _outcome(R.UNKNOWN_SIDE_EFFECT),
        _outcome(R.TENANT_MISMATCH),
    )
    assert any("less strict" in p for p in problems)


def test_judge_rejects_a_lost_constraint_or_obligation() -> None:
    """A passing view missing a constraint or an open obligation fails the scenario."""
    problems = judge(
        PLAIN,
        _outcome(constraints=(("event:c1", "no"),), obligations=("o1",)),
        _outcome(summary_trust="derived_untrusted"),
    )
    assert "a constraint visible in full history is missing after rehydration" in problems
    assert "an open obligation is missing after rehydration" in problems


def test_judge_rejects_an_unlabelled_summary_and_a_missing_trace() -> None:
    """A passing view must label the summary untrusted and the trace must link both ends."""
    problems = judge(PLAIN, _outcome(), _outcome())
    assert "the summary is not labelled untrusted" in problems
    assert any("compaction and a terminal event" in p for p in problems)


def test_judge_rejects_an_unexpected_decision() -> None:
    """Stricter is not enough: the expected decision pins regressions."""
    problems = judge(PLAIN, _outcome(), _outcome(R.POLICY_VERSION_CHANGED))
    assert any(p.startswith("expected reauthorization_required") for p in problems)
