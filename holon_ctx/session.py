"""The library API: a session over one ledger — append what happened, ask for the next request.

Theory of operation. A runtime opens one :class:`Session` per ledger (:func:`open_session`), tells
it what happens with typed helpers, and asks for a :class:`~holon_ctx.request.Request` before each
model call. The helpers allocate ids and turn sequence numbers, check their arguments where they
are given (errors name the helper and the argument), and append one batch per call.

Turns. A turn is one activation of the agent. ``operator_message``, ``task_result``,
``external_event`` and ``wake`` each open a turn with the matching trigger. An
``assistant_message`` is one model reply: the first reply of a turn belongs to it, and every
further reply (the model called again after tool results) opens an ``x-agent-step`` turn anchored
to the turn that began the exchange — the importers' convention (docs/import.md), so a session and
an imported transcript read the same. Other records (tool results, briefs, notes, work-item and
wait transitions, pins) belong to the current turn.

Tool calls. The ledger keeps a call and its result in one ``tool`` record. A call announced with
``assistant_message(tool_calls=…)`` waits in the session until ``tool_result(call_id, …)`` writes
that record in the call's turn. A call still waiting when a new turn opens (or the session closes)
is written with status ``pending``; a result that comes later still lands, as a second record of
the same call. Reopening a ledger picks the pending calls of its latest turn back up.

Other writers. A session keeps the current turn, the work item and the waiting calls in memory and
names records by position. Before each append it checks the ledger's end: when another writer
(a CLI import, another process) appended meanwhile, it first continues from the ledger as it is
now. The append itself is refused unless the ledger still ends where the batch's ids were minted
(checked inside the store's write transaction); a helper that lost that race builds its batch
again from the ledger as it is then (:func:`_retrying`), so several sessions appending to one
ledger never mint one id twice.

This module is longer than the usual ~400 lines because it is the library's whole public surface
in one class, one helper per kind of event with its own argument checks; split up, the one page a
runtime author reads would be scattered over several.
"""

from __future__ import annotations

import functools
import json
import math
import os
import warnings
import weakref
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from types import TracebackType
from typing import Any, Concatenate, Literal, ParamSpec, TypeAlias, TypeVar

import attrs

from holon_ctx.calibration import Calibration
from holon_ctx.compaction import CompactionResult, SessionConfig
from holon_ctx.continuity import ContinuityStore
from holon_ctx.errors import BudgetTooSmallError, InputError, LedgerFormatError, quote_value
from holon_ctx.ledger.epochs_sqlite import epoch_store_for
from holon_ctx.ledger.records import (
    Brief,
    BriefKind,
    Environment,
    ExternalEvent,
    Message,
    MessageRole,
    Outcome,
    Pin,
    Record,
    SideEffect,
    TaskResult,
    TaskStatus,
    Tool,
    ToolStatus,
    Turn,
    Wait,
    WaitStatus,
    WorkItem,
    WorkItemStatus,
    record_ref,
)
from holon_ctx.ledger.sqlite import SqliteStore, missing_directory
from holon_ctx.ledger.store import LedgerStore
from holon_ctx.ledger.transcript_build import AGENT_STEP, LedgerBuilder, digest
from holon_ctx.ledger.transcript_chat import read_anthropic, read_openai
from holon_ctx.ledger.transcript_swe import read_swe_traj
from holon_ctx.ledger.transcripts import import_any, not_a_database
from holon_ctx.ledger.usage import Observation
from holon_ctx.ledger.usage_sqlite import usage_store_for
from holon_ctx.ledger.writer import LedgerMovedError
from holon_ctx.memory import EpisodeStore
from holon_ctx.models import ModelProfile, UnknownModelWarning, model_profile
from holon_ctx.postgres import PostgresStore, is_postgres_url
from holon_ctx.projection.providers import MAX_MESSAGES
from holon_ctx.projection.session import Layout, SessionProjector, SessionRequest
from holon_ctx.request import Request
from holon_ctx.session_args import (
    check_flag,
    check_id,
    check_int,
    check_positive,
    check_status,
    check_strings,
    check_text,
    check_todos,
    check_trigger,
    check_turn_ref,
)
from holon_ctx.session_upkeep import CompactionPolicy, open_upkeep
from holon_ctx.tokens import counter_for_encoding, store_counter

__all__ = ["Session", "ToolCall", "open_session"]

