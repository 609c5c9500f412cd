"""Compaction: archive aged-out turns into episodes and seal a continuity envelope for them.

This module is the seam between the episode archive (:mod:`holon_ctx.memory`) and the continuity
envelope (:mod:`holon_ctx.continuity`); neither knows the other. One :func:`compact` call:

1. archives every closed turn range older than the recent window (idempotent per range);
2. brings the governed store up to date *from the ledger, not from any summary*: the session's
   identity and budget, the checkpoint (the newest archived turn), every side effect an archived
   range left unknown or partial (so reconciliation blocks), side effects later resolved,
   obligations (the archive's still-open items) and the operator's exact constraints (pins);
3. seals a ``continuity-envelope/v1`` bound to the archived turn range and to the exact bytes of
   the archived episodes (the derived, untrusted "summary"), emitting ``context_compaction``.

:class:`GovernedControl` then hands the projector what must stay visible afterwards: open
obligations, exact constraints and any blocking reconciliation, read from the governed store.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import attrs

from holon_ctx.continuity import (
    AuthorizationMode,
    CompactionConflictError,
    CompactionRequest,
    ContinuityStore,
    Envelope,
    SideEffectStatus,
    prepare_compaction,
)
from holon_ctx.continuity.fitting import fit_id, fit_text
from holon_ctx.continuity.records import (
    ConstraintRecord,
    ControlSnapshot,
    SessionIdentity,
    SessionResources,
    SideEffectRecord,
)
from holon_ctx.continuity.snapshots import control_snapshots, record_control_snapshot
from holon_ctx.continuity.store import FactKind
from holon_ctx.ledger.compaction_lock import appends_held, process_lock
from holon_ctx.ledger.records import Message, Pin
from holon_ctx.ledger.store import LedgerStore
from holon_ctx.memory.archiver import Archiver, ArchiveReport, WouldArchive
from holon_ctx.memory.episodes import Episode, encode_episode
from holon_ctx.memory.store import EpisodeStore
from holon_ctx.projection.base.model import ControlHistory, ControlState

__all__ = [
    "CompactionResult",
    "GovernedControl",
    "SessionConfig",
    "compact",
    "has_continuity_state",
]

#: The most episodes read per round trip when looking for the ones no envelope covers yet.
_UNSEALED_PAGE = 256
#: The governed facts a request's control state reads (the continuity store's fact kinds).
_CONTROL_FACTS = (FactKind.OBLIGATION.value, FactKind.CONSTRAINT.value, FactKind.SIDE_EFFECT.value)
#: The longest objective an envelope takes from the operator's words (the envelope allows more;
#: a prompt's governed notice and a trace event carry it, so a line or two is what is useful).
_OBJECTIVE_CHARS = 500
#: Ids a range is sealed under before a conflict is reported (a crash per try would be needed).
_RESEAL_IDS = 8
_EFFECT_KINDS = {"side_effect_unknown": SideEffectStatus.UNKNOWN,
                 "side_effect_partial": SideEffectStatus.PARTIAL}


@attrs.frozen
class SessionConfig:
    """Who the session acts for. Supplied by the runtime; never read from a summary."""

    session_id: str = "session-local"
    tenant_id: str = "tenant-local"
    principal_id: str = "operator"
    authorization_mode: AuthorizationMode = AuthorizationMode.OPERATOR
    budget_remaining: int = 100
    #: Used only when the governed store has no policy version for the tenant yet; a runtime
    #: with a policy engine records the real one with ``ContinuityStore.set_policy_version``.
    policy_version: str = "policy-local-1"


@attrs.frozen
class CompactionResult:
    archive: ArchiveReport
    #: The sealed envelope's id, or None when nothing was archived.
    envelope_id: str | None
    obligations: tuple[str, ...]
    blocking: tuple[str, ...]


def _obligation(episode: Episode | None, kind: str, key: str, episode_id: str) -> str:
    """The obligation as a person reads it: the episode's own claim (naming its ref) and key,
    fitted to the envelope's rules (a long or invisible-character wait condition, RFC 0020)."""
    claim = next((c for c in episode.unresolved if c.key == key), None) if episode else None
    what = f"{claim.text} ({', '.join(claim.refs)})" if claim is not None else kind
    return fit_id(what, suffix=f" [{fit_id(key)}; archived in episode:{episode_id}]",
                  where=f"episode:{episode_id}")


