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
    "AnnouncedCall",
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
    "Trigger",
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

    @property
    def closed(self) -> bool:
        """Done or abandoned: nothing more will happen to the work item."""
        return self in (WorkItemStatus.DONE, WorkItemStatus.ABANDONED)


class WaitStatus(StrEnum):
    OPEN = "open"
    RESOLVED = "resolved"
    CANCELLED = "cancelled"
    EXPIRED = "expired"


#: Extension triggers: lowercase, namespaced by the ``x-`` prefix so they never shadow a known one.
EXTENSION_TRIGGER: Final = re.compile(r"^x-[a-z0-9][a-z0-9_.-]{0,62}$")


class Trigger(StrEnum):
    """Why a turn began: the kinds the engine understands, plus runtime extensions ``x-name``.

    ``Trigger("x-deploy.hook")`` is accepted (an extension member that is not among the listed
    ones, so it never compares equal to a known kind); any other unknown string is a ValueError.
    A member compares and hashes like its string value, so ``turn.trigger == Trigger.TIMER``
    holds for the plain string a record carries.
    """

    OPERATOR_INPUT = "operator_input"
    OPERATOR_OVERRIDE = "operator_override"
    TASK_RESULT = "task_result"
    EXTERNAL_EVENT = "external_event"
    TIMER = "timer"
    SCHEDULER_TICK = "scheduler_tick"
    PROVIDER_FALLBACK = "provider_fallback"
    PROVIDER_RETRY = "provider_retry"
    RECOVERY = "recovery"
    RESTART = "restart"
    SUBAGENT_RESULT = "subagent_result"
    APPROVAL_DECISION = "approval_decision"

    @classmethod
    def _missing_(cls, value: object) -> Trigger | None:
        if isinstance(value, str) and EXTENSION_TRIGGER.match(value):
            # Not cached in the value map: extension names are open-ended, the map would grow.
            member = str.__new__(cls, value)
            member._name_ = value
            member._value_ = value
            return member
        return None

    @property
    def is_extension(self) -> bool:
        return self.value.startswith("x-")


#: Trigger kinds the engine understands. Anything else must use the extension form ``x-name``.
KNOWN_TRIGGERS: Final = frozenset(t.value for t in Trigger)
#: Triggers that carry trusted operator input.
OPERATOR_TRIGGERS: Final = frozenset(
    {Trigger.OPERATOR_INPUT.value, Trigger.OPERATOR_OVERRIDE.value, Trigger.APPROVAL_DECISION.value})


class RecordBase(
    msgspec.Struct,
    tag_field="type",
    kw_only=True,
    frozen=True,
    omit_defaults=True,
    forbid_unknown_fields=True,
):
    """Fields every record shares. ``v`` is the JSONL format version of the line.

    The types forbid unknown fields so that decoding's fast path is the strict one; the JSONL
    reader then reads past an unknown field (forward compatibility) unless it looks like a
    misspelling of one the line lacks, such as ``tunr_id``, which is refused
    (:func:`holon_ctx.ledger.codec.decode_line`, RFC 0001).
    """

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

    @property
    def kind(self) -> Trigger:
        """The trigger as a :class:`Trigger` (the codec admits only known and ``x-`` triggers)."""
        return Trigger(self.trigger)

    @property
    def by_operator(self) -> bool:
        """The turn carries trusted operator input (its trigger says so)."""
        return self.trigger in OPERATOR_TRIGGERS


class AnnouncedCall(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True,
                    forbid_unknown_fields=True):
    """A tool call an assistant message made, as the model wrote it. Its result is a ``tool``
    record with the same ``call_id`` (RFC 0008 decision 5)."""

    call_id: str
    name: str
    #: The arguments as the model wrote them (a JSON string, usually).
    arguments: str = ""


class Message(RecordBase, tag="message", kw_only=True, frozen=True):
    turn_id: str | None = None
    role: MessageRole
    text: str
    #: The calls an assistant reply announced, durable with the reply: a runtime restarted
    #: between the reply and the results (or another process) still knows them. Left out when
    #: empty, so a message without calls is the line it always was.
    tool_calls: list[AnnouncedCall] = []

    @property
    def by_operator(self) -> bool:
        return self.role is MessageRole.OPERATOR


class Brief(RecordBase, tag="brief", kw_only=True, frozen=True):
    turn_id: str | None = None
    kind: BriefKind
    text: str
    work_item_id: str | None = None

    @property
    def reports_result(self) -> bool:
        """A result or completion report (a progress note or an acknowledgement is not)."""
        return self.kind in (BriefKind.RESULT, BriefKind.COMPLETION_REPORT)


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

    @property
    def failed(self) -> bool:
        """Anything but success (failure, cancelled, timeout, partial)."""
        return self.status is not TaskStatus.SUCCESS

    @property
    def changes_next_action(self) -> bool:
        """A success that answers a request or a wait: what the agent does next depends on it."""
        return not self.failed and bool(self.spawned_by_turn_id or self.wait_id)


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

    @property
    def failed(self) -> bool:
        """Errored or timed out, or exited non-zero whatever its status says."""
        return self.status in (ToolStatus.ERROR, ToolStatus.TIMEOUT) or self.exit_code not in (
            None, 0)

    @property
    def pending(self) -> bool:
        return self.status is ToolStatus.PENDING

    @property
    def side_effect_unresolved(self) -> bool:
        """The runtime does not know the run's effect on the world, or knows it was partial."""
        return self.side_effect in (SideEffect.UNKNOWN, SideEffect.PARTIAL)

    @property
    def run_key(self) -> tuple[str, str]:
        """What makes two runs the same command: the tool and its arguments (digest, else preview)."""
        return self.tool_name, self.args_digest or self.args_preview


class ExternalEvent(RecordBase, tag="external_event", kw_only=True, frozen=True):
    turn_id: str | None = None
    source: str
    text: str
    wait_id: str | None = None
    work_item_id: str | None = None


class Todo(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True,
           forbid_unknown_fields=True):
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
