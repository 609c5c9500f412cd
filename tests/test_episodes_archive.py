"""Archival: coverage, digests, idempotence, rebuild and incremental equivalence, as properties."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import ledgers
from test_episodes_kit import Conv, archived, make_stores, policy

from holon_ctx.errors import InputError, StoreError
from holon_ctx.ledger.episode_store import MemoryEpisodeStore
from holon_ctx.ledger.memory import MemoryStore
from holon_ctx.ledger.records import Record, SideEffect, Tool, ToolStatus, Turn
from holon_ctx.memory.archiver import ArchivePolicy, Archiver, WouldArchive
from holon_ctx.memory.boundaries import BoundaryPolicy
from holon_ctx.memory.builder import build_episode
from holon_ctx.memory.episodes import encode_episode, source_digest
from holon_ctx.memory.index import index_episode
from holon_ctx.memory.store import EpisodeStore
from holon_ctx.memory.unresolved import call_key, resolves

_SETTINGS = settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow,
                                                             HealthCheck.function_scoped_fixture])


def _turn_ids(records: list[Record]) -> list[str]:
    return [r.id for r in records if isinstance(r, Turn)]


def _dump(store: EpisodeStore) -> list[bytes]:
    return [encode_episode(ep) for ep in store.iter_episodes()]


def _check_invariants(ledger: MemoryStore, store: EpisodeStore, archiver: Archiver,
                      turn_ids: list[str]) -> None:
    eps = list(store.iter_episodes())
    covered = [t for ep in eps for t in ep.turn_ids]
    # Every turn is covered by at most one episode, and episodes tile a prefix of the turns.
    assert len(covered) == len(set(covered))
    assert covered == turn_ids[: len(covered)]
    for ep in eps:
        assert ep.id == f"e{ep.span.first_seq}-{ep.span.last_seq}"
        assert ep.turn_ids[0] == ep.span.first_turn.removeprefix("turn:")
        assert ep.turn_ids[-1] == ep.span.last_turn.removeprefix("turn:")
        # The digest verifies against the ledger: recomputed from the records it names.
        records = [ledger.get(ref) for ref in ep.source_refs]
        assert all(r is not None for r in records)
        assert source_digest(r.record for r in records if r is not None) == ep.digest
        assert archiver.verify_episode(ep) is None
        # Every claim names at least one ref.
        for field in (ep.operator_intents, ep.decisions, ep.results, ep.artifact_trail,
                      ep.unresolved, ep.model_inferences):
            assert all(c.refs for c in field)
        # A pending tool call or unknown/partial side effect still open at the end of the range
        # is never archived without its unresolved item.
        keys = {u.key for u in ep.unresolved}
        open_keys: set[str] = set()
        for r in records:
            assert r is not None
            rec = r.record
            if isinstance(rec, Tool):
                open_keys -= set(resolves(rec, r.ref))
                if rec.status is ToolStatus.PENDING:
                    open_keys.add(f"call:{call_key(rec, r.ref)}")
                if rec.side_effect in (SideEffect.UNKNOWN, SideEffect.PARTIAL):
                    open_keys.add(f"effect:{call_key(rec, r.ref)}")
        assert open_keys <= keys


@_SETTINGS
@given(records=ledgers(min_turns=2, max_turns=24, max_records_per_turn=4),
       recent=st.integers(2, 6), max_range=st.integers(1, 6), step=st.integers(1, 5))
def test_incremental_archiving_equals_one_shot_and_rebuild_is_byte_identical(
        records: list[Record], recent: int, max_range: int, step: int) -> None:
    """Archiving every few turns, archiving once, and rebuilding give the same bytes; every
    turn is in at most one episode and every digest verifies against the ledger."""
    ledger = MemoryStore()
    ledger.append(records)
    turns = _turn_ids(records)
    pol = policy(recent, max_range)
    inc = MemoryEpisodeStore()
    incremental = Archiver(ledger, inc, policy=pol)
    for i in range(0, len(turns), step):
        incremental.archive(at=turns[i])
    incremental.archive()
    once_store = MemoryEpisodeStore()
    once = Archiver(ledger, once_store, policy=pol)
    once.archive()
    assert _dump(inc) == _dump(once_store)
    _check_invariants(ledger, inc, incremental, turns)
    # Idempotent per range: archiving again adds nothing.
    before = _dump(inc)
    assert incremental.archive().archived == ()
    assert _dump(inc) == before
    report = incremental.rebuild()
    assert report.identical
    assert _dump(inc) == before
    # Nothing inside the recent window is archived, and of the turns older than it only the last
    # range, still open (no boundary or cap has closed it), may wait: fewer than max_range turns.
    covered = [t for ep in inc.iter_episodes() for t in ep.turn_ids]
    aged = max(0, len(turns) - recent)
    assert len(covered) <= aged
    assert aged - len(covered) < max_range
    assert inc.count() == len(list(inc.iter_episodes()))


@settings(max_examples=12, suppress_health_check=[HealthCheck.too_slow])
@given(records=ledgers(min_turns=3, max_turns=16, max_records_per_turn=4),
       max_range=st.integers(1, 4))
def test_sqlite_and_memory_episode_stores_hold_the_same_bytes(records: list[Record],
                                                              max_range: int) -> None:
    """A SQLite ledger and episode store archive exactly what the in-memory pair archives."""
    with tempfile.TemporaryDirectory() as tmp:
        dumps = []
        for kind in ("memory", "sqlite"):
            ledger, store = make_stores(kind, Path(tmp))
            ledger.append(records)
            Archiver(ledger, store, policy=policy(2, max_range)).archive()
            dumps.append(_dump(store))
            if kind == "sqlite":
                rebuilt = Archiver(ledger, store, policy=policy(2, max_range)).rebuild()
                assert rebuilt.identical
                assert _dump(store) == dumps[0]
            store.close()
            ledger.close()
        assert dumps[0] == dumps[1]


def test_nothing_is_archived_inside_the_recent_window() -> None:
    """With fewer turns than the recent window, nothing ages out."""
    c = Conv()
    for i in range(5):
        c.operator(f"note {i} about the billing ledger and its replication settings")
    _, episodes, archiver = archived(c.records, recent=8)
    assert episodes.count() == 0
    assert archiver.archive().archived == ()


def test_the_last_open_range_waits_for_its_boundary() -> None:
    """A range still growing at the horizon is not archived until a boundary closes it."""
    c = Conv()
    for i in range(12):
        c.operator(f"billing replication step {i}: keep the billing replica in sync")
    _, episodes, _ = archived(c.records, recent=2, max_range=16)
    assert episodes.count() == 0
    _, episodes, _ = archived(c.records, recent=2, max_range=4)
    assert [e.id for e in episodes.iter_episodes()] == ["e0-3", "e4-7"]


def test_a_run_not_archiving_stops_at_the_first_range_that_closes() -> None:
    """``archive(archiving=False)`` (a compaction tried without its lock, RFC 0026 decision 13)
    raises WouldArchive naming the first turn of the first range that closes, having stored
    nothing; where nothing closes it reports what ``archive()`` reports."""
    c = Conv()
    for i in range(12):
        c.operator(f"billing replication step {i}: keep the billing replica in sync")
    ledger, episodes = make_stores("memory")
    ledger.append(c.records)
    archiver = Archiver(ledger, episodes, policy=policy(recent=2, max_range=4))
    with pytest.raises(WouldArchive, match="turn:"):
        archiver.archive(archiving=False)
    assert episodes.count() == 0
    first = archiver.archive()
    assert [e.id for e in episodes.iter_episodes()] == ["e0-3", "e4-7"]
    assert archiver.archive(archiving=False) == archiver.archive() != first


def test_a_turn_is_never_covered_twice_by_the_store() -> None:
    """Appending an episode that overlaps a stored one is refused; the same bytes are skipped."""
    c = Conv()
    for i in range(8):
        c.operator(f"billing replication step {i}: keep the billing replica in sync")
    ledger, episodes, _ = archived(c.records, recent=2, max_range=2)
    first = episodes.get("e0-1")
    assert first is not None
    assert episodes.append([index_episode(first)]) == 0
    units = []
    from holon_ctx.projection.planning.view import _single  # a TurnUnit of one turn, as the view builds it

    for tid in ("t1", "t2"):
        turn = ledger.turn(tid)
        assert turn is not None
        units.append(_single(ledger, turn, ledger.end_pos()))
    overlapping = build_episode(units, closed_by="max_range")
    with pytest.raises(StoreError, match="at most one episode"):
        episodes.append([index_episode(overlapping)])


def test_changing_the_boundary_policy_requires_a_rebuild() -> None:
    """Archiving with another max range than the stored episodes were built with is refused."""
    c = Conv()
    for i in range(10):
        c.operator(f"billing replication step {i}: keep the billing replica in sync")
    ledger, episodes, _ = archived(c.records, recent=2, max_range=2)
    other = Archiver(ledger, episodes, policy=policy(2, 3))
    with pytest.raises(InputError, match="rebuild"):
        other.archive()
    report = other.rebuild()
    assert not report.identical
    assert {e.id for e in episodes.iter_episodes()} == {"e0-2", "e3-5"}


def test_verify_reports_an_episode_that_no_longer_matches() -> None:
    """A stored episode whose digest differs from the ledger's is reported by verify."""
    import msgspec

    c = Conv()
    for i in range(8):
        c.operator(f"billing replication step {i}: keep the billing replica in sync")
    ledger, _, _ = archived(c.records, recent=2, max_range=2)
    forged_store = MemoryEpisodeStore()
    archiver = Archiver(ledger, forged_store, policy=policy(2, 2))
    archiver.archive()
    ep = forged_store.get("e0-1")
    assert ep is not None
    forged = msgspec.structs.replace(ep, digest="sha256:" + "0" * 64)
    assert "digest mismatch" in (archiver.verify_episode(forged) or "")
    assert archiver.verify().problems == ()