def compact(
    ledger: LedgerStore,
    episodes: EpisodeStore,
    continuity: ContinuityStore,
    *,
    session: SessionConfig,
    clock: Callable[[], datetime],
    archiver: Archiver | None = None,
) -> CompactionResult:
    """Archive, sync governed state from the ledger, seal an envelope (see the module docstring).

    Under the ledger's compaction lock (RFC 0020): another runtime, or ``holon-ctx compact``,
    compacting the same ledger waits, then finds this one's episodes and envelope and seals only
    what is still unsealed, if anything. Times are read inside the lock and never below the
    newest one the governed store holds, so a compaction never fails for another's clock.
    A store that can read a compaction ahead (PostgreSQL) first tries it without the lock on
    one statement's answers: one that writes nothing returns from there (RFC 0026 decision 13).
    """
    archiver = archiver or Archiver(ledger, episodes)

    def run(*, archiving: bool = True) -> CompactionResult:
        return _compact_locked(ledger, episodes, continuity, session=session,
                               clock=_store_clock(continuity, clock), archiver=archiver,
                               archiving=archiving)

    def run_if_nothing_archives() -> CompactionResult | None:
        # The archive stops before building the first range that closes (it would write it):
        # a dry run that builds episodes only to throw them away cost a sealing compaction
        # ~6 ms of CPU at 10k messages.
        try:
            return run(archiving=False)
        except WouldArchive:
            return None
    recent, sid = archiver.policy.recent_turns, session.session_id
    # On a server, most compactions (one turn in four while the budget binds) find nothing to
    # archive or seal: tried first on the answers of one statement, without the lock, they are
    # one round trip; one that would read anything else or write anything runs again under
    # the lock, its reads before its first write answered by the same statement (PostgreSQL,
    # RFC 0026 decision 13). Any other store runs it once, under the lock, as before.
    alone = getattr(ledger, "compact_alone", None)
    if callable(alone):
        done = alone(run_if_nothing_archives, recent_turns=recent, governed=sid,
                     stores=(episodes, continuity.backend))
        if isinstance(done, CompactionResult):
            return done
    lock = getattr(ledger, "compaction_lock", None)
    reads = getattr(ledger, "compaction_reads", None)
    with (lock() if callable(lock) else process_lock(ledger),
          reads(recent, sid) if callable(reads) else contextlib.nullcontext()):
        return run()


def _store_clock(continuity: ContinuityStore,
                 clock: Callable[[], datetime]) -> Callable[[], datetime]:
    """``clock``, never earlier than the newest time the governed store recorded: another
    process (another host's clock) may have written a moment "later" than this clock reads.
    A clock that is not aware is passed through, for the store to refuse."""
    def now() -> datetime:
        read = clock()
        last = continuity.last_recorded_at()
        if last is None or not isinstance(read, datetime) or read.utcoffset() is None:
            return read
        return max(read, last)
    return now


