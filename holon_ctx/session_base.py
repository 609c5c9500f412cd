"""A session's state and the machinery its helpers append with (split from session.py).

:class:`_SessionBase` keeps what a session holds between calls (the store and the stores beside
it, one projector per layout, the model profile and calibration, the current turn, the work item
and the calls waiting for their results) and the append path every helper goes through: catch up
with the ledger's end, build a batch whose ids name ledger positions, append it only where the ids
were minted, and build it again when another writer appended first (:func:`_retrying`). The
helpers themselves are in ``holon_ctx.session_events``; the facade users see, ``Session``, in
``holon_ctx.session`` (its docstring is the theory of operation).
"""

from __future__ import annotations

import functools
import random
import sqlite3
import time
import weakref
from collections.abc import Callable
from datetime import datetime
from typing import Concatenate, ParamSpec, TypeVar

import attrs

from holon_ctx.calibration import Calibration
from holon_ctx.compaction import SessionConfig
from holon_ctx.continuity import ContinuityStore
from holon_ctx.errors import (
    DuplicateIdError,
    InputError,
    LedgerFormatError,
    StoreError,
    WaitNotOpenedError,
    quote_value,
)
from holon_ctx.ledger import locking
from holon_ctx.ledger.epochs_sqlite import epoch_store_for
from holon_ctx.ledger.records import (
    Message,
    MessageRole,
    Outcome,
    Record,
    Tool,
    ToolStatus,
    Turn,
    record_ref,
)
from holon_ctx.ledger.store import CallRecord, CallState, LedgerStore
from holon_ctx.ledger.transcript_build import digest
from holon_ctx.ledger.usage_sqlite import usage_store_for
from holon_ctx.ledger.writer import LedgerMovedError
from holon_ctx.memory import EpisodeStore
from holon_ctx.models import ModelProfile, model_profile
from holon_ctx.projection.session.session import Layout, SessionProjector
from holon_ctx.request import Request
from holon_ctx.session_args import check_text
from holon_ctx.session_upkeep import CompactionPolicy, CompactionSchedule, open_upkeep
from holon_ctx.tokens import counter_for_encoding, store_counter

#: The argument each ledger field is given by, for errors the append path finds (ledger-wide
#: rules: a wait never opened, a pin target that does not exist, an unknown spawning turn).
_FIELD_ARG = {"$.wait_id": "wait", "$.spawned_by_turn_id": "spawned_by", "$.target": "target",
              "$.resolved_by": "resolved_by", "$.anchor_turn_id": "continues",
              "$.work_item_id": "work_item", "$.status": "status", "$.output": "output",
              "$.text": "text", "$.summary": "summary", "$.guidance": "guidance"}
_DEFAULT_POLICY = CompactionPolicy()


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


def _waiting_call(call_id: str, rec: Record) -> _Call:
    """The waiting call ``call_id`` as its newest record (its announcing reply, or the
    ``pending`` record of it) states it."""
    if isinstance(rec, Tool):
        return _Call(rec.turn_id or "", rec.tool_name, rec.args_preview)
    assert isinstance(rec, Message)
    call = next(c for c in rec.tool_calls if c.call_id == call_id)
    return _Call(rec.turn_id or "", call.name, call.arguments)


def _call_order(found: CallRecord) -> tuple[int, int]:
    """Where ``found``'s newest record puts the call: its position, then its place among the
    calls of one reply."""
    rec = found.stored.record
    calls = [c.call_id for c in rec.tool_calls] if isinstance(rec, Message) else []
    return found.stored.pos, calls.index(found.call_id) if found.call_id in calls else 0


class _Moved(Exception):
    """Another writer appended between a helper's read of the ledger's end and its append."""


class _Taken(Exception):
    """A minted id is already in the ledger (an imported record named like ``m57``)."""


