"""The current-input relation: why the current turn exists, decided structurally.

Only runtime facts decide: the trigger kind, the anchor link, the task's spawning turn, and whether
an external event matches an open wait. Text is never read. A provider fallback, retry or recovery
never becomes the operator's intent: its anchor is the latest trusted operator intent.
"""

from __future__ import annotations

from holon_ctx.ledger.records import ExternalEvent, TaskResult, Trigger
from holon_ctx.projection.base.model import Relation, TurnUnit

__all__ = ["RELATION_TEXT", "current_relation"]

#: How the prompt states each relation (the model reads this line).
RELATION_TEXT: dict[Relation, str] = {
    Relation.NEW_OPERATOR_INTENT: "new trusted operator intent",
    Relation.OPERATOR_REFINEMENT: "the operator refines an earlier request",
    Relation.OPERATOR_OVERRIDE: "the operator overrides an earlier request",
    Relation.APPROVAL_DECISION: "an operator approval decision",
    Relation.TASK_RESULT_CONTINUATION: "a task result continuing an earlier request",
    Relation.TASK_RESULT: "a task result with no known requesting turn",
    Relation.EXTERNAL_CONTINUATION: "an external event continuing a waiting chain",
    Relation.EXTERNAL_WAKE: "an external event waking the agent (untrusted, not operator input)",
    Relation.TIMER_WAKE: "a timer wake",
    Relation.SCHEDULER_WAKE: "a scheduler tick",
    Relation.PROVIDER_RECOVERY: "a provider fallback or retry (does not replace the operator's intent)",
    Relation.RUNTIME_RECOVERY: "a runtime recovery or restart",
    Relation.EXTENSION_WAKE: "a runtime extension trigger",
    # An agent loop's step (mini-swe-agent's x-agent-step, …): what the model must know is that
    # it is mid-task, carrying on the request it was given, not starting something new.
    Relation.EXTENSION_CONTINUATION: "the loop's next step on its request",
}

_BY_TRIGGER: dict[Trigger, Relation] = {
    Trigger.OPERATOR_OVERRIDE: Relation.OPERATOR_OVERRIDE,
    Trigger.APPROVAL_DECISION: Relation.APPROVAL_DECISION,
    Trigger.TIMER: Relation.TIMER_WAKE,
    Trigger.SCHEDULER_TICK: Relation.SCHEDULER_WAKE,
    Trigger.PROVIDER_FALLBACK: Relation.PROVIDER_RECOVERY,
    Trigger.PROVIDER_RETRY: Relation.PROVIDER_RECOVERY,
    Trigger.RECOVERY: Relation.RUNTIME_RECOVERY,
    Trigger.RESTART: Relation.RUNTIME_RECOVERY,
}


def current_relation(current: TurnUnit) -> Relation:
    turn = current.turn
    trigger = turn.kind
    if trigger is Trigger.OPERATOR_INPUT:
        return (Relation.OPERATOR_REFINEMENT if turn.anchor_turn_id
                else Relation.NEW_OPERATOR_INTENT)
    if trigger in _BY_TRIGGER:
        return _BY_TRIGGER[trigger]
    if trigger in (Trigger.TASK_RESULT, Trigger.SUBAGENT_RESULT):
        spawned = any(isinstance(r.record, TaskResult) and r.record.spawned_by_turn_id
                      for r in current.records)
        return (Relation.TASK_RESULT_CONTINUATION if spawned or turn.anchor_turn_id
                else Relation.TASK_RESULT)
    if trigger is Trigger.EXTERNAL_EVENT:
        waits = any(isinstance(r.record, ExternalEvent) and r.record.wait_id
                    for r in current.records)
        return (Relation.EXTERNAL_CONTINUATION if waits or turn.anchor_turn_id
                else Relation.EXTERNAL_WAKE)
    return Relation.EXTENSION_CONTINUATION if turn.anchor_turn_id else Relation.EXTENSION_WAKE
