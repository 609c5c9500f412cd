"""Ledger record types: what an agent runtime appends, one msgspec Struct per kind.

Every record has a ledger-unique ``id`` and a ``type`` tag, and carries provenance: ``origin``
(who produced it) and ``trust`` (how far its text may be believed). Provenance is set when the
record is appended and never changed afterwards; nothing a model writes can raise it.

A record's *ref* is ``"{type}:{id}"`` (``turn:t41``, ``tool:x9``); refs are what manifests, pins,
episodes and ``explain`` speak in. Work items and waits change over time, so their records are
transitions: ``work_item`` records carry ``work_item_id`` and ``wait`` records carry ``wait_id``,
and the current state is the fold of the transitions (see :mod:`holon_ctx.ledger.state`).

Ownership (RFC 0001): a message, brief, tool run, task result or external event belongs to a turn
only when its own non-empty ``turn_id`` equals that turn's id. Nothing is attached by position or
timestamp once a ledger has turns; disagreements are reported by the validator, never guessed.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Final, TypeAlias

import msgspec

__all__ = [
    "EXTENSION_TRIGGER",
    "FORMAT_VERSION",
    "KNOWN_TRIGGERS",
    "OPERATOR_TRIGGERS",
    "Brief",
    "BriefKind",
    "Environment",
    "ExternalEvent",
    "Message",
    "MessageRole",
    "Origin",
    "Outcome",
    "Pin",
    "Record",
    "RecordBase",
    "SideEffect",
    "TaskResult",
    "TaskStatus",
    "Todo",
    "Tool",
    "ToolStatus",
    "Trust",
    "Turn",
    "Wait",
    "WaitStatus",
    "WorkItem",
    "WorkItemStatus",
    "record_ref",
]

FORMAT_VERSION: Final = 1


class Origin(StrEnum):
    """Who produced a record."""

    OPERATOR = "operator"
    ASSISTANT = "assistant"
    RUNTIME = "runtime"
    TASK = "task"
    TOOL = "tool"
    EXTERNAL = "external"
    SCHEDULER = "scheduler"
    PROVIDER = "provider"


class Trust(StrEnum):
    """How far a record's text may be believed; only the operator's own words are instructions."""

    TRUSTED_OPERATOR = "trusted_operator"
    RUNTIME_FACT = "runtime_fact"
    UNTRUSTED_EXTERNAL = "untrusted_external"
    MODEL_OUTPUT = "model_output"


class Outcome(StrEnum):
    RESULT = "result"
    WAIT = "wait"
    COMPLETE = "complete"
    ERROR = "error"
    INTERRUPTED = "interrupted"
    NOOP = "noop"


class MessageRole(StrEnum):
    OPERATOR = "operator"
    ASSISTANT = "assistant"
    SYSTEM = "system"


class BriefKind(StrEnum):
    RESULT = "result"
    COMPLETION_REPORT = "completion_report"
    PROGRESS = "progress"
    ACK = "ack"


class TaskStatus(StrEnum):
    SUCCESS = "success"
    FAILURE = "failure"
    CANCELLED = "cancelled"
    TIMEOUT = "timeout"
    PARTIAL = "partial"


class ToolStatus(StrEnum):
    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
    #: The call was issued and no result has been recorded yet (an unresolved tool call).
    PENDING = "pending"


class SideEffect(StrEnum):
    """What a tool run did to the world outside the sandbox, as far as the runtime knows."""

    NONE = "none"
    COMPLETED = "completed"
    PARTIAL = "partial"
    UNKNOWN = "unknown"


class WorkItemStatus(StrEnum):
    OPEN = "open"
    ACTIVE = "active"
    WAITING = "waiting"
    BLOCKED = "blocked"
    DONE = "done"
    ABANDONED = "abandoned"


class WaitStatus(StrEnum):
    OPEN = "open"
    RESOLVED = "resolved"
    CANCELLED = "cancelled"
    EXPIRED = "expired"


#: Trigger kinds the engine understands. Anything else must use the extension form ``x-name``.
KNOWN_TRIGGERS: Final = frozenset(
    {
        "operator_input",
        "operator_override",
        "task_result",
        "external_event",
        "timer",
        "scheduler_tick",
        "provider_fallback",
        "provider_retry",
        "recovery",
        "restart",
        "subagent_result",
        "approval_decision",
    }
)
OPERATOR_TRIGGERS: Final = frozenset({"operator_input", "operator_override", "approval_decision"})
#: Extension triggers: lowercase, namespaced by the ``x-`` prefix so they never shadow a known one.
EXTENSION_TRIGGER: Final = re.compile(r"^x-[a-z0-9][a-z0-9_.-]{0,62}$")


class RecordBase(
    msgspec.Struct,
    tag_field="type",
    kw_only=True,
    frozen=True,
    omit_defaults=True,
    forbid_unknown_fields=False,
):
    """Fields every record shares. ``v`` is the JSONL format version of the line."""

    v: int = FORMAT_VERSION
    id: str
    origin: Origin | None = None
    trust: Trust | None = None
    #: Wall-clock time as the runtime recorded it (RFC 3339); informational, never used for order.
    at: str | None = None


class Turn(RecordBase, tag="turn", kw_only=True, frozen=True):
    """One activation of the agent: the causal unit of the ledger."""

    seq: int
    trigger: str
    work_item_id: str | None = None
    #: The earlier turn this one continues (its continuation anchor).
    anchor_turn_id: str | None = None
    outcome: Outcome | None = None
    #: A short runtime-written description of the trigger ("CI run 88 finished").
    label: str | None = None


class Message(RecordBase, tag="message", kw_only=True, frozen=True):
    turn_id: str | None = None
    role: MessageRole
    text: str


class Brief(RecordBase, tag="brief", kw_only=True, frozen=True):
    turn_id: str | None = None
    kind: BriefKind
    text: str
    work_item_id: str | None = None


class TaskResult(RecordBase, tag="task_result", kw_only=True, frozen=True):
    turn_id: str | None = None
    task_id: str
    status: TaskStatus
    summary: str = ""
    output_ref: str | None = None
    #: The turn that spawned the task: how a result rejoins the request it answers.
    spawned_by_turn_id: str | None = None
    work_item_id: str | None = None
    wait_id: str | None = None
    #: True when the result is a verification (tests, CI, review) rather than plain work output.
    verification: bool = False


class Tool(RecordBase, tag="tool", kw_only=True, frozen=True):
    turn_id: str | None = None
    tool_name: str
    args_digest: str = ""
    args_preview: str = ""
    status: ToolStatus
    exit_code: int | None = None
    output: str = ""
    output_ref: str | None = None
    #: Provider call id (``tool_call_id`` / ``tool_use_id``) when imported from a transcript.
    call_id: str | None = None
    side_effect: SideEffect | None = None
    #: Files the run wrote, as the runtime observed them (the artifact trail).
    files_written: list[str] = []


class ExternalEvent(RecordBase, tag="external_event", kw_only=True, frozen=True):
    turn_id: str | None = None
    source: str
    text: str
    wait_id: str | None = None
    work_item_id: str | None = None


class Todo(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    text: str
    done: bool = False


class WorkItem(RecordBase, tag="work_item", kw_only=True, frozen=True):
    """A transition of work item ``work_item_id``; fields left out keep their previous value."""

    work_item_id: str
    turn_id: str | None = None
    objective: str | None = None
    plan: list[str] | None = None
    todos: list[Todo] | None = None
    status: WorkItemStatus | None = None
    waits: list[str] | None = None
    blocker: str | None = None
    completion_report: str | None = None


class Wait(RecordBase, tag="wait", kw_only=True, frozen=True):
    """A transition of wait ``wait_id`` (opened, resolved, cancelled, expired)."""

    wait_id: str
    status: WaitStatus
    turn_id: str | None = None
    work_item_id: str | None = None
    condition: str = ""
    resolved_by: str | None = None


class Environment(RecordBase, tag="environment", kw_only=True, frozen=True):
    turn_id: str | None = None
    workspace: str = ""
    capabilities: list[str] = []
    guidance: str = ""


class Pin(RecordBase, tag="pin", kw_only=True, frozen=True):
    """Something the operator wants kept in view: ``target`` is a ref that must exist."""

    turn_id: str | None = None
    target: str
    note: str = ""


Record: TypeAlias = (
    Turn | Message | Brief | TaskResult | Tool | ExternalEvent | WorkItem | Wait | Environment | Pin
)


def record_ref(record: Record) -> str:
    """The ref of a record: ``type:id``."""
    return f"{type(record).__struct_config__.tag}:{record.id}"