ToolStatusName: TypeAlias = Literal["ok", "error", "timeout", "cancelled", "pending"]
TaskStatusName: TypeAlias = Literal["success", "failure", "cancelled", "timeout", "partial"]
SideEffectName: TypeAlias = Literal["none", "completed", "partial", "unknown"]
WorkItemStatusName: TypeAlias = Literal["open", "active", "waiting", "blocked", "done",
                                        "abandoned"]
WaitEndName: TypeAlias = Literal["resolved", "cancelled", "expired"]
BriefKindName: TypeAlias = Literal["result", "completion_report", "progress", "ack"]
HistoryFormat: TypeAlias = Literal["auto", "ledger", "openai", "anthropic", "swe-traj"]


class _HistoryFormat(StrEnum):
    AUTO = "auto"
    LEDGER = "ledger"
    OPENAI = "openai"
    ANTHROPIC = "anthropic"
    SWE_TRAJ = "swe-traj"

#: The argument each ledger field is given by, for errors the append path finds (ledger-wide
#: rules: a wait never opened, a pin target that does not exist, an unknown spawning turn).
_FIELD_ARG = {"$.wait_id": "wait", "$.spawned_by_turn_id": "spawned_by", "$.target": "target",
              "$.resolved_by": "resolved_by", "$.anchor_turn_id": "continues",
              "$.work_item_id": "work_item", "$.status": "status"}
_DEFAULT_POLICY = CompactionPolicy()


def _arguments_json(value: object) -> str:
    """Tool-call arguments as stored: the model's JSON string, or a mapping as canonical JSON."""
    if isinstance(value, str):
        return check_text("ToolCall", "arguments", value)
    if isinstance(value, Mapping):
        return json.dumps(dict(value), ensure_ascii=False, sort_keys=True, default=str)
    raise InputError(f"expected a JSON string or a mapping, got {type(value).__name__}",
                     source="ToolCall", path="arguments")


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


@attrs.define
class _Call:
    """A call waiting for its result: the turn that made it, the tool and its arguments."""

    turn_id: str
    name: str
    arguments: str


@attrs.define
class _TurnState:
    id: str
    seq: int
    trigger: str
    anchor: str | None
    #: True once the turn holds a model reply: the next reply opens an agent-step turn.
    has_reply: bool = False


class _Moved(Exception):
    """Another writer appended between a helper's read of the ledger's end and its append."""


class _Taken(Exception):
    """A minted id is already in the ledger (an imported record named like ``m57``)."""


#: Times a helper builds its batch again when other writers keep appending first.
_MOVED_TRIES = 64
_P = ParamSpec("_P")
_T = TypeVar("_T")


