"""The helpers a runtime tells a session what happened with, one per kind of event (split from
session.py): turns (``operator_message``, ``task_result``, ``external_event``, ``wake``), model
replies and tool results, and the records that belong to the current turn (environment, work
items, waits, briefs, notes, pins). Each checks its arguments where they are given (errors name the
helper and the argument) and appends one batch through ``holon_ctx.session_base``'s machinery.
``holon_ctx.session`` has the theory of operation.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeAlias

import attrs

from holon_ctx.errors import InputError, quote_value
from holon_ctx.ledger.records import (
    AnnouncedCall,
    Brief,
    BriefKind,
    Environment,
    ExternalEvent,
    Message,
    MessageRole,
    Pin,
    SideEffect,
    TaskResult,
    TaskStatus,
    Tool,
    ToolStatus,
    Wait,
    WaitStatus,
    WorkItem,
    WorkItemStatus,
)
from holon_ctx.ledger.store import CallState
from holon_ctx.ledger.transcript_build import AGENT_STEP, digest
from holon_ctx.session_args import (
    check_flag,
    check_id,
    check_int,
    check_status,
    check_strings,
    check_text,
    check_todos,
    check_trigger,
    check_turn_ref,
)
from holon_ctx.session_base import _Opening, _retrying, _SessionBase

ToolStatusName: TypeAlias = Literal["ok", "error", "timeout", "cancelled", "pending"]
TaskStatusName: TypeAlias = Literal["success", "failure", "cancelled", "timeout", "partial"]
SideEffectName: TypeAlias = Literal["none", "completed", "partial", "unknown"]
WorkItemStatusName: TypeAlias = Literal["open", "active", "waiting", "blocked", "done",
                                        "abandoned"]
WaitEndName: TypeAlias = Literal["resolved", "cancelled", "expired"]
BriefKindName: TypeAlias = Literal["result", "completion_report", "progress", "ack"]

#: Triggers with their own helper (``wake`` refuses them: the helper records what they carry).
_TURN_HELPERS = {"operator_input": "operator_message", "operator_override": "operator_message",
                 "task_result": "task_result", "subagent_result": "task_result",
                 "external_event": "external_event", "approval_decision": "operator_message"}


def _arguments_json(value: object, where: str = "ToolCall") -> str:
    """Tool-call arguments as stored: the model's JSON string, or a mapping as canonical JSON."""
    if isinstance(value, str):
        return check_text(where, "arguments", value)
    if isinstance(value, Mapping):
        # The canonical JSON keeps non-ASCII text as it is, so a lone surrogate in a value or key
        # stays one: checked as any text is, before the call is held.
        try:
            text = json.dumps(dict(value), ensure_ascii=False, sort_keys=True, default=str,
                              allow_nan=False)
        except ValueError as exc:
            # Without allow_nan=False json.dumps writes NaN or Infinity, which is not JSON: a
            # provider refuses the request replaying the call, long after it could be fixed.
            why = ("a float that is NaN or infinite is not JSON" if "compliant" in str(exc)
                   else f"not JSON: {exc}")  # a mapping that holds itself
            raise InputError(why, source=where, path="arguments") from None
        return check_text(where, "arguments", text)
    raise InputError(f"expected a JSON string or a mapping, got {type(value).__name__}",
                     source=where, path="arguments")


@attrs.frozen
class ToolCall:
    """A tool call the model made, checked where it is built."""

    call_id: str
    name: str
    #: As the model wrote them (a JSON string), or a mapping (stored as canonical JSON).
    arguments: str = attrs.field(default="", converter=_arguments_json)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "call_id", check_id("ToolCall", "call_id", self.call_id))
        object.__setattr__(self, "name", check_text("ToolCall", "name", self.name, required=True))