def _compact_locked(
    ledger: LedgerStore,
    episodes: EpisodeStore,
    continuity: ContinuityStore,
    *,
    session: SessionConfig,
    clock: Callable[[], datetime],
    archiver: Archiver | None,
    archiving: bool = True,
) -> CompactionResult:
    archiver = archiver or Archiver(ledger, episodes)
    report = archiver.archive(archiving=archiving)
    # The envelope covers every episode archived since the last sealed one, not only this run's:
    # a compaction killed after archiving and before sealing leaves episodes that the next run
    # must seal, or their range would never be covered by any envelope.
    archived, latest = _unsealed(episodes, continuity, session.session_id)
    sid = session.session_id
    if not archived:
        # A compaction stopped between sealing and its snapshot: the snapshot is recorded now,
        # as of now (requests before kept the previous one; RFC 0020). The newest envelope is
        # the one _unsealed read (read again, a round trip more on a server, every run).
        if latest is not None and not control_snapshots(continuity, sid, latest.envelope_id):
            with appends_held(ledger, writer=continuity.backend) as at:
                _record_snapshot(continuity, sid, latest.envelope_id, at, clock)
        return CompactionResult(report, None, (), ())
    # The governed facts, the journal, the envelope and its control snapshot in one transaction
    # (one commit, one disk flush on SQLite, where each fact was its own: RFC 0024; on
    # PostgreSQL one statement, its reads answered ahead: RFC 0026 decision 9); the archive
    # above is the episode store's and is written before, so this holds no lock another store
    # waits for. The ledger's end is read where appends wait until the seal is committed
    # (PostgreSQL: the session row; SQLite: the governed store's write transaction on the
    # ledger's file), so the state is governed as of the position its snapshot is stamped
    # with (RFC 0020; RFC 0026 decision 9).
    batch = getattr(continuity.backend, "batch", None)
    with (appends_held(ledger, writer=continuity.backend) as end,
          batch() if callable(batch) else contextlib.nullcontext()):
        return _govern_and_seal(ledger, episodes, continuity, archived, report, end,
                                session=session, clock=clock)


def _govern_and_seal(
    ledger: LedgerStore,
    episodes: EpisodeStore,
    continuity: ContinuityStore,
    archived: list[Episode],
    report: ArchiveReport,
    end: int,
    *,
    session: SessionConfig,
    clock: Callable[[], datetime],
) -> CompactionResult:
    """The governed state the archived ``episodes`` leave as of ledger position ``end``, then
    the envelope sealing them and the control snapshot stamped ``end``."""
    now = clock()
    sid = session.session_id
    resources = _govern_session(continuity, session, now)
    open_now, blocking = _govern_open_items(episodes, continuity, session, end, now)
    constraint_refs = _govern_pins(ledger, continuity, sid, end, now)

    # The envelope names the write in flight: the first unreconciled one, else the newest side
    # effect (naming none while the session has some would claim it never wrote anything; the
    # sealed state carries all of them either way, RFC 0004).
    effects = continuity.side_effects(sid)
    key = blocking[0] if blocking else (effects[-1].idempotency_key if effects else None)
    first, last = archived[0].span.first_turn, archived[-1].span.last_turn
    checkpoint = fit_id(f"checkpoint:{last}")
    continuity.record_checkpoint(sid, checkpoint, at=now)
    summary = b"".join(encode_episode(ep) for ep in archived)
    request = CompactionRequest(
        session_id=sid,
        envelope_id=fit_id(f"ce-{first.removeprefix('turn:')}-{last.removeprefix('turn:')}"),
        source_trace_id=fit_id(f"ledger-{sid}"),
        source_event_range=(fit_id(first), fit_id(last)),
        summary_bytes=summary, objective=_objective(archived),
        exact_constraint_refs=sorted(set(constraint_refs)),
        pending_obligations=sorted(open_now), tenant_id=session.tenant_id,
        principal_id=session.principal_id, authorization_mode=session.authorization_mode,
        checkpoint_ref=checkpoint, budget_remaining=resources.budget_remaining,
        sandbox_snapshot_ref=resources.sandbox_snapshot_ref, idempotency_key=key)
    envelope = _seal(continuity, request, clock)
    _record_snapshot(continuity, sid, envelope.envelope_id, end, clock)
    return CompactionResult(report, envelope.envelope_id, tuple(sorted(open_now)),
                            tuple(blocking))


