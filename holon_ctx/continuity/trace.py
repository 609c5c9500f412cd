"""Payloads of the three trace events (the seed's §5).

Payloads carry ids, refs, versions, digests and reason codes only. They never carry the summary
text, constraint text, finding details (which may quote field values) or prompts, so a trace can
be shipped to an observability backend without leaking what the session was about. Every event is
keyed by the envelope id; rehydration and failure events also name the ``context_compaction``
event they continue from (``compaction_event_seq``), which is what links pre-compaction and
post-rehydration evidence.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from holon_ctx.continuity.decision import Decision
from holon_ctx.continuity.envelope import Envelope
from holon_ctx.continuity.records import TraceEventType

__all__ = [
    "RETAINED_FIELD_CLASSES",
    "TraceEventType",
    "compaction_payload",
    "failure_payload",
    "rehydration_payload",
]

#: Classes of state saved outside the summary at compaction (recorded in ``context_compaction``).
RETAINED_FIELD_CLASSES: Final[tuple[str, ...]] = (
    "identity",
    "delegation",
    "policy",
    "capability",
    "approval",
    "idempotency",
    "side_effect",
    "checkpoint",
    "sandbox",
    "budget",
    "obligations",
    "constraints",
    "lineage",
)


def compaction_payload(envelope: Envelope) -> dict[str, Any]:
    """``context_compaction``: envelope id, source range, digest, trigger, retained classes."""
    return {
        "envelope_id": envelope.envelope_id,
        "session_id": envelope.session_id,
        "source_trace_id": envelope.source_trace_id,
        "source_event_range": {
            "first": envelope.source_event_range.first,
            "last": envelope.source_event_range.last,
        },
        "summary_sha256": envelope.summary_sha256,
        "trigger": envelope.reset_reason.value,
        "retained_field_classes": list(RETAINED_FIELD_CLASSES),
        "exact_constraint_refs": list(envelope.exact_constraint_refs),
        "pending_obligations": list(envelope.pending_obligations),
        "evidence_refs": list(envelope.evidence_refs),
    }


def rehydration_payload(
    envelope: Envelope,
    decision: Decision,
    *,
    compaction_event_seq: int | None,
    side_effects: Sequence[tuple[str, str]] = (),
) -> dict[str, Any]:
    """``context_rehydration``: checkpoint, reloaded versions, result, requires_reauthorization.

    ``side_effects`` (idempotency key → status) are the session's side effects the resumed agent
    is told about: keys and statuses only.
    """
    return {
        "envelope_id": envelope.envelope_id,
        "session_id": envelope.session_id,
        "checkpoint_ref": envelope.checkpoint_ref,
        "reloaded_versions": {
            "policy_version": envelope.policy_version,
            "capability_name": envelope.capability_name,
            "capability_version": envelope.capability_version,
        },
        "result": decision.reason.value,
        "decision": decision.kind.value,
        "requires_reauthorization": True,
        "authorized": False,
        "summary_sha256": envelope.summary_sha256,
        "compaction_event_seq": compaction_event_seq,
        "side_effects": dict(side_effects),
    }


def failure_payload(
    envelope_id: str, session_id: str, decision: Decision, *, compaction_event_seq: int | None
) -> dict[str, Any]:
    """``continuity_validation_failed``: the stable reason codes (also used when blocked)."""
    return {
        "envelope_id": envelope_id,
        "session_id": session_id,
        "decision": decision.kind.value,
        "reason": decision.reason.value,
        "reasons": [code.value for code in decision.reasons],
        "finding_paths": sorted({f.path for f in decision.findings if f.path}),
        "reconciliation_required": decision.reconciliation_required,
        "requires_reauthorization": True,
        "authorized": False,
        "compaction_event_seq": compaction_event_seq,
    }
