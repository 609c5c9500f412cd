"""Continue == rebuild at every ledger position, across compactions (RFC 0020, docs/session.md).

A runtime's ``Session`` compacts as it goes: it archives turns into episodes and seals envelopes
whose governed state (obligations, constraints, blocking side effects) the requests state. A
session projection reads both *as of the position it projects*: the control snapshot recorded
with the newest envelope sealed at or before it, and the episodes archived at or before it. So a
rebuild (the persisted walk state deleted, the ledger walked again from its first turn) asked at
the positions the runtime asked at gives the same requests, byte for byte: OpenAI messages and
manifest, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import random
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from generated_turns import agent_turn
from tiers import sized

import holon_ctx
from holon_ctx.compaction import GovernedControl
from holon_ctx.continuity import ContinuityStore
from holon_ctx.ledger.sqlite import SqliteStore
from holon_ctx.ledger.store import LedgerStore
from holon_ctx.memory import EpisodeStore
from holon_ctx.projection.session.session import Layout

#: Compaction every two turns with a window of three: many envelopes and episodes per run.
POLICY = holon_ctx.CompactionPolicy(recent_turns=3, every_turns=2, binding_turns=2)
TURNS = sized(30, 80)


def _check(open_store: Callable[[], LedgerStore], seed: int) -> None:
    rng = random.Random(seed)
    # Small budgets: the budget binds, so the runtime compacts every two turns and re-plans.
    budget = rng.choice([1800, 2400, 3000])
    waits: list[str] = []
    made: list[tuple[int, int, object, bytes]] = []
    with holon_ctx.Session(open_store(), compaction=POLICY, owns_store=True) as runtime:
        for i in range(TURNS):
            agent_turn(runtime, i, rng, waits)
            request = runtime.next_request(budget_tokens=budget)
            messages = request._messages
            made.append((messages.limit_pos, request.planned_tokens,
                         messages.openai_messages(), messages.manifest_json()))
        upkeep = runtime._upkeep
        assert upkeep.continuity is not None
        assert len(upkeep.continuity.envelope_ids(upkeep.identity.session_id)) >= 3, \
            "it compacted"
    with holon_ctx.Session(open_store(), compaction=None, owns_store=True) as fresh:
        projector = fresh._projectors[Layout.MESSAGES]
        for planned in {p for _, p, _, _ in made}:
            projector.rebuild(budget_tokens=planned)
        for i, (pos, planned, messages, manifest) in enumerate(made):
            again = projector.request(budget_tokens=planned, limit_pos=pos)
            assert again.openai_messages() == messages, (seed, i, pos)
            assert again.manifest_json() == manifest, (seed, i, pos)


@pytest.mark.scaled
@pytest.mark.parametrize("seed", range(sized(2, 6)))
def test_a_rebuilt_sqlite_session_gives_the_runtimes_requests(tmp_path: Path, seed: int) -> None:
    """SQLite: every request of a compacting runtime, asked again after a rebuild."""
    db = tmp_path / "ledger.db"
    _check(lambda: SqliteStore(db), seed)


@pytest.mark.scaled
@pytest.mark.parametrize("seed", range(sized(1, 4)))
def test_a_rebuilt_postgres_session_gives_the_runtimes_requests(pg_url: str, pg_session_key: str,
                                                                seed: int) -> None:
    """PostgreSQL: the same, on one session key."""
    from holon_ctx.postgres import PostgresStore

    _check(lambda: PostgresStore(pg_url, session=f"{pg_session_key}-{seed}"), seed)


def test_the_governed_state_is_read_as_of_the_position(tmp_path: Path) -> None:
    """A compaction's control snapshot holds from the ledger end it was sealed at: a request as
    of an earlier position states the state before it, and a rebuild does too."""
    db = tmp_path / "ledger.db"
    with holon_ctx.open_session(db, compaction=None) as session:
        session.operator_message("deploy the service")
        session.open_wait("ci", "CI run for the deploy")
        for i in range(4):
            session.operator_message(f"and then step {i}")
        before = session.store.end_pos()
        session.compact(holon_ctx.CompactionPolicy(recent_turns=2))
        upkeep = session._upkeep
        assert upkeep.continuity is not None
        control = GovernedControl(upkeep.continuity, upkeep.identity.session_id)
        history = control.control_history()
        sealed = history.at(before)
        assert sealed is not None
        assert sealed.obligations, "the open wait is an obligation"
        assert history.at(before - 1) is None
        session.operator_message("one more")
        projector = session._projectors[Layout.TEXT]
        projector.rebuild(budget_tokens=4000)
        early = projector.request(budget_tokens=4000, limit_pos=before - 1).text
        late = projector.request(budget_tokens=4000).text
    # The governed notice names the envelope its state was sealed with.
    assert f"envelope {sealed.envelope_id}" not in early
    assert f"envelope {sealed.envelope_id}" in late


def test_a_snapshot_committed_after_its_envelope_is_read_on_the_next_request(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """PostgreSQL commits an envelope and its control snapshot apart: a request between the two
    sees the envelope and no snapshot. The next request reads the snapshot (the history was kept
    as complete before, and a continuing runtime stated the older state until another envelope
    was sealed while a rebuild stated the new one: the eight-runtime test's mismatch)."""
    import holon_ctx.compaction as compaction_module

    db = tmp_path / "ledger.db"
    policy = holon_ctx.CompactionPolicy(recent_turns=2)
    with holon_ctx.open_session(db, compaction=None) as session:
        session.operator_message("deploy the service")
        session.open_wait("build", "the build for the deploy")
        for i in range(4):
            session.operator_message(f"and then step {i}")
        session.compact(policy)
        upkeep = session._upkeep
        assert upkeep.continuity is not None
        control = GovernedControl(upkeep.continuity, upkeep.identity.session_id)
        first = control.control_history().states[-1]
        assert first is not None
        session.open_wait("ci", "CI run for the deploy")
        for i in range(4):
            session.operator_message(f"and then more {i}")
        end = session.store.end_pos()
        newest = session.compact(policy).envelope_id
        assert newest is not None
        assert newest != first.envelope_id
        read = compaction_module.control_snapshots

        def in_flight(store: object, sid: str, envelope_id: str | None = None) -> object:
            # The newest envelope is committed, its snapshot not yet.
            return () if envelope_id == newest else read(store, sid, envelope_id)  # type: ignore[arg-type]
        monkeypatch.setattr(compaction_module, "control_snapshots", in_flight)
        before = control.control_history().at(end)
        assert before is not None
        assert before.envelope_id == first.envelope_id
        monkeypatch.setattr(compaction_module, "control_snapshots", read)
        sealed = control.control_history().at(end)
        assert sealed is not None
        assert sealed.envelope_id == newest, "the snapshot is read once committed"
        assert len(sealed.obligations) > len(first.obligations), "the second wait is stated"


def test_governed_notices_are_bounded_with_many_open_waits(tmp_path: Path) -> None:
    """Sixty open waits become sixty obligations: the notice lists ten, counts the other fifty
    and names the envelope that holds them all, instead of growing with every wait."""
    from holon_ctx.projection.planning.sections import GOVERNED_ITEMS

    with holon_ctx.open_session(tmp_path / "ledger.db", compaction=None) as session:
        session.operator_message("start")
        for i in range(60):
            session.open_wait(f"w{i}", f"CI run {i}")
        for i in range(4):
            session.operator_message(f"and then step {i}")
        result = session.compact(holon_ctx.CompactionPolicy(recent_turns=2))
        assert len(result.obligations) == 60
        text = session.next_request(budget_tokens=16000).text
    listed = [line for line in text.splitlines() if "archived in episode:" in line]
    assert len(listed) == GOVERNED_ITEMS
    assert f"- and {60 - GOVERNED_ITEMS} more obligations: all are held in the governed " \
           f"store, envelope {result.envelope_id}" in text


def test_a_compactions_state_never_lands_behind_a_position_already_read(
        pg_url: str, pg_session_key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """PostgreSQL: another runtime appends while a compaction runs (after it read the ledger's
    end) and reads the archive and the governed state at its new end before the compaction has
    committed them. What it read there is what anyone reads there afterwards (a rebuild): the
    archive run and the control snapshot are stamped with the ledger's end when they commit,
    appends waiting for the commit. Stamped with the end the compaction read at its start, both
    landed behind the other runtime's position: the eight-runtime test's continue != rebuild on
    PostgreSQL (RFC 0020)."""
    from holon_ctx.postgres import PostgresStore
    from holon_ctx.postgres.continuity import PostgresContinuityBackend
    from holon_ctx.postgres.episodes import PostgresEpisodeStore

    other = PostgresStore(pg_url, session=pg_session_key)
    try:
        _check_never_behind(
            monkeypatch, other, PostgresEpisodeStore(other.connection, session=pg_session_key),
            ContinuityStore(PostgresContinuityBackend(other.connection, session=pg_session_key)),
            lambda: PostgresStore(pg_url, session=pg_session_key))
    finally:
        other.close()


def test_a_compactions_state_never_lands_behind_a_position_already_read_on_sqlite(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLite: the same, with the other runtime's stores on their own connections to the file.
    The archive run was stamped with the end the archiver read at its start (RFC 0020's "Not
    done: SQLite"), so the other runtime's read after the archive's commit saw no new episode
    where a rebuild sees them; the run is now stamped with the end read inside the episode
    store's write transaction, which holds the file's one write lock (appends wait)."""
    from holon_ctx.ledger.episode_store import SqliteEpisodeStore

    db = tmp_path / "ledger.db"
    other = SqliteStore(db)
    other_archive = SqliteEpisodeStore(db)
    # Its own connection, usable from the other runtime's thread (as the other two stores').
    governed_db = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    other_governed = ContinuityStore(governed_db)
    try:
        _check_never_behind(monkeypatch, other, other_archive, other_governed,
                            lambda: SqliteStore(db))
    finally:
        other_governed.close()
        governed_db.close()
        other_archive.close()
        other.close()


def _check_never_behind(monkeypatch: pytest.MonkeyPatch, other: LedgerStore,
                        other_archive: EpisodeStore, other_governed: ContinuityStore,
                        open_store: Callable[[], LedgerStore]) -> None:
    """A compaction whose archive and snapshot writes each let ``other`` (a second runtime on
    the same ledger, with its own stores) append a turn, read the state at its end and append
    one more record just before the write commits; then what ``other`` read at each position is
    what is read there afterwards."""
    import holon_ctx.compaction as compaction_module
    from holon_ctx.continuity.snapshots import control_snapshots
    from holon_ctx.ledger.records import Message, MessageRole, Turn

    seen: list[tuple[int, int, int]] = []
    runs: list[threading.Thread] = []
    sid: list[str] = []

    def state_at(end: int) -> tuple[int, int, int]:
        snapshots = control_snapshots(other_governed, sid[0])
        return (end, other_archive.archived_by(end),
                sum(1 for s in snapshots if s.ledger_pos <= end))

    def other_runtime() -> None:
        # A turn, the state read at its end, and another record: the compaction's next stamp
        # is then past the position read (the same position would be a tie, a compaction
        # made after a request with nothing appended between: a new state there, RFC 0020).
        n = len(seen)
        other.append([Turn(id=f"o{n}.t", seq=0, trigger="operator_input"),
                      Message(id=f"o{n}.m", turn_id=f"o{n}.t", role=MessageRole.OPERATOR,
                              text=f"meanwhile {n}")], renumber_turns=True)
        seen.append(state_at(other.end_pos()))
        other.append([Message(id=f"o{n}.r", turn_id=f"o{n}.t", role=MessageRole.ASSISTANT,
                              text="noted")])

    def meanwhile(write: Callable[..., object]) -> Callable[..., object]:
        def wrapped(*args: object, **kwargs: object) -> object:
            # The other runtime runs while this write is about to commit: it either finishes
            # first (its appends not held) or waits for the commit (held: the join times out).
            run = threading.Thread(target=other_runtime)
            run.start()
            run.join(timeout=1.0)
            runs.append(run)
            return write(*args, **kwargs)
        return wrapped

    def settled(step: Callable[..., object]) -> Callable[..., object]:
        def wrapped(*args: object, **kwargs: object) -> object:
            # Between the archive and the seal, nothing held: the other runtime finishes its
            # reads (SQLite hands its lock to no waiter in particular: the seal's transaction
            # would otherwise take it first and wait for the other runtime for ever).
            for run in runs:
                run.join()
            return step(*args, **kwargs)
        return wrapped

    with holon_ctx.Session(open_store(), compaction=None, owns_store=True) as session:
        sid.append(session._upkeep.identity.session_id)
        session.operator_message("deploy the service")
        session.open_wait("build", "the build for the deploy")
        for i in range(4):
            session.operator_message(f"and then step {i}")
        episodes = session._upkeep.episodes
        monkeypatch.setattr(episodes, "append", meanwhile(episodes.append))
        monkeypatch.setattr(compaction_module, "_unsealed", settled(compaction_module._unsealed))
        monkeypatch.setattr(compaction_module, "record_control_snapshot",
                            meanwhile(compaction_module.record_control_snapshot))
        result = session.compact(holon_ctx.CompactionPolicy(recent_turns=2))
        assert result.envelope_id is not None
    for run in runs:
        run.join()
    assert len(seen) >= 2, "the other runtime read during the archive and the snapshot"
    assert [state_at(end) for end, _, _ in seen] == seen
    assert seen[0][1:] == (other_archive.count(), 0), "read after the archive's commit"
    assert seen[-1][1:] == (other_archive.count(), 1), "read after the snapshot's commit"
