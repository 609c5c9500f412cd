"""Retention facts: what each record says about its turn, and the class each fact carries.

Theory of operation. :func:`record_facts` lists the facts one record exhibits on its own
(``operator_input``, ``tool_failure``, ``task_result``…); :func:`trigger_facts` those a turn's
trigger gives it. ``RULES`` maps each fact to a :class:`Priority`. The projection
(:mod:`holon_ctx.projection.planning.retention`) combines a turn's facts with the few rules that need its
neighbour (repeated polls, duplicate wakes) and classifies the turn by its highest fact.

The facts live here, beside the records, because the store indexes them when a record is appended:
a turn is *marked high* once any of its records (or its trigger) carries a high fact. No later
record can take that back — the low and diagnostic rules apply only to turns with no substantive
fact — so the mark is exact as of any position, and the projection can fetch high turns from the
whole history by lookup (``LedgerStore.high_turns_before``) instead of reading pages.
"""

from __future__ import annotations

import hashlib
from enum import IntEnum
from typing import Final

from holon_ctx.ledger.records import (
    Brief,
    BriefKind,
    Environment,
    ExternalEvent,
    Message,
    MessageRole,
    Pin,
    Record,
    TaskResult,
    Tool,
    Turn,
    Wait,
    WorkItem,
)

__all__ = ["HIGH_FACTS", "HIGH_INDEX_KEY", "RULES", "Priority", "marks_high", "record_facts",
           "trigger_facts"]


class Priority(IntEnum):
    """Retention classes; a lower value is kept first."""

    PINNED = 0
    HIGH = 1
    NORMAL = 2
    LOW = 3
    DIAGNOSTIC = 4

    @property
    def label(self) -> str:
        return _PRIORITY_LABELS[self]


_PRIORITY_LABELS: dict[Priority, str] = {p: p.name.lower() for p in Priority}

#: Fact → priority class. The table *is* the policy; docs/projection.md prints it.
RULES: Final[dict[str, Priority]] = {
    # pinned reasons, assigned by the projection from the view
    "current_turn": Priority.PINNED,
    "continuation_anchor": Priority.PINNED,
    "latest_operator_intent": Priority.PINNED,
    "current_work_item_transition": Priority.PINNED,
    "operator_pin": Priority.PINNED,
    # the step just before the current one in an agent loop (same trigger, same anchor)
    "previous_step": Priority.PINNED,
    # high
    "operator_input": Priority.HIGH,
    "result_brief": Priority.HIGH,
    "work_item_transition": Priority.HIGH,
    "wait_transition": Priority.HIGH,
    "completion": Priority.HIGH,
    "verification_outcome": Priority.HIGH,
    "task_failure": Priority.HIGH,
    "task_success_changes_next_action": Priority.HIGH,
    "external_state_change": Priority.HIGH,
    "side_effect_unresolved": Priority.HIGH,
    "tool_failure": Priority.HIGH,
    "pin_added": Priority.HIGH,
    "environment_change": Priority.HIGH,
    # normal
    "task_result": Priority.NORMAL,
    "tool_summary": Priority.NORMAL,
    "external_event": Priority.NORMAL,
    "assistant_message": Priority.NORMAL,
    "runtime_note": Priority.NORMAL,
    "progress_brief": Priority.NORMAL,
    "unclassified": Priority.NORMAL,
    # low
    "duplicate_wake": Priority.LOW,
    "noop_tick": Priority.LOW,
    "repeated_pending_poll": Priority.LOW,
    "ack_only": Priority.LOW,
    # diagnostic
    "provider_fallback": Priority.DIAGNOSTIC,
    "provider_retry": Priority.DIAGNOSTIC,
    "transport_recovery": Priority.DIAGNOSTIC,
}

#: Facts that make a turn high (unless it is pinned, which only raises it).
HIGH_FACTS: Final = frozenset(f for f, p in RULES.items() if p is Priority.HIGH)
#: Bump when :func:`record_facts` or :func:`trigger_facts` changes which records yield a high
#: fact: a store whose high-turn index was built under another key rebuilds it on open.
_FACTS_VERSION: Final = 1
HIGH_INDEX_KEY: Final = hashlib.sha256(
    repr((_FACTS_VERSION, sorted(HIGH_FACTS))).encode()).hexdigest()[:16]


def trigger_facts(turn: Turn) -> list[str]:
    """Facts a turn has by its trigger alone."""
    return ["operator_input"] if turn.by_operator else []


def record_facts(rec: Record) -> list[str]:
    """Facts one (non-turn) record gives the turn that owns it, in a fixed order: one case per
    kind of record (RFC 0002's retention facts)."""
    facts: list[str] = []
    match rec:
        case Message(role=MessageRole.OPERATOR):
            facts = ["operator_input"]
        case Message(role=MessageRole.ASSISTANT):
            facts = ["assistant_message"]
        case Message():
            facts = ["runtime_note"]
        case Pin():
            facts = ["pin_added"]
        case Environment():
            facts = ["environment_change"]
        case Brief() if rec.reports_result:
            facts = ["result_brief"]
        case Brief(kind=BriefKind.PROGRESS):
            facts = ["progress_brief"]
        case WorkItem():
            closed = (rec.status is not None and rec.status.closed) or rec.completion_report
            facts = ["work_item_transition", "completion"] if closed else ["work_item_transition"]
        case Wait():
            facts = ["wait_transition"]
        case TaskResult():
            facts = _task_facts(rec)
        case ExternalEvent():
            facts = ["external_state_change" if rec.wait_id else "external_event"]
        case Tool():
            facts = ["tool_summary"]
            if rec.side_effect_unresolved:
                facts.append("side_effect_unresolved")
            # A non-zero exit is a failure whatever the status says (the renderer alerts it).
            if rec.failed:
                facts.append("tool_failure")
    return facts


def _task_facts(rec: TaskResult) -> list[str]:
    facts = ["task_result"]
    if rec.verification:
        facts.append("verification_outcome")
    if rec.failed:
        facts.append("task_failure")
    elif rec.changes_next_action:
        facts.append("task_success_changes_next_action")
    return facts


def marks_high(rec: Record) -> bool:
    """Whether ``rec`` gives its turn (a turn record: itself) a high retention fact."""
    facts = trigger_facts(rec) if isinstance(rec, Turn) else record_facts(rec)
    return any(f in HIGH_FACTS for f in facts)
