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
``assistant_message(tool_calls=…)`` is stored with the reply (the message's ``tool_calls``) and
waits until ``tool_result(call_id, …)`` writes that record in the call's turn. A call still
waiting when a new turn opens (or the session closes) is written with status ``pending``; a result
that comes later still lands, as a second record of the same call, however many turns later. A
call's state is its newest record, which every store indexes in the append's own transaction:
reopening a ledger, or catching up with another writer, reads every call still waiting with the
ledger's end (RFC 0008 decision 5), so a restarted runtime or another process records the results,
writes ``pending`` once per call, and is refused a second result.

Other writers. A session keeps the current turn, the work item and the waiting calls in memory and
names records by position. Before each append it checks the ledger's end: when another writer
(a CLI import, another process) appended meanwhile, it first continues from the ledger as it is
now. The append itself is refused unless the ledger still ends where the batch's ids were minted
(checked inside the store's write transaction); a helper that lost that race builds its batch
again from the ledger as it is then (``session_base._retrying``), so several sessions appending to
one ledger never mint one id twice.

The class is built in three modules, each under the house's ~400 lines: the state and
the append machinery (``holon_ctx.session_base``), the helper per kind of event
(``holon_ctx.session_events``), and here the facade itself: importing a history, asking for a
request, observing usage, compacting, closing, and ``open_session``.
"""

from __future__ import annotations

import contextlib
import math
import os
import sqlite3
import warnings
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, TypeAlias

from holon_ctx.compaction import CompactionResult, GovernedControl, SessionConfig
from holon_ctx.continuity import ContinuityStore
from holon_ctx.errors import (
    BudgetTooSmallError,
    DuplicateIdError,
    InputError,
    LedgerFormatError,
    quote_value,
)
from holon_ctx.ledger.dbpath import database_path_problem, url_scheme
from holon_ctx.ledger.records import Record, record_ref
from holon_ctx.ledger.sqlite import SqliteStore
from holon_ctx.ledger.store import LedgerStore
from holon_ctx.ledger.transcript_build import LedgerBuilder
from holon_ctx.ledger.transcript_chat import read_anthropic, read_openai
from holon_ctx.ledger.transcript_swe import read_swe_traj
from holon_ctx.ledger.transcripts import import_any, not_a_database
from holon_ctx.ledger.usage import WINDOW, Observation
from holon_ctx.memory import EpisodeStore
from holon_ctx.models import UnknownModelWarning, model_profile
from holon_ctx.postgres import PostgresStore, is_postgres_url
from holon_ctx.projection.base.model import Moment
from holon_ctx.projection.provider_formats.providers import MAX_MESSAGES
from holon_ctx.projection.session.session import Layout, SessionRequest
from holon_ctx.projection.session.text_need import both_layouts
from holon_ctx.request import Request
from holon_ctx.session_args import (
    check_flag,
    check_id,
    check_int,
    check_positive,
    check_status,
    check_text,
    check_turn_ref,
)
from holon_ctx.session_base import (
    _DEFAULT_POLICY,
    _Batch,
    _retrying,
    one_line_errors,
    store_error,
)
from holon_ctx.session_events import ToolCall, _SessionEvents
from holon_ctx.session_upkeep import CompactionPolicy
from holon_ctx.tokens import counter_for_encoding

__all__ = ["Session", "ToolCall", "open_session"]

HistoryFormat: TypeAlias = Literal["auto", "ledger", "openai", "anthropic", "swe-traj"]


class _HistoryFormat(StrEnum):
    AUTO = "auto"
    LEDGER = "ledger"
    OPENAI = "openai"
    ANTHROPIC = "anthropic"
    SWE_TRAJ = "swe-traj"


class Session(_SessionEvents):
    """One ledger, the stores beside it and a long-lived projector (module docstring)."""

    # -- an existing history ---------------------------------------------------------------------
    @one_line_errors
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
        # The history opens turns after the current one: calls still waiting go in as pending
        # first, as when any turn opens, and a result that comes later still lands (dropped,
        # the call vanished and its result was refused). In the history's own append, so a
        # history refused writes nothing (written on their own before it, they stayed).
        for tries_left in reversed(range(_IMPORT_TRIES)):
            # Named by the ledger's end and looked up there: another runtime can still take an
            # id before the append (an import does not pin the end), and then they are named
            # again at the new end, as a helper's are when the ledger moved (_retrying).
            # Caught up first: the calls another Session announced (or wrote pending) since this
            # one's last append are the ledger's, and are written pending once.
            waiting = _Batch(self.store, self._catch_up(w, read=True), True)
            self._add_pending(waiting)
            try:
                if isinstance(history, str | os.PathLike):
                    _, stored = import_any(Path(history), self.store, fmt.value,
                                           id_prefix=prefix, before=waiting.records)
                else:
                    stored = self.store.append(
                        [*waiting.records, *self._read_history(w, history, fmt, prefix)],
                        source=w, renumber_turns=True)
                break
            except LedgerFormatError as exc:
                if not tries_left or not _took_one_of(exc, waiting.records):
                    raise
        stored -= len(waiting.records)
        self._late.update(self._pending)
        self._pending.clear()
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
    @one_line_errors
    def next_request(self, budget_tokens: int, *, at: str | None = None,
                     text: bool = False) -> Request:
        """The next model call's input under ``budget_tokens`` (the whole request, message
        framing included). Compacts first when the policy says it is time. ``at`` asks as of an
        earlier turn. ``text``: the caller reads ``Request.text`` (a text-only model): the text
        is made now, and a refusal states a budget at which the messages and the text are both
        made (need.py, ``both_layouts``)."""
        w = "next_request"
        budget = check_positive(w, "budget_tokens", budget_tokens)
        turn_id = None if at is None else check_turn_ref(w, "at", at)
        with_text = check_flag(w, "text", text)
        self._check_open(w)
        with self._reading_ahead(at):
            return self._next_request(w, budget, turn_id, with_text=with_text)

    def _reading_ahead(self, at: str | None) -> AbstractContextManager[None]:
        """What a request reads from a store on a server, in one round trip where the store
        can (PostgreSQL, RFC 0026 decision 8): the end, the usage, the governed envelope ids,
        the archive visible at the end and the records the messages walk is missing (from
        where it stopped for the last request's budget; a re-planned budget reads them as
        before)."""
        ahead = getattr(self.store, "reading_ahead", None)
        if not callable(ahead):
            return contextlib.nullcontext()
        last = self._last_request
        walked = None if last is None or at is not None else \
            self._projectors[Layout.MESSAGES].walked(last.planned_tokens)
        control = self._projectors[Layout.MESSAGES].control
        governed = getattr(control, "session_id", None)
        found: AbstractContextManager[None] = ahead(
            records_from=walked, usage=(self.calibration.model, WINDOW),
            governed=governed if isinstance(governed, str) else None)
        return found

    def _next_request(self, w: str, budget: int, turn_id: str | None, *,
                      with_text: bool) -> Request:
        end = self._catch_up(w, read=True)
        if self._turn is None:
            raise InputError("the ledger holds no turn yet: append what happened first "
                             "(operator_message, task_result, external_event or wake)", source=w)
        # Planned under budget / factor: the provider's count of the request, as far as its
        # reported usage teaches, stays within the budget (holon_ctx.calibration).
        factor = self.calibration.factor()
        planned = self.calibration.planned_budget(budget, factor)
        policy = self.compaction
        # Every `every_turns` turns, and every `binding_turns` while the budget binds: a prompt
        # that leaves turns out has them compete as episodes soon after they age out, in a
        # conversation of a few dozen turns too (RFC 0013), and each compaction archives a
        # batch of them, not one turn per request (RFC 0024). Before any refusal too: a need
        # stated before a due compaction fell short once the retry compacted (the governed
        # state it seals is stated in the tail: told 126, the retry needed 426).
        if policy is not None and self._schedule.due(policy, self._turn.seq):
            self.compact()
        framing = self._projectors[Layout.MESSAGES].framing.stateless(MAX_MESSAGES)
        if planned <= framing and not with_text:
            raise self._framing_refusal(budget, factor, turn_id, end, framing)
        try:
            if with_text:
                messages, text = both_layouts(
                    self._projectors[Layout.MESSAGES], self._projectors[Layout.TEXT], planned,
                    at=turn_id, end=end, framing=framing)
                make_text: Callable[[], SessionRequest] = lambda: text  # noqa: E731
            else:
                messages = self._projectors[Layout.MESSAGES].request(
                    budget_tokens=planned, at=turn_id, ledger_end=end)
                make_text = self._text_view(planned, messages, budget, factor)
        except BudgetTooSmallError as exc:
            raise self._in_caller_tokens(exc, budget, factor) from None
        self._schedule.binds = messages.binds
        request = Request(budget_tokens=budget, messages=messages, make_text=make_text,
                          planned_tokens=planned, safety_factor=factor,
                          model=self.profile.model, framing=self.profile.framing.name,
                          counter=self._projectors[Layout.MESSAGES].counter.identity,
                          calibration_key=self.profile.calibration_key)
        self._last_request = request
        self._unread.add(request)
        return request

    def _framing_refusal(self, budget: int, factor: float, turn_id: str | None, end: int,
                         framing: int) -> BudgetTooSmallError:
        """The refusal of a budget the message framing fills: stated as a budget whose request
        is made — the least above the framing when one is made there, else the projector's
        need at it (found as need.py finds every need)."""
        try:
            self._projectors[Layout.MESSAGES].request(budget_tokens=framing + 1, at=turn_id,
                                                      ledger_end=end)
        except BudgetTooSmallError as exc:
            return self._in_caller_tokens(exc, budget, factor)
        return BudgetTooSmallError(self._caller_tokens(framing + 1, factor), budget,
                                   "the request's message framing")

    def _in_caller_tokens(self, refusal: BudgetTooSmallError, budget: int,
                          factor: float) -> BudgetTooSmallError:
        """The projector's refusal (in planned tokens) said against the caller's budget."""
        return BudgetTooSmallError(
            max(self._caller_tokens(refusal.required_tokens, factor), budget + 1), budget,
            refusal.what, at_least=refusal.at_least)

    def _caller_tokens(self, planned: int, factor: float) -> int:
        """The smallest budget a caller gives whose planned budget holds ``planned`` tokens."""
        tokens = max(1, math.ceil(planned * factor - 1e-9))
        while self.calibration.planned_budget(tokens, factor) < planned:
            tokens += 1
        return tokens

    def _text_view(self, planned: int, messages: SessionRequest, budget: int,
                   factor: float) -> Callable[[], SessionRequest]:
        """The text layout of a request, made when it is first read (one walk per request for a
        runtime that sends messages; RFC 0024), as of the messages' moment: the same records
        whatever was appended since, and the governed state and archive the messages' walk read
        — a compaction that ran after the request at its very position is not seen (RFC 0020,
        "A request is one moment"). A request still unread when the session closes has its text
        made then (close)."""
        projector = self._projectors[Layout.TEXT]
        limit_pos = messages.limit_pos
        moment = messages.moment
        assert moment is None or isinstance(moment, Moment)

        def make() -> SessionRequest:
            if self._closed:
                raise InputError("the session that made this request is closed: read "
                                 "request.text before closing it", source="Request.text")
            try:
                return projector.request(budget_tokens=planned, limit_pos=limit_pos,
                                         moment=moment)
            except sqlite3.Error as exc:
                raise store_error(self.store, exc) from None
            except BudgetTooSmallError as exc:
                # In the caller's tokens, as the messages' refusal is: stated in planned tokens,
                # a calibrated runtime given 118 was told "need 112, only 111 available".
                raise self._in_caller_tokens(exc, budget, factor) from None
        return make

    @one_line_errors
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

    @one_line_errors
    def compact(self, policy: CompactionPolicy | None = None) -> CompactionResult:
        """Archive the turn ranges older than the recent window into episodes and seal a
        continuity envelope for them, under ``policy`` (default: the session's, else the default
        policy); idempotent. Runs by itself under the session's policy."""
        w = "compact"
        self._check_open(w)
        if policy is not None and not isinstance(policy, CompactionPolicy):
            raise InputError(f"expected a CompactionPolicy or None, got {type(policy).__name__}",
                             source=w, path="policy")
        self._schedule.compacted(-1 if self._turn is None else self._turn.seq)
        result = self._upkeep.compact(policy or self.compaction or _DEFAULT_POLICY)
        # Sealing may have opened the governed store: later prompts state what it holds. A
        # source already over that store keeps what it read: it reads the envelope ids at each
        # request and the snapshot of any envelope new to it, as it does when another runtime
        # seals between two requests (a new source read every snapshot again: a round trip
        # more after each compaction on a server, RFC 0026 decision 11).
        for projector in self._projectors.values():
            control = projector.control
            if not (isinstance(control, GovernedControl)
                    and control.store is self._upkeep.continuity):
                projector.control = self._upkeep.control_source()
        return result

    # -- lifetime --------------------------------------------------------------------------------
    @one_line_errors
    def close(self) -> None:
        """Write calls still waiting as ``pending``, close the stores this session opened."""
        if self._closed:
            return
        if self._pending:
            self._write_pending()
            self._late.update(self._pending)
            self._pending.clear()
        # Only the requests the caller still holds have their text made now: the session's
        # own reference to its last one goes first, or closing a runtime that never reads
        # `.text` walked the text layout over every turn since it was last made (seconds at
        # the end of a long session; the 32-process fleet's timeout, issue 29).
        self._last_request = None
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
        """Calls still waiting when the session closes, written as ``pending``: from the ledger
        as it is (another writer's turn may have written them ``pending`` already: once each)."""
        batch = _Batch(self.store, self._catch_up("close", read=True), self._check_ids)
        self._add_pending(batch)
        if batch.records:
            self._append("close", batch)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()




def _check_ledger_path(path: Path) -> None:
    """A path ``open_session`` can make or open a SQLite ledger at, or an error that says what
    to do instead (the directory to create, the call that reads a ledger or transcript file)."""
    if path.is_dir():
        raise InputError("is a directory, not a ledger file", source=str(path))
    problem = database_path_problem(path, new=True)
    if problem is not None:
        raise InputError(problem, source=str(path))
    kind = not_a_database(path)
    if kind is not None:
        raise InputError(f"{kind}, not a SQLite ledger: open a ledger (open_session('agent.db')) "
                         "and bring the file in with session.import_history(path)",
                         source=str(path))


#: Imports tried when another runtime takes the id of a call written as pending with the history.
_IMPORT_TRIES = 4


def _took_one_of(exc: LedgerFormatError, records: Sequence[Record]) -> bool:
    """Whether ``exc`` refused one of ``records``' ids as already in the ledger (not an id of
    the history: that one is the history's own clash, refused as it is)."""
    return isinstance(exc, DuplicateIdError) and any(exc.ref == record_ref(r) for r in records)


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
    if isinstance(where, str) and not is_postgres_url(where) and (scheme := url_scheme(where)):
        # Named by its scheme only: the rest of a URL may hold a password.
        raise InputError(f"a {scheme} URL is not a ledger holon_ctx opens: give a postgresql:// "
                         "URL, the path of a SQLite file or a LedgerStore", source=w, path="where")
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
    except BaseException as exc:
        if owns:
            store.close()
        if isinstance(exc, sqlite3.Error):
            raise store_error(store, exc) from None
        raise
