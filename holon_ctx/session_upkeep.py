"""What a session keeps beside its ledger: episodes, governed control state, and when to compact.

A :class:`~holon_ctx.Session` compacts by itself under a :class:`CompactionPolicy`: every
``every_turns`` new turns (``binding_turns`` while the budget binds), before the next request, it
archives the turn ranges older than the recent window into episodes (RFC 0003) and, unless told
not to, seals a continuity envelope for them (RFC 0005), so obligations, exact constraints and
unreconciled side effects stay pinned in every later prompt. ``Session(..., compaction=None)``
never compacts by itself; ``session.compact()`` still does on request.

Where the derived stores live (:func:`open_upkeep`): beside a SQLite ledger, in its own file (the
tables the CLI uses, so ``holon-ctx episodes list --db`` shows them); beside a PostgreSQL ledger,
in its database under the same session key; beside any other store, in memory unless the caller
passes its own. Episodes are derived data: an in-memory episode store is rebuilt after a restart
on the first compaction (cost O(archived turns) once).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import attrs

from holon_ctx.compaction import (
    CompactionResult,
    GovernedControl,
    SessionConfig,
    compact,
    has_continuity_state,
)
from holon_ctx.continuity import ContinuityStore
from holon_ctx.errors import InputError
from holon_ctx.ledger.episode_store import (
    MemoryEpisodeStore,
    SqliteEpisodeStore,
    has_episode_tables,
)
from holon_ctx.ledger.records import Turn
from holon_ctx.ledger.sqlite import SqliteStore
from holon_ctx.ledger.store import LedgerStore
from holon_ctx.ledger.transcript_build import AGENT_STEP
from holon_ctx.memory import ArchivePolicy, Archiver, EpisodeStore, StoreEpisodeSource
from holon_ctx.postgres import PostgresStore
from holon_ctx.projection.rendering.episode_forms import form_counts_maker

__all__ = ["CompactionPolicy", "CompactionSchedule", "ReplayCompaction", "StoresBeside", "Upkeep",
           "open_upkeep"]


@attrs.frozen
class CompactionPolicy:
    """When a session compacts by itself, and what it keeps out of episodes."""

    #: The newest turns that are never archived (at least 2). Older turns are archived into
    #: episodes; a recalled episode stands for the turns it covers, the rest stay turns (RFC 0013).
    recent_turns: int = 16
    #: Compact before the next request once this many turns were appended since the last time.
    every_turns: int = 16
    #: While the budget binds (the last request left something out), compact as soon as this
    #: many turns were appended since the last time: aged-out turns then compete as episodes
    #: within a few turns (RFC 0013), and each compaction archives a range of them rather than
    #: running before every request for the one turn that aged out (RFC 0024: one compaction
    #: costs about half a turn at 10k messages; four turns per compaction is a quarter of the
    #: default recent window).
    binding_turns: int = 4
    #: Also seal a continuity envelope (governed control state, RFC 0005); False archives only.
    seal_envelope: bool = True

    def __attrs_post_init__(self) -> None:
        for name in ("recent_turns", "every_turns", "binding_turns"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError(f"expected a positive integer, got {value!r}",
                                 source="CompactionPolicy", path=name)
        if self.recent_turns < 2:
            raise InputError(f"the recent window must be at least 2 turns, got "
                             f"{self.recent_turns}", source="CompactionPolicy",
                             path="recent_turns")
        if not isinstance(self.seal_envelope, bool):
            raise InputError(f"expected True or False, got {self.seal_envelope!r}",
                             source="CompactionPolicy", path="seal_envelope")


@attrs.define
class CompactionSchedule:
    """When a session compacts by itself, before a request: once ``every_turns`` turns were
    opened since the last compaction, or ``binding_turns`` while the budget binds (the last
    request left something out) — RFC 0024 decision 3. Turns are counted by their sequence
    numbers, so a session and a replay of its ledger (``holon-ctx replay``, which grows the
    episodes the session would have) compact at the same turns: one rule, one code path."""

    #: The newest turn's seq at the last compaction (-1: none yet, counted from the first turn).
    last_seq: int = -1
    #: The last request's plan left something out.
    binds: bool = False

    def due(self, policy: CompactionPolicy, seq: int) -> bool:
        """Compact before a request made in turn ``seq``."""
        since = seq - self.last_seq
        return since >= policy.every_turns or (self.binds and since >= policy.binding_turns)

    def compacted(self, seq: int) -> None:
        """A compaction ran in turn ``seq`` (by itself or asked for)."""
        self.last_seq = seq

    @classmethod
    def resumed(cls, policy: CompactionPolicy | None, episodes: EpisodeStore,
                seq: int | None) -> CompactionSchedule:
        """The schedule of a session opened on a ledger whose newest turn is ``seq``.

        The count goes on from the archive, not from the open: a runtime that opens the session
        for each turn (a serverless handler, a job per wake, a crash-restart loop) would
        otherwise never reach ``every_turns`` and never compact. The archive says where the
        last compaction ran, at the latest: one that archived through turn F ran in turn
        F + ``recent_turns`` or later. With nothing archived the count starts at the first
        turn, as a new session's does, so the first request past ``every_turns`` compacts (and
        rebuilds episodes kept in memory). Either way a session compacts no later than one
        that never stopped; it may compact sooner, never skips one."""
        if seq is None or policy is None:
            return cls(last_seq=-1 if seq is None else seq)
        last = episodes.last()
        if last is None:
            return cls(last_seq=-1)
        return cls(last_seq=min(seq, last.span.last_seq + policy.recent_turns))


@attrs.define
class Upkeep:
    """The derived stores of one session and the compaction step over them."""

    ledger: LedgerStore
    episodes: EpisodeStore
    continuity: ContinuityStore | None
    identity: SessionConfig
    clock: Callable[[], datetime]
    #: The SQLite ledger's file, when the derived stores live beside it.
    path: str | None = None
    #: Stores opened here (closed with the session); stores passed in belong to the caller.
    owned: list[EpisodeStore | ContinuityStore] = attrs.Factory(list)

    def recall_source(self) -> StoreEpisodeSource:
        # As of the position each request projects (RFC 0020): continue == rebuild.
        return StoreEpisodeSource(self.episodes, self.ledger, as_of_position=True)

    def control_source(self) -> GovernedControl | None:
        if self.continuity is None:
            return None
        return GovernedControl(self.continuity, self.identity.session_id)

    def compact(self, policy: CompactionPolicy) -> CompactionResult:
        """Archive aged-out turn ranges and (per policy) seal an envelope for them."""
        # Each new episode's form counts are made as it is archived and stored beside it: a
        # re-plan recalling it later, in any process, tokenizes little of it (RFC 0024 d. 6).
        archiver = Archiver(self.ledger, self.episodes,
                            policy=ArchivePolicy(recent_turns=policy.recent_turns),
                            forms=form_counts_maker(self.ledger))
        if not policy.seal_envelope:
            return CompactionResult(archiver.archive(), None, (), ())
        if self.continuity is None:
            # A session opened without sealing, asked to seal: the governed store opens now.
            self.continuity = (ContinuityStore(self.path) if self.path is not None
                               else ContinuityStore.in_memory())
            self.owned.append(self.continuity)
        return compact(self.ledger, self.episodes, self.continuity, session=self.identity,
                       clock=self.clock, archiver=archiver)

    def close(self) -> None:
        for store in self.owned:
            store.close()
        self.owned.clear()


def open_upkeep(ledger: LedgerStore, *, policy: CompactionPolicy | None,
                episodes: EpisodeStore | None, continuity: ContinuityStore | None,
                identity: SessionConfig | None,
                clock: Callable[[], datetime] | None) -> Upkeep:
    """The derived stores for ``ledger`` (see the module docstring for where they live)."""
    owned: list[EpisodeStore | ContinuityStore] = []
    sealing = policy is not None and policy.seal_envelope
    path = ledger.path if isinstance(ledger, SqliteStore) and ledger.path != ":memory:" else None
    if isinstance(ledger, PostgresStore):
        # The same database and session key: imported here, psycopg is already loaded.
        from holon_ctx.postgres.continuity import PostgresContinuityBackend  # noqa: PLC0415
        from holon_ctx.postgres.episodes import PostgresEpisodeStore  # noqa: PLC0415

        if episodes is None:
            episodes = PostgresEpisodeStore(ledger.connection, session=ledger.session)
            owned.append(episodes)
        if continuity is None:
            continuity = ContinuityStore(PostgresContinuityBackend(ledger.connection,
                                                                   session=ledger.session))
            owned.append(continuity)
    if episodes is None:
        episodes = SqliteEpisodeStore(path) if path is not None else MemoryEpisodeStore()
        owned.append(episodes)
    if continuity is None and path is not None and (sealing or has_continuity_state(path)):
        continuity = ContinuityStore(path)
        owned.append(continuity)
    elif continuity is None and sealing:
        continuity = ContinuityStore.in_memory()
        owned.append(continuity)
    return Upkeep(ledger=ledger, episodes=episodes, continuity=continuity,
                  identity=identity or SessionConfig(),
                  clock=clock or (lambda: datetime.now(UTC)), path=path, owned=owned)


@attrs.frozen
class StoresBeside:
    """The episode and governed stores beside a database ledger, opened one at a time, for a
    tool that reads or compacts a ledger it did not open as a session (the CLI's commands).
    :func:`open_upkeep` makes the same choice of place for a session, but opens both at once and
    always has an episode store; a read-only command must not create tables a file lacks."""

    ledger: LedgerStore

    def episodes(self, *, create: bool) -> EpisodeStore | None:
        """The episode store; None for a ledger that is not in a database, and when ``create``
        is False and nothing was archived yet."""
        store = self.ledger
        if isinstance(store, SqliteStore):
            if not create and not has_episode_tables(store.path):
                return None
            return SqliteEpisodeStore(store.path, create=create)
        if isinstance(store, PostgresStore):
            from holon_ctx.postgres.episodes import PostgresEpisodeStore  # noqa: PLC0415

            if not create and not store.holds("holon_episodes"):
                return None
            return PostgresEpisodeStore(store.connection, session=store.session)
        return None

    def continuity(self, *, create: bool = True) -> ContinuityStore | None:
        """The governed store; None for a ledger that is not in a database, and when ``create``
        is False and no compaction sealed an envelope yet."""
        store = self.ledger
        if isinstance(store, SqliteStore):
            if not create and not has_continuity_state(store.path):
                return None
            # The governed store waits for other writers as long as the ledger does (RFC 0006).
            return ContinuityStore(store.path, timeout=store.lock_timeout)
        if isinstance(store, PostgresStore):
            from holon_ctx.postgres.continuity import PostgresContinuityBackend  # noqa: PLC0415

            if not create and not store.holds("holon_continuity_envelopes"):
                return None
            return ContinuityStore(PostgresContinuityBackend(store.connection,
                                                             session=store.session))
        return None


class ReplayCompaction:
    """Episodes grown along a ``replay`` of a file's ledger as a library session grows them:
    before a call, when the session's schedule (:class:`CompactionSchedule`, the same object
    a session keeps) says the session would compact there — ``every_turns`` turns since the
    last time, ``binding_turns`` while the previous call's plan left something out — every turn
    but the newest ``recent_turns`` is archived (in memory). The turn a call is made in is the
    session's at that call: a reply that opens an agent-step turn was asked for in the turn
    before it (the runtime asked, then appended the reply). A replay whose budget never binds
    archives every ``every_turns`` turns as a session does."""

    def __init__(self, store: LedgerStore, policy: CompactionPolicy | None = None) -> None:
        self.store = store
        self.policy = policy or CompactionPolicy()
        self.episodes = MemoryEpisodeStore()
        self.source = StoreEpisodeSource(self.episodes, store)
        self._archiver = Archiver(store, self.episodes, policy=ArchivePolicy(
            recent_turns=self.policy.recent_turns))
        self.schedule = CompactionSchedule()
        self._last_turn: str | None = None
        #: The seq of each call's turn at which an archive ran (what a session's compactions
        #: are compared with).
        self.archived_at: list[int] = []

    def before_call(self, turn: str, binds: bool) -> None:
        seq = self._seq(turn)
        self._last_turn = turn
        self.schedule.binds = binds
        if self.schedule.due(self.policy, seq):
            self._archiver.archive(at=turn)
            self.schedule.compacted(seq)
            self.archived_at.append(seq)

    def _seq(self, turn: str) -> int:
        """The seq of the turn the session was in when it asked for this call."""
        stored = self.store.turn(turn)
        if stored is None or not isinstance(stored.record, Turn):
            return self.schedule.last_seq
        seq = stored.record.seq
        if turn != self._last_turn and stored.record.trigger == AGENT_STEP:
            return seq - 1  # opened by the reply this call asked for
        return seq