def _govern_session(continuity: ContinuityStore, session: SessionConfig,
                    now: datetime) -> SessionResources:
    """The session's identity, policy and resources, recorded the first time; its resources."""
    sid = session.session_id
    if continuity.session_identity(sid) is None:
        continuity.set_session_identity(SessionIdentity(
            session_id=sid, tenant_id=session.tenant_id, principal_id=session.principal_id,
            authorization_mode=session.authorization_mode), at=now)
    if continuity.policy_version(session.tenant_id) is None:
        continuity.set_policy_version(session.tenant_id, session.policy_version, at=now)
    # The configured budget is the session's first one only: once governed, the budget moves
    # by the runtime's records (spent, or raised by an explicit grant), never by a compaction.
    resources = continuity.session_resources(sid)
    if resources is None:
        resources = SessionResources(session_id=sid, budget_remaining=session.budget_remaining)
        continuity.set_session_resources(resources, at=now)
    return resources


def _govern_open_items(episodes: EpisodeStore, continuity: ContinuityStore,
                       session: SessionConfig, end: int,
                       now: datetime) -> tuple[set[str], list[str]]:
    """Every open item of the archive as an obligation (resolved ones close theirs) and every
    side effect as a governed one: (the obligations open now, the unreconciled effects' keys)."""
    sid = session.session_id
    open_now: set[str] = set()
    blocking: list[str] = []
    rows = episodes.open_rows(episodes.count(), end, 10_000)
    # Their episodes in one read (one round trip on a server, where each was one).
    bodies = episodes.episodes({row.num for row in rows})
    for row in rows:
        text = _obligation(bodies.get(row.num), row.kind, row.key, row.episode_id)
        effect = _EFFECT_KINDS.get(row.kind)
        resolved = row.resolved_pos is not None and row.resolved_pos <= end
        if effect is not None:
            effect_key = fit_id(row.key, where=f"episode:{row.episode_id}")
            status = SideEffectStatus.COMMITTED if resolved else effect
            known = continuity.side_effect(effect_key)
            if known is None or known.status is not status:
                continuity.record_side_effect(SideEffectRecord(
                    idempotency_key=effect_key, tenant_id=session.tenant_id, session_id=sid,
                    status=status), at=now)
            if not resolved:
                blocking.append(effect_key)
        if not resolved:
            open_now.add(text)
        elif text in continuity.open_obligations(sid):
            continuity.close_obligation(sid, text, at=now)
    for text in sorted(open_now - set(continuity.open_obligations(sid))):
        continuity.open_obligation(sid, text, at=now)
    return open_now, blocking


def _govern_pins(ledger: LedgerStore, continuity: ContinuityStore, sid: str, end: int,
                 now: datetime) -> list[str]:
    """Every pin as an exact constraint (its note and the pinned message's words); their refs."""
    constraint_refs: list[str] = []
    for pin in ledger.pins(end, 64):
        rec = pin.record
        assert isinstance(rec, Pin)
        target = ledger.get(rec.target)
        text = rec.note
        if target is not None and isinstance(target.record, Message):
            text = target.record.text if not text else f"{text} — {target.record.text}"
        ref = fit_id(rec.target)
        constraint_refs.append(ref)
        current = {c.ref: c for c in continuity.constraints(sid)}
        if ref not in current or current[ref].text != text:
            continuity.add_constraint(ConstraintRecord(session_id=sid, ref=ref, text=text), at=now)
    return constraint_refs


def _objective(archived: list[Episode]) -> str:
    """The newest operator words that say something, as an objective the envelope accepts
    (fit_text: control and invisible characters become spaces, a long text is cut with the ref
    of its full text); words with nothing visible are no objective. The exact words stay in the
    ledger and the episodes."""
    return next((words for ep in reversed(archived) for c in ep.operator_intents
                 if (words := fit_text(c.quote or c.text, limit=_OBJECTIVE_CHARS,
                                       where=", ".join(c.refs) or f"episode:{ep.id}"))),
                "continue the archived work")