def test_archive_policy_refuses_a_recent_window_below_two() -> None:
    """The look-ahead turn must itself be settled, so the recent window is at least two turns."""
    with pytest.raises(InputError):
        ArchivePolicy(recent_turns=1)
    with pytest.raises(ValueError, match="max_range_turns"):
        BoundaryPolicy(max_range_turns=0)


def test_archiving_cost_reads_only_the_new_range() -> None:
    """A second archive run reads the ledger only from the frontier on (bounded reads)."""
    c = Conv()
    for i in range(40):
        c.operator(f"billing replication step {i}: keep the billing replica in sync")
    ledger, episodes, archiver = archived(c.records, recent=4, max_range=4)
    turns_read: set[int] = set()
    by_turns, between = ledger.records_of_turns, ledger.records_between

    def spy_turns(lo: int, hi: int, limit_pos: int):  # type: ignore[no-untyped-def]
        found = by_turns(lo, hi, limit_pos)
        turns_read.update(range(lo, hi + 1))
        return found

    def spy_between(lo: int, hi: int):  # type: ignore[no-untyped-def]
        found = between(lo, hi)
        turns_read.update(s.turn_seq for s in found if s.turn_seq is not None)
        return found

    ledger.records_of_turns = spy_turns  # type: ignore[method-assign]
    ledger.records_between = spy_between  # type: ignore[method-assign]
    c.records.clear()
    for i in range(4):
        c.operator(f"billing replication follow-up {i}: keep the billing replica in sync")
    ledger.append(c.records)
    archiver.archive()
    # The new range, the range still open before it and the look-ahead turn, never the 40 old.
    assert 0 < len(turns_read) <= 9
    assert episodes.count() == 10