#: Times a helper builds its batch again when other writers keep appending first.
_MOVED_TRIES = 64
#: Tries made at once before a refused helper waits a little (a random pause growing with the
#: tries, at most _BACKOFF_MAX seconds): writers appending back to back on a server could
#: otherwise keep beating one whose catch-up reads take longer than their appends (seen in the
#: slow tier: four PostgreSQL writers, one refused 64 times in a row on a loaded machine).
_EAGER_TRIES = 4
_BACKOFF_MAX = 0.025
_P = ParamSpec("_P")
_T = TypeVar("_T")
_S = TypeVar("_S", bound="_SessionBase")


def store_error(store: object, exc: sqlite3.Error) -> StoreError:
    """A database error a store let through (a damaged or vanished SQLite file), as the one
    line every other store error is: the database's path and SQLite's words."""
    path = str(getattr(store, "path", "the ledger"))
    if locking.is_lock_error(exc):
        return locking.lock_error(path, locking.lock_timeout(getattr(store, "lock_timeout", None)))
    return StoreError(f"{path}: {exc}")


def one_line_errors(method: Callable[Concatenate[_S, _P], _T]
                    ) -> Callable[Concatenate[_S, _P], _T]:
    """A session call raises no raw ``sqlite3`` error: the stores translate the ones they
    expect (a lock held too long, a write refused), and any other one read or written by any
    store beside the ledger (a page of the file damaged) is :func:`store_error` here."""
    @functools.wraps(method)
    def run(self: _S, /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        try:
            return method(self, *args, **kwargs)
        except sqlite3.Error as exc:
            raise store_error(self.store, exc) from None
    return run


def _retrying(helper: Callable[Concatenate[_S, _P], _T]
              ) -> Callable[Concatenate[_S, _P], _T]:
    """Run an appending helper again, from the ledger as it is now, when another writer
    appended first: its ids name ledger positions, so two writers never store one id for two
    records (a store that takes a record given again as already held would lose one)."""
    @functools.wraps(helper)
    @one_line_errors
    def run(self: _S, /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        for tries in range(_MOVED_TRIES):
            if tries >= _EAGER_TRIES:
                time.sleep(random.uniform(0, min(_BACKOFF_MAX, 0.001 * 2 ** (tries - _EAGER_TRIES))))
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


class _SessionBase:
    """A session's state and its append machinery; ``holon_ctx.session.Session`` is the class
    users get (the helpers are added by ``holon_ctx.session_events._SessionEvents``)."""

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
        #: Calls waiting for a result: announced in the current turn's exchange (written
        #: ``pending`` when a turn opens), and left ``pending`` (a late result lands however
        #: many turns later). Rebuilt from the store's index of calls on every reload.
        self._pending: dict[str, _Call] = {}
        self._late: dict[str, _Call] = {}
        #: When the session compacts by itself (resumed from the archive, below).
        self._schedule = CompactionSchedule()
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
        self._schedule = CompactionSchedule.resumed(
            compaction, self._upkeep.episodes, None if self._turn is None else self._turn.seq)

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

    @one_line_errors
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
        """Current turn, work item and the calls waiting for a result, as the ledger left them.

        The waiting calls are every call whose newest record is its announcement (``_pending``)
        or ``pending`` (``_late``), however far back (RFC 0008 decision 5): the store keeps each
        call's newest record in the append's own transaction and answers with the ledger's end
        in one read, so the rest is read as of that end. A runtime restarted between a reply and
        its results, or another Session, records them as the announcing one would have, writes
        ``pending`` for a call once, and is refused a second result."""
        end, calls = self.store.waiting_calls()
        self._end, self._end_known = end, True
        self._pending.clear()
        self._late.clear()
        # In ledger order, a reply's calls in the order it made them: the order an
        # uninterrupted session writes them ``pending`` in (stores order by position only).
        for found in sorted(calls, key=_call_order):
            waiting = _waiting_call(found.call_id, found.stored.record)
            (self._pending if found.state is CallState.ANNOUNCED else self._late)[
                found.call_id] = waiting
        latest = self.store.latest_turn(end)
        if latest is None:
            return
        turn = latest.record
        assert isinstance(turn, Turn)
        # A server store read the latest turn's records with the turn (one round trip).
        own = self.store.records_of_turns(turn.seq, turn.seq, end)
        replied = any((isinstance(r, Message) and r.role is MessageRole.ASSISTANT)
                      or (isinstance(r, Tool) and r.call_id is not None)
                      for r in (s.record for s in own))
        self._turn = _TurnState(turn.id, turn.seq, turn.trigger, turn.anchor_turn_id, replied)
        self._work_item = turn.work_item_id

    def _follow_calls(self, rec: Message) -> None:
        """The calls a reply this session appended announces now wait (as a reload finds them)."""
        for call in rec.tool_calls:
            self._late.pop(call.call_id, None)
            self._pending[call.call_id] = _waiting_call(call.call_id, rec)

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
            # The state is read as of the end _load_state reads (another writer may have
            # appended since the read above): ids minted at the older end would be refused.
            self._load_state()
            end = self._end
        self._end_known = True
        return end

    def _batch(self, where: str, end: int | None = None) -> _Batch:
        """A batch from the ledger's ``end`` (read now unless the helper just read it: one
        read of the end per helper call, a round trip on a server)."""
        return _Batch(self.store, self._catch_up(where) if end is None else end,
                      self._check_ids)

    def _append(self, where: str, batch: _Batch) -> None:
        try:
            # Only where the ids were minted (they name positions): another writer that
            # appended first makes the helper build its batch again (_retrying).
            self.store.append(batch.records, source=where, expect_end=batch.pos)
        except LedgerMovedError:
            raise _Moved from None
        except LedgerFormatError as exc:
            if not batch.checked and isinstance(exc, DuplicateIdError):
                raise _Taken from None
            if isinstance(exc, WaitNotOpenedError) and exc.path == "$.status":
                # The ledger words it for a JSONL line ("$.status: wait 'w' is resolved but was
                # never opened"); a helper ending a wait (close_wait) got a wrong wait id.
                raise InputError(f"no wait {quote_value(exc.wait_id)} was opened (open it with "
                                 "open_wait)", source=where, path="wait_id") from None
            # A ledger-wide rule failed (a wait never opened, an unknown pin target or turn):
            # report it against the helper's own argument.
            path = exc.path or ""
            # An announced call's field is the helper's argument too (tool_calls[0].arguments).
            raise InputError(exc.message, source=where, path=_FIELD_ARG.get(
                path, path[2:] if path.startswith("$.tool_calls") else exc.path)) from None
        # Ids and turns are explicit, so the batch is stored exactly as built.
        self._end = batch.pos + len(batch.records)
        self._end_known = True

    def _open(self, where: str, trigger: str, *, anchor: str | None = None,
              work_item: str | None = None, label: str | None = None,
              noop: bool = False, end: int | None = None) -> _Opening:
        """Start a batch that closes the current turn and opens a new one."""
        batch = self._batch(where, end)
        self._add_pending(batch)
        wid = work_item if work_item is not None else self._work_item
        tid = batch.new_id("turn", "t")
        seq = 0 if self._turn is None else self._turn.seq + 1
        batch.add(Turn(id=tid, seq=seq, trigger=trigger, anchor_turn_id=anchor,
                       work_item_id=wid, label=label, outcome=Outcome.NOOP if noop else None))
        return _Opening(batch, _TurnState(tid, seq, trigger, anchor), wid)

    def _add_pending(self, batch: _Batch) -> None:
        """Calls still waiting, added to ``batch`` as ``pending`` (a call left without a result
        when its turn closes; docs/import.md does the same)."""
        for call_id, call in self._pending.items():
            batch.add(Tool(id=batch.new_id("tool", "x"), turn_id=call.turn_id,
                           tool_name=call.name, args_digest=digest(call.arguments),
                           args_preview=call.arguments, status=ToolStatus.PENDING,
                           call_id=call_id))

    def _commit(self, where: str, opening: _Opening) -> None:
        """Append an opening's batch; only then does the session move to the new turn."""
        self._append(where, opening.batch)
        self._turn = opening.turn
        self._work_item = opening.work_item
        self._late.update(self._pending)
        self._pending.clear()

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