def _record_snapshot(continuity: ContinuityStore, sid: str, envelope_id: str, end: int,
                     clock: Callable[[], datetime]) -> None:
    """What requests state of the governed state from ledger position ``end`` on: the store's
    state right after sealing ``envelope_id`` (RFC 0020)."""
    state = _live_state(continuity, sid, envelope_id)
    record_control_snapshot(continuity, ControlSnapshot(
        session_id=sid, envelope_id=envelope_id, ledger_pos=end,
        obligations=state.obligations, constraints=state.constraints,
        blocking=state.blocking), at=clock())


def _live_state(store: ContinuityStore, sid: str, envelope_id: str | None) -> ControlState:
    """The governed store's control state now (the reads a request's control state makes)."""
    return ControlState(
        envelope_id=envelope_id, obligations=store.open_obligations(sid),
        constraints=tuple((c.ref, c.text) for c in store.constraints(sid) if c.active),
        blocking=tuple((r.idempotency_key, r.status.value)
                       for r in store.unresolved_side_effects(sid)))


def _seal(continuity: ContinuityStore, request: CompactionRequest,
          clock: Callable[[], datetime]) -> Envelope:
    """``prepare_compaction``, resumed under the same id when a crashed run journaled the same
    inputs; when it journaled others (the ledger moved on since: a wait resolved, a pin added),
    sealed under the next free id of the same range (``ce-t3-t9-r2``) instead of failing every
    compaction until a new range is archived."""
    base = request.envelope_id
    for attempt in range(1, _RESEAL_IDS + 1):
        envelope_id = base if attempt == 1 else fit_id(f"{base}-r{attempt}")
        try:
            return prepare_compaction(continuity, attrs.evolve(request, envelope_id=envelope_id),
                                      clock=clock)
        except CompactionConflictError:
            if continuity.is_compaction_complete(envelope_id):
                raise  # a complete envelope under this id with other inputs: never overwritten
    raise CompactionConflictError(base, "envelope", f"{_RESEAL_IDS} ids of this range conflict")


def _unsealed(episodes: EpisodeStore, continuity: ContinuityStore,
              session_id: str) -> tuple[list[Episode], Envelope | None]:
    """Episodes after the last one the session's newest complete envelope covers, oldest first,
    and that envelope."""
    # The envelope ids, the newest envelopes' journals and bodies in one round trip on a server
    # (PostgreSQL's reading_ahead: three reads one after the other, every compaction).
    ahead = getattr(continuity.backend, "reading_ahead", None)
    with ahead(session_id, ()) if callable(ahead) else contextlib.nullcontext():
        sealed = continuity.latest_envelope(session_id)
    sealed_last = sealed.source_event_range.last if sealed is not None else None
    found: list[Episode] = []
    num, size = episodes.count(), 2
    # Pages of episodes newest first, growing: the usual compaction finds the sealed one among
    # the last two, and after a bulk archive (an imported history) thousands are unsealed,
    # where one read each would be a round trip each on a server.
    while num >= 1:
        nums = list(range(num, max(num - size, 0), -1))
        page = episodes.episodes(nums)
        for n in nums:
            episode = page.get(n)
            if episode is None or fit_id(episode.span.last_turn) == sealed_last:
                found.reverse()
                return found, sealed
            found.append(episode)
        num -= size
        size = min(size * 2, _UNSEALED_PAGE)
    found.reverse()
    return found, sealed