class _SessionEvents(_SessionBase):
    """The event helpers of ``holon_ctx.session.Session``."""

    # -- what happened: turns -------------------------------------------------------------------
    @_retrying
    def operator_message(self, text: str, *, work_item: str | None = None,
                         continues: str | None = None, override: bool = False) -> str:
        """The operator's words (trusted): opens an ``operator_input`` turn, or
        ``operator_override`` with ``override=True``; ``continues`` names the earlier turn it
        refines. Returns the message's ref."""
        w = "operator_message"
        text = check_text(w, "text", text)
        wid = None if work_item is None else check_id(w, "work_item", work_item)
        anchor = None if continues is None else check_turn_ref(w, "continues", continues)
        trigger = "operator_override" if check_flag(w, "override", override) else "operator_input"
        opening = self._open(w, trigger, anchor=anchor, work_item=wid)
        b = opening.batch
        ref = b.add(Message(id=b.new_id("message", "m"), turn_id=opening.turn.id,
                            role=MessageRole.OPERATOR, text=text))
        self._commit(w, opening)
        return ref

    @_retrying
    def task_result(self, task_id: str, status: TaskStatusName, summary: str = "", *,
                    spawned_by: str | None = None, work_item: str | None = None,
                    wait: str | None = None, verification: bool = False) -> str:
        """A background task finished: opens a ``task_result`` turn. ``spawned_by`` is the turn
        that started it, ``wait`` the wait it resolves. Returns the result's ref."""
        w = "task_result"
        task_id = check_id(w, "task_id", task_id)
        state = check_status(w, "status", status, TaskStatus)
        summary = check_text(w, "summary", summary)
        spawner = None if spawned_by is None else check_turn_ref(w, "spawned_by", spawned_by)
        wid = None if work_item is None else check_id(w, "work_item", work_item)
        wait_id = None if wait is None else check_id(w, "wait", wait)
        verified = check_flag(w, "verification", verification)
        opening = self._open(w, "task_result", work_item=wid)
        b = opening.batch
        ref = b.add(TaskResult(id=b.new_id("task_result", "r"), turn_id=opening.turn.id,
                               task_id=task_id, status=state, summary=summary,
                               spawned_by_turn_id=spawner, work_item_id=opening.work_item,
                               wait_id=wait_id, verification=verified))
        self._commit(w, opening)
        return ref

    @_retrying
    def external_event(self, source: str, text: str, *, wait: str | None = None,
                       work_item: str | None = None) -> str:
        """Something outside happened (a webhook, a CI status, a message from another system):
        opens an ``external_event`` turn. Its text is untrusted. Returns the event's ref."""
        w = "external_event"
        source = check_text(w, "source", source, required=True)
        text = check_text(w, "text", text)
        wait_id = None if wait is None else check_id(w, "wait", wait)
        wid = None if work_item is None else check_id(w, "work_item", work_item)
        opening = self._open(w, "external_event", work_item=wid)
        b = opening.batch
        ref = b.add(ExternalEvent(id=b.new_id("external_event", "ev"), turn_id=opening.turn.id,
                                  source=source, text=text, wait_id=wait_id,
                                  work_item_id=opening.work_item))
        self._commit(w, opening)
        return ref

    @_retrying
    def wake(self, trigger: str, *, label: str | None = None, noop: bool = False,
             continues: str | None = None, work_item: str | None = None) -> str:
        """A wake that brings no message: ``timer``, ``scheduler_tick``, ``provider_retry``,
        ``provider_fallback``, ``recovery``, ``restart`` or an ``x-name`` extension. ``noop``
        marks a tick that found nothing to do. Returns the turn's ref."""
        w = "wake"
        trigger = check_trigger(w, "trigger", trigger)
        if trigger in _TURN_HELPERS:
            raise InputError(f"{quote_value(trigger)} turns are opened by {_TURN_HELPERS[trigger]}()",
                             source=w, path="trigger")
        label = None if label is None else check_text(w, "label", label)
        anchor = None if continues is None else check_turn_ref(w, "continues", continues)
        wid = None if work_item is None else check_id(w, "work_item", work_item)
        opening = self._open(w, trigger, anchor=anchor, work_item=wid, label=label,
                             noop=check_flag(w, "noop", noop))
        self._commit(w, opening)
        return f"turn:{opening.turn.id}"

    # -- what happened: the model and its tools ---------------------------------------------------
    @_retrying
    def assistant_message(self, text: str = "", *, tool_calls: Sequence[ToolCall] = ()) -> str:
        """One model reply (model output, never trusted) with the tool calls it made; each call
        waits for :meth:`tool_result`. The first reply of a turn belongs to it, a further one
        opens an ``x-agent-step`` turn. Returns the message's ref."""
        w = "assistant_message"
        text = check_text(w, "text", text)
        if isinstance(tool_calls, str) or not isinstance(tool_calls, Sequence):
            raise InputError(f"expected a list of ToolCall, got {type(tool_calls).__name__}",
                             source=w, path="tool_calls")
        calls = list(tool_calls)
        seen: set[str] = set()
        for i, call in enumerate(calls):
            if not isinstance(call, ToolCall):
                raise InputError(f"expected a ToolCall, got {type(call).__name__}", source=w,
                                 path=f"tool_calls[{i}]")
            if call.call_id in seen or call.call_id in self._pending:
                raise InputError(f"duplicate call id {quote_value(call.call_id)}", source=w,
                                 path=f"tool_calls[{i}].call_id")
            seen.add(call.call_id)
        end = self._catch_up(w)
        turn = self._turn
        if turn is None or turn.has_reply:
            anchor = None if turn is None else (
                turn.anchor if turn.trigger == AGENT_STEP and turn.anchor else turn.id)
            opening: _Opening | None = self._open(w, AGENT_STEP, anchor=anchor, end=end)
            assert opening is not None
            batch, tid = opening.batch, opening.turn.id
        else:
            opening, batch, tid = None, self._batch(w, end), turn.id
        # The calls go into the reply's own record: durable in the same append (no write more
        # per step), so a restarted runtime or another Session finds them (RFC 0008 decision 5).
        message = Message(id=batch.new_id("message", "m"), turn_id=tid,
                          role=MessageRole.ASSISTANT, text=text,
                          tool_calls=[AnnouncedCall(call_id=c.call_id, name=c.name,
                                                    arguments=c.arguments) for c in calls])
        ref = batch.add(message)
        if opening is not None:
            self._commit(w, opening)
        else:
            self._append(w, batch)
        assert self._turn is not None
        self._turn.has_reply = True
        self._follow_calls(message)
        return ref

    @_retrying
    def tool_result(self, call_id: str, output: str = "", *, status: ToolStatusName = "ok",
                    exit_code: int | None = None, side_effect: SideEffectName | None = None,
                    files_written: Sequence[str] = (), output_ref: str | None = None) -> str:
        """The result of a call announced by :meth:`assistant_message`: one ``tool`` record
        (call and result together, output untrusted) in the call's turn. ``side_effect`` says
        what it did outside: ``unknown`` or ``partial`` is named in every next request's
        current state until a later run of the same call reports ``none`` or ``completed``, and
        compaction hands it to the continuity envelope, which blocks on it. ``output_ref`` says
        where the full output lives (a path, URL or blob id) when ``output`` is an excerpt: a
        ledger line holds at most ``MAX_LINE_BYTES`` (4 MiB), and a bigger record is refused."""
        w = "tool_result"
        call_id = check_id(w, "call_id", call_id)
        # Made again after another writer appended first (_retrying), the ledger is read before
        # the call is looked up: two Sessions recording one result at once both find it
        # waiting, one append lands, and the other, reading the ledger again, finds it answered.
        self._catch_up(w)
        call = self._pending.get(call_id) or self._late.get(call_id)
        if call is None:
            raise self._not_waiting(w, call_id)
        ref = self._tool(w, call.turn_id, call.name, call.arguments, output, status=status,
                         exit_code=exit_code, side_effect=side_effect,
                         files_written=files_written, call_id=call_id, output_ref=output_ref)
        self._pending.pop(call_id, None)
        self._late.pop(call_id, None)
        return ref

    def _not_waiting(self, w: str, call_id: str) -> InputError:
        """Why ``call_id`` takes no result: it has one, or no reply announced it. A Session
        knows every waiting call however old (RFC 0008 decision 5), so the store's record of
        the call says which (read only here, on the error's path)."""
        found = self.store.call_record(call_id)
        if found is not None and found.state is CallState.ANSWERED:
            return InputError(f"call {quote_value(call_id)} has its result already "
                              f"({found.stored.ref}): a call takes one result (record another "
                              "run of the tool with tool_run(name, arguments, output))",
                              source=w, path="call_id")
        return InputError(f"no tool call {quote_value(call_id)} is waiting for a result: no reply "
                          "announced it (announce calls with assistant_message(tool_calls=...); "
                          "record a call made otherwise with tool_run(name, arguments, output))",
                          source=w, path="call_id")

    @_retrying
    def tool_run(self, tool_name: str, arguments: str | Mapping[str, Any], output: str = "", *,
                 status: ToolStatusName = "ok", exit_code: int | None = None,
                 side_effect: SideEffectName | None = None,
                 files_written: Sequence[str] = (), output_ref: str | None = None) -> str:
        """A tool the runtime ran itself in the current turn (no provider call id), with its
        result: ``tool_run("bash", "pytest -q", output, exit_code=1, status="error")``. The
        arguments are a string or, as for :class:`ToolCall`, a mapping (stored as canonical
        JSON); ``output_ref`` as for :meth:`tool_result`."""
        w = "tool_run"
        name = check_text(w, "tool_name", tool_name, required=True)
        args = _arguments_json(arguments, w)
        return self._tool(w, self._require_turn(w), name, args, output, status=status,
                          exit_code=exit_code, side_effect=side_effect,
                          files_written=files_written, call_id=None, output_ref=output_ref)

    def _tool(self, w: str, turn_id: str, name: str, arguments: str, output: Any, *,
              status: Any, exit_code: Any, side_effect: Any, files_written: Any,
              call_id: str | None, output_ref: Any) -> str:
        text = check_text(w, "output", output)
        where_full = (None if output_ref is None
                      else check_text(w, "output_ref", output_ref, required=True))
        state = check_status(w, "status", status, ToolStatus)
        code = check_int(w, "exit_code", exit_code)
        effect = None if side_effect is None else check_status(w, "side_effect", side_effect,
                                                               SideEffect)
        files = check_strings(w, "files_written", files_written)
        self._check_open(w)
        return self._in_current_turn(w, lambda _turn, b: Tool(
            id=b.new_id("tool", "x"), turn_id=turn_id, tool_name=name,
            args_digest=digest(arguments), args_preview=arguments, status=state, exit_code=code,
            output=text, output_ref=where_full, call_id=call_id, side_effect=effect,
            files_written=files))

    # -- what happened: state, notes, pins ------------------------------------------------------
    @_retrying
    def set_environment(self, *, guidance: str = "", workspace: str = "",
                        capabilities: Sequence[str] = ()) -> str:
        """The runtime's configuration, the stable start of every prompt: system prompt
        (``guidance``), ``workspace``, ``capabilities``. Returns the record's ref."""
        w = "set_environment"
        guidance = check_text(w, "guidance", guidance)
        workspace = check_text(w, "workspace", workspace)
        caps = check_strings(w, "capabilities", capabilities)
        return self._in_current_turn(w, lambda turn, b: Environment(
            id=b.new_id("environment", "e"), turn_id=turn, guidance=guidance,
            workspace=workspace, capabilities=caps))

    @_retrying
    def set_work_item(self, work_item_id: str, *, objective: str | None = None,
                      plan: Sequence[str] | None = None,
                      todos: Sequence[str] | Mapping[str, bool] | None = None,
                      status: WorkItemStatusName | None = None, blocker: str | None = None,
                      completion_report: str | None = None) -> str:
        """A work-item transition (fields left out keep their value). The item becomes the one
        new turns act for, until it is done or abandoned. Returns the record's ref."""
        w = "set_work_item"
        wid = check_id(w, "work_item_id", work_item_id)
        state = None if status is None else check_status(w, "status", status, WorkItemStatus)
        record_fields: dict[str, Any] = {
            "objective": None if objective is None else check_text(w, "objective", objective),
            "plan": None if plan is None else check_strings(w, "plan", plan),
            "todos": None if todos is None else check_todos(w, "todos", todos),
            "status": state,
            "blocker": None if blocker is None else check_text(w, "blocker", blocker),
            "completion_report": None if completion_report is None else check_text(
                w, "completion_report", completion_report),
        }
        ref = self._in_current_turn(w, lambda turn, b: WorkItem(
            id=b.new_id("work_item", "w"), work_item_id=wid, turn_id=turn, **record_fields))
        if state in (WorkItemStatus.DONE, WorkItemStatus.ABANDONED):
            if self._work_item == wid:
                self._work_item = None
        else:
            self._work_item = wid
        return ref

    @_retrying
    def open_wait(self, wait_id: str, condition: str, *, work_item: str | None = None) -> str:
        """The agent now waits for something (CI, an approval, a reply). Returns the ref."""
        w = "open_wait"
        wid = check_id(w, "wait_id", wait_id)
        cond = check_text(w, "condition", condition, required=True)
        owner = self._work_item if work_item is None else check_id(w, "work_item", work_item)
        return self._in_current_turn(w, lambda turn, b: Wait(
            id=b.new_id("wait", "wt"), wait_id=wid, status=WaitStatus.OPEN, turn_id=turn,
            work_item_id=owner, condition=cond))

    @_retrying
    def close_wait(self, wait_id: str, *, status: WaitEndName = "resolved",
                   resolved_by: str | None = None) -> str:
        """A wait ends: ``resolved`` (by the record ``resolved_by``), ``cancelled`` or
        ``expired``. Returns the ref of the transition."""
        w = "close_wait"
        wid = check_id(w, "wait_id", wait_id)
        state = check_status(w, "status", status, WaitStatus)
        if state is WaitStatus.OPEN:
            raise InputError("expected resolved, cancelled or expired (open a wait with "
                             "open_wait)", source=w, path="status")
        by = None if resolved_by is None else check_id(w, "resolved_by", resolved_by)
        # A wait never opened is refused by the append path (WaitNotOpenedError), worded there
        # against this helper's wait_id (Session._append).
        return self._in_current_turn(w, lambda turn, b: Wait(
            id=b.new_id("wait", "wt"), wait_id=wid, status=state, turn_id=turn,
            resolved_by=by))

    @_retrying
    def brief(self, text: str, *, kind: BriefKindName = "result") -> str:
        """A short statement by the agent in the current turn: a ``result`` brief, a
        ``completion_report``, ``progress`` or an ``ack``. Returns the ref."""
        w = "brief"
        text = check_text(w, "text", text, required=True)
        brief_kind = check_status(w, "kind", kind, BriefKind)
        turn = self._require_turn(w)
        # No work_item_id of its own: the brief acts for its turn's work item.
        return self._in_current_turn(w, lambda _turn, b: Brief(
            id=b.new_id("brief", "b"), turn_id=turn, kind=brief_kind, text=text))

    @_retrying
    def runtime_note(self, text: str) -> str:
        """Text the runtime itself puts in the conversation (a notice, a format error): a
        runtime fact, neither the operator's words nor the model's. Returns the ref."""
        w = "runtime_note"
        text = check_text(w, "text", text, required=True)
        turn = self._require_turn(w)
        return self._in_current_turn(w, lambda _turn, b: Message(
            id=b.new_id("message", "n"), turn_id=turn, role=MessageRole.SYSTEM, text=text))

    @_retrying
    def pin(self, target: str, note: str = "") -> str:
        """The operator wants ``target`` (a ref such as ``message:m12``) kept in view in every
        prompt. Returns the pin's ref."""
        w = "pin"
        target = check_id(w, "target", target)
        note = check_text(w, "note", note)
        if self.store.get(target) is None:
            raise InputError(f"{quote_value(target)} is not in the ledger (give a ref such as "
                             "'message:m12')", source=w, path="target")
        return self._in_current_turn(w, lambda turn, b: Pin(
            id=b.new_id("pin", "p"), turn_id=turn, target=target, note=note))