def _retrying(helper: Callable[Concatenate[Session, _P], _T]
              ) -> Callable[Concatenate[Session, _P], _T]:
    """Run an appending helper again, from the ledger as it is now, when another writer
    appended first: its ids name ledger positions, so two writers never store one id for two
    records (a store that takes a record given again as already held would lose one)."""
    @functools.wraps(helper)
    def run(self: Session, /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        for _ in range(_MOVED_TRIES):
            trusted = self._end_known
            try:
                return helper(self, *args, **kwargs)
            except _Moved:
                self._end_known = False  # the next try catches up with the ledger first
            except _Taken:
                # Ids are minted unchecked (a read each, a round trip on a server) until one is
                # taken; from then on this session checks each id it mints.
                self._check_ids, self._end_known = True, False
            except InputError:
                # Decided against the state this session left, the end unread: another writer
                # may have appended what the call refers to. Only then is the end read, and the
                # call made again from the ledger as it is.
                if not trusted or self._closed or self.store.end_pos() == self._end:
                    raise
                self._load_state()
        raise InputError(f"other writers appended before each of {_MOVED_TRIES} tries",
                         source=helper.__name__)
    return run


class _Batch:
    """Records of one helper call, with ids allocated by ledger position (``m57``)."""

    def __init__(self, store: LedgerStore, pos: int, checked: bool) -> None:
        self.store = store
        self.pos = pos
        #: Look each minted id up in the ledger (else the append refuses a taken one: _Taken).
        self.checked = checked
        self.records: list[Record] = []
        self._refs: set[str] = set()

    def new_id(self, kind: str, letter: str) -> str:
        base = f"{letter}{self.pos + len(self.records)}"
        rid, n = base, 1
        # An imported ledger may already use the id (importers name records after their source).
        while f"{kind}:{rid}" in self._refs or (
                self.checked and self.store.get(f"{kind}:{rid}") is not None):
            n += 1
            rid = f"{base}.{n}"
        self._refs.add(f"{kind}:{rid}")
        return rid

    def add(self, record: Record) -> str:
        self.records.append(record)
        return record_ref(record)


@attrs.define
class _Opening:
    """A turn being opened: its batch, the state it will leave, the work item it acts for."""

    batch: _Batch
    turn: _TurnState
    work_item: str | None


class Session:
    """One ledger, the stores beside it and a long-lived projector (module docstring)."""

    def __init__(self, store: LedgerStore, *,
                 compaction: CompactionPolicy | None = _DEFAULT_POLICY,
                 episodes: EpisodeStore | None = None,
                 continuity: ContinuityStore | None = None,
                 identity: SessionConfig | None = None,
                 clock: Callable[[], datetime] | None = None,
                 owns_store: bool = False, model: str | None = None) -> None:
        if not isinstance(store, LedgerStore):
            raise InputError(f"expected a LedgerStore, got {type(store).__name__}",
                             source="Session", path="store")
        if compaction is not None and not isinstance(compaction, CompactionPolicy):
            raise InputError(f"expected a CompactionPolicy or None, got "
                             f"{type(compaction).__name__}", source="Session", path="compaction")
        self.store = store
        self.compaction = compaction
        self._owns_store = owns_store
        self._upkeep = open_upkeep(store, policy=compaction, episodes=episodes,
                                   continuity=continuity, identity=identity, clock=clock)
        self._epochs = epoch_store_for(store)
        self._usage = usage_store_for(store)
        self._projectors: dict[Layout, SessionProjector] = {}
        #: The last request handed out (what observe_usage compares with by default).
        self._last_request: Request | None = None
        #: Requests handed out whose text view was not made yet: made when the session closes,
        #: so a request stays whole after it (the text needs the session's stores).
        self._unread: weakref.WeakSet[Request] = weakref.WeakSet()
        self._use_model("Session", model)
        self._pending: dict[str, _Call] = {}
        self._late: dict[str, _Call] = {}
        self._turns_since_compaction = 0
        #: The last request's budget bound (see next_request).
        self._binds = False
        self._closed = False
        self._turn: _TurnState | None = None
        self._work_item: str | None = None
        #: The ledger's end after this session's last append (or load), and whether a helper
        #: may append there without reading it (see _catch_up).
        self._end = 0
        self._end_known = False
        #: Mint ids checked against the ledger (after one was found taken: _Taken).
        self._check_ids = False
        self._load_state()

    def _use_model(self, where: str, model: str | None) -> None:
        """Count, frame and calibrate requests as ``model``'s provider does (RFC 0022)."""
        profile = model_profile(model, where=where)
        # No model named: the store's own counter (its cached counts), OpenAI's framing.
        counter = (store_counter(self.store) if model is None
                   else counter_for_encoding(profile.encoding))
        if counter.identity != self.store.counter_identity:
            switch = getattr(self.store, "use_counter", None)
            if not callable(switch):
                raise InputError(f"model {quote_value(profile.model)} counts with {counter.identity}, and "
                                 f"this store counts with {self.store.counter_identity} and "
                                 "cannot switch: open the store with that counter",
                                 source=where, path="model")
            switch(counter)
        self.profile: ModelProfile = profile
        self.calibration = Calibration(self._usage, profile.calibration_key, profile.prior_factor)
        # Long-lived on purpose: a session projection keeps its walk in memory and renders each
        # record once (RFC 0010); the re-plans it persists let a new process continue. One per
        # layout: the provider messages, and the one-text prompt made when asked for.
        self._projectors = {layout: SessionProjector(
            self.store, counter, layout=layout, episodes=self._upkeep.recall_source(),
            control=self._upkeep.control_source(), epochs=self._epochs,
            framing=profile.framing)
            for layout in (Layout.MESSAGES, Layout.TEXT)}

    def use_model(self, model: str) -> None:
        """Count, frame and calibrate the next requests as ``model``'s provider does (the
        integrations call it with the framework's model setting). A model with another encoding
        re-counts the ledger's records under it, once each (RFC 0022)."""
        w = "use_model"
        self._check_open(w)
        name = check_text(w, "model", model, required=True)
        if name != self.profile.model:
            self._use_model(w, name)

    @property
    def model(self) -> str | None:
        """The model requests are counted for (None: none named, the default counting)."""
        return self.profile.model or None

    def _load_state(self) -> None:
        """Current turn, work item and pending calls, as the ledger left them."""
        end = self._end = self.store.end_pos()
        self._end_known = True
        latest = self.store.latest_turn(end)
        if latest is None:
            return
        turn = latest.record
        assert isinstance(turn, Turn)
        owned = [r.record for r in self.store.records_of_turns(turn.seq, turn.seq, end)]
        replied = any((isinstance(r, Message) and r.role is MessageRole.ASSISTANT)
                      or (isinstance(r, Tool) and r.call_id is not None) for r in owned)
        self._turn = _TurnState(turn.id, turn.seq, turn.trigger, turn.anchor_turn_id, replied)
        self._work_item = turn.work_item_id
        for tool in owned:
            if isinstance(tool, Tool) and tool.call_id is not None:
                if tool.status is ToolStatus.PENDING:
                    self._late[tool.call_id] = _Call(turn.id, tool.tool_name, tool.args_preview)
                else:
                    self._late.pop(tool.call_id, None)

    @property
    def current_turn(self) -> str | None:
        """The ref of the newest turn (``turn:t12``), or None before the first one."""
        return None if self._turn is None else f"turn:{self._turn.id}"

    @property
    def work_item(self) -> str | None:
        """The work item new turns act for (set by ``set_work_item`` or a turn's ``work_item``)."""
        return self._work_item

    # -- the append machinery -----------------------------------------------------------------
    def _check_open(self, where: str) -> None:
        if self._closed:
            raise InputError("the session is closed", source=where)

    def _catch_up(self, where: str, *, read: bool = False) -> int:
        """The ledger's end. When another writer appended since this session's last append (a
        CLI import, another process), the session first continues from the ledger as it is now:
        its newest turn, work item and waiting calls.

        An appending helper takes the end its session's own last append left (``read`` False)
        without reading it: the append is refused if the end moved (``expect_end``), and the
        helper is made again after reading it (_retrying). A request reads it."""
        self._check_open(where)
        if self._end_known and not read:
            return self._end
        end = self.store.end_pos()
        if end != self._end:
            self._load_state()
        self._end_known = True
        return end

    def _batch(self, where: str, end: int | None = None) -> _Batch:
        """A batch from the ledger's ``end`` (read now unless the helper just read it: one
        read of the end per helper call, a round trip on a server)."""
        return _Batch(self.store, self._catch_up(where) if end is None else end, self._check_ids)

    def _append(self, where: str, batch: _Batch) -> None:
        try:
            # Only where the ids were minted (they name positions): another writer that
            # appended first makes the helper build its batch again (_retrying).
            self.store.append(batch.records, source=where, expect_end=batch.pos)
        except LedgerMovedError:
            raise _Moved from None
        except LedgerFormatError as exc:
            if not batch.checked and exc.path == "$.id" and exc.message.startswith("duplicate id"):
                raise _Taken from None
            # A ledger-wide rule failed (a wait never opened, an unknown pin target or turn):
            # report it against the helper's own argument.
            raise InputError(exc.message, source=where,
                             path=_FIELD_ARG.get(exc.path or "", exc.path)) from None
        # Ids and turns are explicit, so the batch is stored exactly as built.
        self._end = batch.pos + len(batch.records)
        self._end_known = True

    def _open(self, where: str, trigger: str, *, anchor: str | None = None,
              work_item: str | None = None, label: str | None = None,
              noop: bool = False, end: int | None = None) -> _Opening:
        """Start a batch that closes the current turn and opens a new one."""
        batch = self._batch(where, end)
        for call_id, call in self._pending.items():
            # A call left without a result when its turn closes (docs/import.md does the same).
            batch.add(Tool(id=batch.new_id("tool", "x"), turn_id=call.turn_id,
                           tool_name=call.name, args_digest=digest(call.arguments),
                           args_preview=call.arguments, status=ToolStatus.PENDING,
                           call_id=call_id))
        wid = work_item if work_item is not None else self._work_item
        tid = batch.new_id("turn", "t")
        seq = 0 if self._turn is None else self._turn.seq + 1
        batch.add(Turn(id=tid, seq=seq, trigger=trigger, anchor_turn_id=anchor,
                       work_item_id=wid, label=label, outcome=Outcome.NOOP if noop else None))
        return _Opening(batch, _TurnState(tid, seq, trigger, anchor), wid)

    def _commit(self, where: str, opening: _Opening) -> None:
        """Append an opening's batch; only then does the session move to the new turn."""
        self._append(where, opening.batch)
        self._turn = opening.turn
        self._work_item = opening.work_item
        self._late.update(self._pending)
        self._pending.clear()
        self._turns_since_compaction += 1

    def _in_current_turn(self, where: str, make: Callable[[str | None, _Batch], Record]) -> str:
        """Append one record owned by the current turn (if there is one)."""
        batch = self._batch(where)
        ref = batch.add(make(self._turn.id if self._turn else None, batch))
        self._append(where, batch)
        return ref

    def _require_turn(self, where: str) -> str:
        if self._turn is None:
            raise InputError("no turn yet: open one first (operator_message, task_result, "
                             "external_event or wake)", source=where)
        return self._turn.id

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
        ref = batch.add(Message(id=batch.new_id("message", "m"), turn_id=tid,
                                role=MessageRole.ASSISTANT, text=text))
        if opening is not None:
            self._commit(w, opening)
        else:
            self._append(w, batch)
        assert self._turn is not None
        self._turn.has_reply = True
        for call in calls:
            self._late.pop(call.call_id, None)
            self._pending[call.call_id] = _Call(tid, call.name, call.arguments)
        return ref

    @_retrying
    def tool_result(self, call_id: str, output: str = "", *, status: ToolStatusName = "ok",
                    exit_code: int | None = None, side_effect: SideEffectName | None = None,
                    files_written: Sequence[str] = ()) -> str:
        """The result of a call announced by :meth:`assistant_message`: one ``tool`` record
        (call and result together, output untrusted) in the call's turn. ``side_effect`` says
        what it did outside: ``unknown`` or ``partial`` is named in every next request's
        current state until a later run of the same call reports ``none`` or ``completed``, and
        compaction hands it to the continuity envelope, which blocks on it."""
        w = "tool_result"
        call_id = check_id(w, "call_id", call_id)
        call = self._pending.get(call_id) or self._late.get(call_id)
        if call is None:
            raise InputError(f"no tool call {quote_value(call_id)} is waiting for a result (announce calls "
                             "with assistant_message(tool_calls=...))", source=w, path="call_id")
        ref = self._tool(w, call.turn_id, call.name, call.arguments, output, status=status,
                         exit_code=exit_code, side_effect=side_effect,
                         files_written=files_written, call_id=call_id)
        self._pending.pop(call_id, None)
        self._late.pop(call_id, None)
        return ref

    @_retrying
    def tool_run(self, tool_name: str, arguments: str, output: str = "", *,
                 status: ToolStatusName = "ok", exit_code: int | None = None,
                 side_effect: SideEffectName | None = None,
                 files_written: Sequence[str] = ()) -> str:
        """A tool the runtime ran itself in the current turn (no provider call id), with its
        result: ``tool_run("bash", "pytest -q", output, exit_code=1, status="error")``."""
        w = "tool_run"
        name = check_text(w, "tool_name", tool_name, required=True)
        args = check_text(w, "arguments", arguments)
        return self._tool(w, self._require_turn(w), name, args, output, status=status,
                          exit_code=exit_code, side_effect=side_effect,
                          files_written=files_written, call_id=None)

    def _tool(self, w: str, turn_id: str, name: str, arguments: str, output: Any, *,
              status: Any, exit_code: Any, side_effect: Any, files_written: Any,
              call_id: str | None) -> str:
        text = check_text(w, "output", output)
        state = check_status(w, "status", status, ToolStatus)
        code = check_int(w, "exit_code", exit_code)
        effect = None if side_effect is None else check_status(w, "side_effect", side_effect,
                                                               SideEffect)
        files = check_strings(w, "files_written", files_written)
        self._check_open(w)
        return self._in_current_turn(w, lambda _turn, b: Tool(
            id=b.new_id("tool", "x"), turn_id=turn_id, tool_name=name,
            args_digest=digest(arguments), args_preview=arguments, status=state, exit_code=code,
            output=text, call_id=call_id, side_effect=effect, files_written=files))

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
        return self._in_current_turn(w, lambda turn, b: Wait(
            id=b.new_id("wait", "wt"), wait_id=wid, status=state, turn_id=turn, resolved_by=by))

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

    # -- an existing history ---------------------------------------------------------------------
    def import_history(self, history: str | os.PathLike[str] | Sequence[Any] | Mapping[str, Any],
                       *, format: HistoryFormat = "auto",
                       id_prefix: str | None = None) -> int:
        """Bring an existing history in, all or nothing: a file (ledger JSONL, an OpenAI or
        Anthropic transcript, a mini-swe-agent trajectory) or an in-memory OpenAI message list
        or Anthropic request (docs/import.md has the mapping). The session continues from its
        last turn. Ids get ``id_prefix`` (default: none on an empty ledger, else ``i<pos>.``).
        Under the session's compaction policy, the history is then archived in bulk, so no
        later request stalls archiving it (RFC 0026). Returns the number of records stored."""
        w = "import_history"
        self._check_open(w)
        fmt = check_status(w, "format", format, _HistoryFormat)
        end = self.store.end_pos()
        prefix = (("" if end == 0 else f"i{end}.") if id_prefix is None
                  else check_id(w, "id_prefix", id_prefix))
        if isinstance(history, str | os.PathLike):
            _, stored = import_any(Path(history), self.store, fmt.value, id_prefix=prefix)
        else:
            stored = self.store.append(self._read_history(w, history, fmt, prefix), source=w,
                                       renumber_turns=True)
        self._pending.clear()
        self._late.clear()
        self._load_state()
        if self.compaction is not None and stored:
            # Archived now, in bulk, while the caller expects the import to take its time: left
            # to the schedule, the first request after a long import archived all of it (68 s
            # at 100k messages, RFC 0026). The records are stored either way: a failure here is
            # a compaction's, and the next compaction tries again.
            self.compact()
        return stored

    def _read_history(self, w: str, history: Any, fmt: _HistoryFormat,
                      prefix: str) -> list[Record]:
        if fmt in (_HistoryFormat.AUTO, _HistoryFormat.OPENAI) and isinstance(history, Sequence):
            reader = read_openai
        elif fmt in (_HistoryFormat.AUTO, _HistoryFormat.ANTHROPIC) and isinstance(history,
                                                                                     Mapping):
            reader = read_anthropic
        elif fmt is _HistoryFormat.SWE_TRAJ and isinstance(history, Mapping):
            reader = read_swe_traj
        else:
            raise InputError(f"cannot read a {type(history).__name__} as {fmt.value} (give a "
                             "path, an OpenAI message list or an Anthropic request)", source=w,
                             path="history")
        # Turns are numbered by the store as the batch is written (renumber_turns).
        return reader(history, LedgerBuilder(source=w, prefix=prefix))

    # -- asking ----------------------------------------------------------------------------------
    def next_request(self, budget_tokens: int, *, at: str | None = None) -> Request:
        """The next model call's input under ``budget_tokens`` (the whole request, message
        framing included). Compacts first when the policy says it is time. ``at`` asks as of an
        earlier turn."""
        w = "next_request"
        budget = check_positive(w, "budget_tokens", budget_tokens)
        turn_id = None if at is None else check_turn_ref(w, "at", at)
        end = self._catch_up(w, read=True)
        if self._turn is None:
            raise InputError("the ledger holds no turn yet: append what happened first "
                             "(operator_message, task_result, external_event or wake)", source=w)
        # Planned under budget / factor: the provider's count of the request, as far as its
        # reported usage teaches, stays within the budget (holon_ctx.calibration).
        factor = self.calibration.factor()
        planned = self.calibration.planned_budget(budget, factor)
        framing = self._projectors[Layout.MESSAGES].framing.stateless(MAX_MESSAGES)
        if planned <= framing:
            raise BudgetTooSmallError(math.ceil((framing + 1) * factor), budget,
                                      "the request's message framing")
        policy = self.compaction
        # Every `every_turns` turns, and every `binding_turns` while the budget binds: a prompt
        # that leaves turns out has them compete as episodes soon after they age out, in a
        # conversation of a few dozen turns too (RFC 0013), and each compaction archives a
        # batch of them, not one turn per request (RFC 0024).
        if policy is not None and (self._turns_since_compaction >= policy.every_turns or (
                self._binds and self._turns_since_compaction >= policy.binding_turns)):
            self.compact()
        messages = self._projectors[Layout.MESSAGES].request(
            budget_tokens=planned, at=turn_id, ledger_end=end)
        self._binds = messages.binds
        request = Request(budget_tokens=budget, messages=messages,
                          make_text=self._text_view(planned, messages.limit_pos),
                          planned_tokens=planned, safety_factor=factor,
                          model=self.profile.model, framing=self.profile.framing.name,
                          counter=self._projectors[Layout.MESSAGES].counter.identity,
                          calibration_key=self.profile.calibration_key)
        self._last_request = request
        self._unread.add(request)
        return request

    def _text_view(self, planned: int, limit_pos: int) -> Callable[[], SessionRequest]:
        """The text layout of a request, made when it is first read (one walk per request for a
        runtime that sends messages; RFC 0024), as of the messages' ledger position: the same
        records whatever was appended since. A request still unread when the session closes has
        its text made then (close)."""
        projector = self._projectors[Layout.TEXT]

        def make() -> SessionRequest:
            if self._closed:
                raise InputError("the session that made this request is closed: read "
                                 "request.text before closing it", source="Request.text")
            return projector.request(budget_tokens=planned, limit_pos=limit_pos)
        return make

    def observe_usage(self, input_tokens: int, *, cache_creation_input_tokens: int = 0,
                      cache_read_input_tokens: int = 0,
                      request: Request | None = None) -> Observation:
        """Record the provider's count of a request's input (default: the last request made)
        beside holon_ctx's estimate; later requests for the model plan under the safety factor
        the observations teach (RFC 0022; docs/providers.md). ``input_tokens`` as the provider
        reports it: OpenAI's ``prompt_tokens`` / ``input_tokens`` (cached tokens included), or
        Anthropic's ``input_tokens`` with its two cache figures given beside it (Anthropic
        reports them apart). Returns the observation recorded."""
        w = "observe_usage"
        self._check_open(w)
        counts = [check_int(w, name, value) for name, value in (
            ("input_tokens", input_tokens),
            ("cache_creation_input_tokens", cache_creation_input_tokens),
            ("cache_read_input_tokens", cache_read_input_tokens))]
        for name, value in zip(("input_tokens", "cache_creation_input_tokens",
                                "cache_read_input_tokens"), counts, strict=True):
            if value is None or value < 0:
                raise InputError(f"expected a count of tokens (an integer, 0 or more), got "
                                 f"{quote_value(value)}", source=w, path=name)
        observed = sum(c or 0 for c in counts)
        if request is None:
            request = self._last_request
            if request is None:
                raise InputError("no request made yet: observe the usage of a request from "
                                 "next_request", source=w)
        elif not isinstance(request, Request):
            raise InputError(f"expected a Request, got {type(request).__name__}", source=w,
                             path="request")
        if observed <= 0:
            raise InputError("the provider counted no input tokens: nothing to calibrate with",
                             source=w, path="input_tokens")
        observation = Observation(
            model=request._calibration_key, counter=request.counter, framing=request.framing,
            turn=request.current_turn, budget_tokens=request.budget_tokens,
            planned_tokens=request.planned_tokens, estimated_tokens=request.request_tokens,
            observed_tokens=observed)
        if observation.model == self.calibration.model:
            self.calibration.record(observation)
        else:
            self._usage.add(observation)  # a request made before use_model switched models
        return observation

    def compact(self, policy: CompactionPolicy | None = None) -> CompactionResult:
        """Archive the turn ranges older than the recent window into episodes and seal a
        continuity envelope for them, under ``policy`` (default: the session's, else the default
        policy); idempotent. Runs by itself under the session's policy."""
        w = "compact"
        self._check_open(w)
        if policy is not None and not isinstance(policy, CompactionPolicy):
            raise InputError(f"expected a CompactionPolicy or None, got {type(policy).__name__}",
                             source=w, path="policy")
        self._turns_since_compaction = 0
        result = self._upkeep.compact(policy or self.compaction or _DEFAULT_POLICY)
        # Sealing may have opened the governed store: later prompts state what it holds.
        for projector in self._projectors.values():
            projector.control = self._upkeep.control_source()
        return result

    # -- lifetime --------------------------------------------------------------------------------
    def close(self) -> None:
        """Write calls still waiting as ``pending``, close the stores this session opened."""
        if self._closed:
            return
        if self._pending:
            self._write_pending()
            self._late.update(self._pending)
            self._pending.clear()
        for request in list(self._unread):
            request._settle_text()  # while the stores are open (see _text_view)
        self._unread.clear()
        self._closed = True
        self._epochs.close()
        self._usage.close()
        self._upkeep.close()
        if self._owns_store:
            self.store.close()

    @_retrying
    def _write_pending(self) -> None:
        """Calls still waiting when the session closes, written as ``pending``."""
        batch = _Batch(self.store, self.store.end_pos(), self._check_ids)
        for call_id, call in self._pending.items():
            batch.add(Tool(id=batch.new_id("tool", "x"), turn_id=call.turn_id,
                           tool_name=call.name, args_digest=digest(call.arguments),
                           args_preview=call.arguments, status=ToolStatus.PENDING,
                           call_id=call_id))
        self._append("close", batch)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


#: Triggers with their own helper (``wake`` refuses them: the helper records what they carry).
_TURN_HELPERS = {"operator_input": "operator_message", "operator_override": "operator_message",
                 "task_result": "task_result", "subagent_result": "task_result",
                 "external_event": "external_event", "approval_decision": "operator_message"}


def _check_ledger_path(path: Path) -> None:
    """A path ``open_session`` can make or open a SQLite ledger at, or an error that says what
    to do instead (the directory to create, the call that reads a ledger or transcript file)."""
    if path.is_dir():
        raise InputError("is a directory, not a ledger file", source=str(path))
    problem = missing_directory(path)
    if problem is not None:
        raise InputError(problem, source=str(path))
    kind = not_a_database(path)
    if kind is not None:
        raise InputError(f"{kind}, not a SQLite ledger: open a ledger (open_session('agent.db')) "
                         "and bring the file in with session.import_history(path)",
                         source=str(path))


def open_session(where: str | os.PathLike[str] | LedgerStore, *,
                 compaction: CompactionPolicy | None = _DEFAULT_POLICY,
                 episodes: EpisodeStore | None = None,
                 continuity: ContinuityStore | None = None,
                 identity: SessionConfig | None = None,
                 clock: Callable[[], datetime] | None = None,
                 session_key: str | None = None, model: str | None = None) -> Session:
    """A session on a SQLite ledger file (created if missing), on one session of a PostgreSQL
    database (a ``postgresql://`` URL with ``session_key``: the session is created if missing,
    its episodes and governed state kept beside it) or on any ``LedgerStore``.

    ``compaction=None`` turns automatic compaction off. ``episodes``/``continuity`` override where
    episodes and governed control state are kept; ``identity`` says who the session acts for
    (``holon_ctx.compaction.SessionConfig``); ``clock`` stamps governed records. ``model`` (such
    as ``"gpt-4o"`` or ``"claude-sonnet-4-5"``) picks the tokenizer, the framing and the usage
    calibration its provider's counts need (docs/providers.md); none: cl100k and OpenAI's
    framing."""
    w = "open_session"
    profile = model_profile(model, where=w)
    counter = counter_for_encoding(profile.encoding)
    if session_key is not None and not (isinstance(where, str) and is_postgres_url(where)):
        raise InputError("a session key picks a session of a postgresql:// database; this is "
                         "not one", source=w, path="session_key")
    if isinstance(where, str) and is_postgres_url(where):
        if session_key is None:
            raise InputError("a postgresql:// database holds many sessions: pass session_key=KEY "
                             "(holon_ctx.postgres.list_sessions(url) lists them)", source=w,
                             path="session_key")
        key = check_text(w, "session_key", session_key, required=True)
        store: LedgerStore = PostgresStore(where, session=key, counter=counter)
        owns = True
    elif isinstance(where, str | os.PathLike):
        path = Path(where)
        if str(where) != ":memory:":
            _check_ledger_path(path)
        store = SqliteStore(path, counter)
        owns = True
    elif isinstance(where, LedgerStore):
        store, owns = where, False
    else:
        raise InputError(f"expected a path, a postgresql:// URL or a LedgerStore, got "
                         f"{type(where).__name__}", source=w, path="where")
    try:
        with warnings.catch_warnings():
            # An unknown model warned once, above.
            warnings.simplefilter("ignore", UnknownModelWarning)
            return Session(store, compaction=compaction, episodes=episodes,
                           continuity=continuity, identity=identity, clock=clock,
                           owns_store=owns, model=model)
    except BaseException:
        if owns:
            store.close()
        raise