@attrs.define(eq=False)
class GovernedControl:
    """A :class:`~holon_ctx.projection.base.model.ControlSource` over the governed store.

    ``control_history()`` is what a session projection reads (RFC 0020): the control snapshot
    recorded with each envelope, at the ledger position it was sealed at. It is kept in memory
    and read again only for envelopes sealed since (one read of the session's envelope ids per
    request). A session whose envelopes were all sealed before snapshots were recorded reads
    the live state at every position, as before."""

    store: ContinuityStore
    session_id: str = SessionConfig().session_id
    _ids: tuple[str, ...] = attrs.field(default=(), init=False)
    _snapshots: dict[str, ControlSnapshot] = attrs.field(factory=dict, init=False)
    _absent: set[str] = attrs.field(factory=set, init=False)
    _history: ControlHistory | None = attrs.field(default=None, init=False)

    def control_state(self) -> ControlState | None:
        sid = self.session_id
        # Read before every request: a backend on a server answers these reads in one round
        # trip (PostgreSQL's reading_ahead); others read them one by one.
        ahead = getattr(self.store.backend, "reading_ahead", None)
        with ahead(sid, _CONTROL_FACTS) if ahead is not None else contextlib.nullcontext():
            envelope = self.store.latest_envelope(sid)
            state = _live_state(self.store, sid, envelope.envelope_id if envelope else None)
        if envelope is None and not (state.obligations or state.constraints or state.blocking):
            return None
        return state

    def control_history(self) -> ControlHistory:
        sid = self.session_id
        ids = tuple(self.store.envelope_ids(sid))
        if ids == self._ids and self._history is not None:
            return self._history
        if not ids and not self._snapshots:
            # Nothing sealed: no snapshot to read (each is recorded after its envelope), and no
            # live state to state (a round trip less per request on a server until the first
            # seal).
            return ControlHistory.constant(None)
        if not self._snapshots:
            self._snapshots = {s.envelope_id: s for s in control_snapshots(self.store, sid)}
        else:
            for envelope_id in ids:
                if envelope_id not in self._snapshots and envelope_id not in self._absent:
                    for found in control_snapshots(self.store, sid, envelope_id):
                        self._snapshots[envelope_id] = found
        # An envelope older than the newest with no snapshot never gets one (sealed before
        # snapshots existed, or its compaction stopped before recording it and the next one
        # sealed another): not read again.
        self._absent.update(i for i in ids[:-1] if i not in self._snapshots)
        # Kept only once the newest envelope's snapshot has been read: a backend that commits
        # the envelope and its snapshot apart (PostgreSQL) shows the envelope first, and a
        # history kept without its snapshot was never read again until the next envelope, so
        # a continuing runtime stated the older state where a rebuild stated the new one (the
        # eight-runtime test's mismatch, RFC 0020 "Not done: several runtimes on PostgreSQL").
        # Only the newest can still gain one (compactions take turns under the ledger's lock).
        self._ids = ids if not ids or ids[-1] in self._snapshots else ()
        if not self._snapshots:
            # Sealed before snapshots were recorded (or never sealed): the live state, read at
            # every request as before (not rebuildable as of an earlier position).
            self._history = None
            return ControlHistory.constant(self.control_state() if ids else None)
        # In the order sealed: each compaction reads the ledger's end under the compaction
        # lock, so the positions ascend with it.
        order = {envelope_id: i for i, envelope_id in enumerate(ids)}
        ordered = sorted(self._snapshots.values(),
                         key=lambda s: (s.ledger_pos, order.get(s.envelope_id, len(ids))))
        self._history = ControlHistory(tuple(s.ledger_pos for s in ordered), tuple(ControlState(
            envelope_id=s.envelope_id, obligations=s.obligations, constraints=s.constraints,
            blocking=s.blocking) for s in ordered))
        return self._history


def has_continuity_state(path: str | Path) -> bool:
    """True when the SQLite file holds at least one sealed envelope (read-only check)."""
    try:
        db = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error:
        return False
    try:
        row = db.execute("SELECT 1 FROM sqlite_master WHERE type='table' "
                         "AND name='continuity_envelopes'").fetchone()
        return row is not None and db.execute(
            "SELECT 1 FROM continuity_envelopes LIMIT 1").fetchone() is not None
    except sqlite3.Error:
        return False
    finally:
        db.close()
