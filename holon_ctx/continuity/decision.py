"""In-memory results of validation: findings, the rebuilt view, and the decision.

A :class:`Decision` can only be built from its findings (:meth:`Decision.from_findings`): its kind,
primary reason and ``reconciliation_required`` flag are *derived* by the table in :mod:`codes`, and
the constructor re-derives them and refuses any disagreement. There is no ``authorized`` field to
set: ``authorized`` is a read-only property that is always ``False``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

import attrs

from holon_ctx.continuity.codes import (
    CODE_CLASS,
    DECISION_RANK,
    PRECEDENCE,
    DecisionKind,
    FindingClass,
    ReasonCode,
)

__all__ = [
    "SUMMARY_TRUST",
    "ConstraintView",
    "Decision",
    "Finding",
    "RehydratedView",
    "classify",
    "is_same_or_stricter",
]

#: How a rebuilt view labels the summary: evidence for the model to read, never an instruction.
SUMMARY_TRUST: Literal["derived_untrusted"] = "derived_untrusted"

_RANK = {code: index for index, code in enumerate(PRECEDENCE)}


@attrs.frozen
class Finding:
    """One problem found by a check; ``path`` locates it (``$.tenant_id``, ``resume.tenant_id``)."""

    code: ReasonCode
    path: str = ""
    detail: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code.value, "path": self.path, "detail": self.detail}


@attrs.frozen
class ConstraintView:
    """An exact user constraint, loaded from the governed store by the ref the envelope holds."""

    ref: str
    text: str


@attrs.frozen
class RehydratedView:
    """The context rebuilt after a passing validation: governed facts first, summary last.

    ``selected_event_refs`` are the source events the caller must load from its own ledger and pin
    (exact constraints and evidence). The summary is returned only as labelled untrusted bytes.
    """

    envelope_id: str
    session_id: str
    objective: str
    checkpoint_ref: str
    constraints: tuple[ConstraintView, ...]
    pending_obligations: tuple[str, ...]
    source_event_range: tuple[str, str]
    selected_event_refs: tuple[str, ...]
    reloaded_versions: tuple[tuple[str, str | None], ...]
    summary_sha256: str
    untrusted_summary: bytes = attrs.field(repr=False)
    #: Every side effect of the session as (idempotency key, status), from the governed ledger:
    #: what was already written, so the agent never repeats a write it cannot see in the summary.
    side_effects: tuple[tuple[str, str], ...] = ()

    @property
    def summary_trust(self) -> Literal["derived_untrusted"]:
        return SUMMARY_TRUST

    @property
    def requires_reauthorization(self) -> Literal[True]:
        return True


def classify(findings: Iterable[Finding]) -> tuple[DecisionKind, ReasonCode, bool]:
    """Apply the decision table: (kind, primary reason, reconciliation_required)."""
    failing = [f.code for f in findings if CODE_CLASS[f.code] is FindingClass.FAIL]
    reconciling = [f.code for f in findings if CODE_CLASS[f.code] is FindingClass.RECONCILE]
    reconcile = bool(reconciling)
    if failing:
        return (
            DecisionKind.CONTINUITY_VALIDATION_FAILED,
            min(failing, key=_RANK.__getitem__),
            reconcile,
        )
    if reconciling:
        return DecisionKind.BLOCKED_ON_RECONCILIATION, min(reconciling, key=_RANK.__getitem__), True
    return DecisionKind.REAUTHORIZATION_REQUIRED, ReasonCode.CONTINUITY_VALIDATED, False


def _dedupe(findings: Iterable[Finding]) -> tuple[Finding, ...]:
    # Two checks may see one fact (envelope vs record, envelope vs governed state): report it once.
    return tuple(dict.fromkeys(f for f in findings if f.code is not ReasonCode.CONTINUITY_VALIDATED))


@attrs.frozen
class Decision:
    """The outcome of rehydration (or of the full-history check). Never an authorisation."""

    kind: DecisionKind
    reason: ReasonCode
    findings: tuple[Finding, ...]
    reconciliation_required: bool
    envelope_id: str | None = None
    session_id: str | None = None
    view: RehydratedView | None = None
    event_types: tuple[str, ...] = ()

    def __attrs_post_init__(self) -> None:
        expected = classify(self.findings)
        if (self.kind, self.reason, self.reconciliation_required) != expected:
            raise ValueError(f"decision disagrees with its findings: expected {expected}")
        if self.view is not None and self.kind is not DecisionKind.REAUTHORIZATION_REQUIRED:
            raise ValueError("only a passing validation may carry a rebuilt view")

    @classmethod
    def from_findings(
        cls,
        findings: Iterable[Finding],
        *,
        envelope_id: str | None = None,
        session_id: str | None = None,
        view: RehydratedView | None = None,
        event_types: tuple[str, ...] = (),
    ) -> Decision:
        unique = _dedupe(findings)
        kind, reason, reconcile = classify(unique)
        return cls(
            kind=kind,
            reason=reason,
            findings=unique,
            reconciliation_required=reconcile,
            envelope_id=envelope_id,
            session_id=session_id,
            view=view if kind is DecisionKind.REAUTHORIZATION_REQUIRED else None,
            event_types=event_types,
        )

    @property
    def authorized(self) -> Literal[False]:
        """Always false: continuity never authorises; the runtime must re-authorise."""
        return False

    @property
    def requires_reauthorization(self) -> Literal[True]:
        return True

    @property
    def reasons(self) -> tuple[ReasonCode, ...]:
        """Every distinct reason code among the findings, in precedence order."""
        return tuple(sorted({f.code for f in self.findings}, key=_RANK.__getitem__))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready rendering; ``authorized`` is always ``false``."""
        return {
            "decision": self.kind.value,
            "reason": self.reason.value,
            "authorized": self.authorized,
            "requires_reauthorization": self.requires_reauthorization,
            "reconciliation_required": self.reconciliation_required,
            "envelope_id": self.envelope_id,
            "session_id": self.session_id,
            "findings": [f.to_dict() for f in self.findings],
            "event_types": list(self.event_types),
        }


def is_same_or_stricter(candidate: Decision, baseline: Decision) -> bool:
    """True when ``candidate`` is at least as strict as ``baseline``.

    Strictness is a partial order: the decision rank may not drop, and a required reconciliation
    may not disappear (blocking on a side effect is never traded for a different failure that
    forgets it).
    """
    if DECISION_RANK[candidate.kind] < DECISION_RANK[baseline.kind]:
        return False
    return candidate.reconciliation_required or not baseline.reconciliation_required
