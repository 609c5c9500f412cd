"""When a session compacts by itself (issue 29 item 2, RFC 0024): every ``every_turns`` turns, and
while the budget binds every ``binding_turns`` — a batch of aged-out turns per compaction, not
a compaction before every request for the one turn that aged out; aged-out turns still become
episodes within that many turns (RFC 0013)."""

from __future__ import annotations

from pathlib import Path

import pytest
from provider_counts import agent_loop

import holon_ctx
from holon_ctx.compaction import CompactionResult
from holon_ctx.errors import InputError
from holon_ctx.ledger.memory import MemoryStore
from holon_ctx.ledger.records import Turn
from holon_ctx.session_upkeep import Upkeep


@pytest.mark.parametrize("binding_turns", [1, 4, 6])
def test_compaction_runs_once_per_batch_while_the_budget_binds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, binding_turns: int) -> None:
    runs: list[CompactionResult] = []
    real = Upkeep.compact

    def counted(self: Upkeep, policy: holon_ctx.CompactionPolicy) -> CompactionResult:
        runs.append(real(self, policy))
        return runs[-1]

    monkeypatch.setattr(Upkeep, "compact", counted)
    policy = holon_ctx.CompactionPolicy(recent_turns=4, every_turns=16,
                                        binding_turns=binding_turns)
    with holon_ctx.open_session(tmp_path / "a.db", compaction=policy) as session:
        binding = 0
        for step in agent_loop(session, 48, seed=11):
            request = session.next_request(1500)
            if step < 8:
                continue  # the window fills first
            binding += request.manifest["sections"] and any(
                s["omitted"] for s in request.manifest["sections"])
        turns = session._turn.seq if session._turn is not None else 0
        episodes = session._upkeep.episodes.count()
        # The horizon of the last compaction: the oldest turn of the recent window it kept.
        horizon = session.store.get(runs[-1].archive.horizon or "")
        assert horizon is not None
        last_horizon = horizon.turn_seq or 0
    assert binding >= 30, "the budget binds for most of the loop"
    # One compaction per batch of new turns while it binds (at most one more for the remainder).
    assert len(runs) <= turns // binding_turns + 1
    assert len(runs) >= (binding - 1) // binding_turns
    # ... and the aged-out turns still become episodes: the last compaction archived up to a
    # window that is a batch behind the newest turn at most.
    assert episodes > 0
    assert last_horizon >= turns - policy.recent_turns - binding_turns


def test_binding_turns_is_checked() -> None:
    with pytest.raises(InputError, match="binding_turns"):
        holon_ctx.CompactionPolicy(binding_turns=0)


def _counted_compactions(monkeypatch: pytest.MonkeyPatch) -> list[CompactionResult]:
    """Every compaction the session runs (by itself or when told), in order."""
    runs: list[CompactionResult] = []
    real = Upkeep.compact

    def counted(self: Upkeep, policy: holon_ctx.CompactionPolicy) -> CompactionResult:
        runs.append(real(self, policy))
        return runs[-1]

    monkeypatch.setattr(Upkeep, "compact", counted)
    return runs


def _binds(request: holon_ctx.Request) -> bool:
    return any(s["omitted"] for s in request.manifest["sections"])


def test_compaction_runs_when_every_turns_turns_were_appended_and_not_before(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A budget that never binds: the session compacts before the request that follows the
    ``every_turns``-th new turn (not the one before, not the one after), counts again from a
    compaction it was told to run, and ``binding_turns`` plays no part (issue 23)."""
    runs = _counted_compactions(monkeypatch)
    policy = holon_ctx.CompactionPolicy(recent_turns=2, every_turns=3, binding_turns=1)
    seen: list[int] = []
    with holon_ctx.open_session(MemoryStore(), compaction=policy) as session:
        for i in range(10):
            session.operator_message(f"note {i}")
            request = session.next_request(100_000)
            assert not _binds(request)
            seen.append(len(runs))
        assert seen == [0, 0, 1, 1, 1, 2, 2, 2, 3, 3]
        session.compact()  # counts from here: three more turns, not two
        assert len(runs) == 4
        for i in range(3):
            session.operator_message(f"after {i}")
            session.next_request(100_000)
            seen.append(len(runs))
    assert seen[-3:] == [4, 4, 5]


def test_while_the_budget_binds_compaction_runs_every_binding_turns(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Once a request left something out, the session compacts before the request that follows
    the ``binding_turns``-th new turn, long before ``every_turns``; the first request of a
    session (nothing known to bind yet) does not compact however many turns came before it
    (issue 23)."""
    runs = _counted_compactions(monkeypatch)
    policy = holon_ctx.CompactionPolicy(recent_turns=2, every_turns=100, binding_turns=2)
    long = " ".join(f"word{k}" for k in range(300))
    binds: list[bool] = []
    seen: list[int] = []
    with holon_ctx.open_session(MemoryStore(), compaction=policy) as session:
        for i in range(6):
            session.operator_message(f"turn {i}: {long}")
        for i in range(6, 12):
            request = session.next_request(1500)
            binds.append(_binds(request))
            seen.append(len(runs))
            session.operator_message(f"turn {i}: {long}")
    assert all(binds)
    # Request 1: six turns appended but nothing known to bind; request 2: seven turns since
    # the start, compacts; then one turn (no), two turns (yes), …
    assert seen == [0, 1, 1, 2, 2, 3]


def test_a_replay_call_in_a_turn_the_ledger_does_not_hold_archives_nothing() -> None:
    """``ReplayCompaction.before_call`` given a turn id its ledger does not hold (a call point
    of another ledger) counts it as the turn of the last compaction: nothing is archived and
    nothing fails; the schedule then goes on by the ledger's own turns."""
    from holon_ctx.session_upkeep import CompactionPolicy, ReplayCompaction

    store = MemoryStore()
    with holon_ctx.open_session(store, compaction=None) as session:
        for i in range(6):
            session.operator_message(f"turn {i}: make module_{i} handle empty input")
    grown = ReplayCompaction(store, CompactionPolicy(recent_turns=2, every_turns=3))
    grown.before_call("no-such-turn", False)
    assert (grown.archived_at, grown.schedule.last_seq) == ([], -1)
    newest = store.latest_turn(store.end_pos())
    assert newest is not None
    assert isinstance(newest.record, Turn)
    grown.before_call(newest.record.id, False)
    assert grown.archived_at == [newest.record.seq]


def _turn_per_open(path: Path, turns: int, *, reopen: bool) -> list[str]:
    """A runtime that opens the session for each turn (a serverless handler, a job per wake)
    when ``reopen``, else one that keeps it open; the episodes archived at the end."""
    policy = holon_ctx.CompactionPolicy(recent_turns=4, every_turns=8)
    session = holon_ctx.open_session(path, compaction=policy)
    for i in range(turns):
        if reopen and i:
            session.close()
            session = holon_ctx.open_session(path, compaction=policy)
        session.operator_message(f"Step {i}: migrate table t{i} and keep its ids.")
        session.next_request(100_000)
    episodes = [e.id for e in session._upkeep.episodes.iter_episodes()]
    session.close()
    return episodes


def test_a_session_opened_for_each_turn_compacts_as_one_kept_open(tmp_path: Path) -> None:
    """The schedule goes on from the archive, not from the open: a runtime that opens the
    session for every turn used to count from zero at each open and never compact (no episode
    after 40 turns). With a budget that never binds it archives what a session kept open does."""
    kept = _turn_per_open(tmp_path / "kept.db", 40, reopen=False)
    reopened = _turn_per_open(tmp_path / "reopened.db", 40, reopen=True)
    assert len(kept) >= 2
    assert reopened == kept


def test_a_reopened_session_compacts_no_later_than_every_turns_after_its_archive(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A session opened on a ledger with nothing archived counts from the first turn (its first
    request past ``every_turns`` compacts, as a new session's would); with an archive, from
    the turn its last compaction ran in at the latest (the archive's last turn plus
    ``recent_turns``)."""
    runs = _counted_compactions(monkeypatch)
    policy = holon_ctx.CompactionPolicy(recent_turns=4, every_turns=8)
    path = tmp_path / "a.db"
    with holon_ctx.open_session(path, compaction=None) as session:
        for i in range(20):
            session.operator_message(f"Step {i}: migrate table t{i}.")
    with holon_ctx.open_session(path, compaction=policy) as session:
        session.next_request(100_000)
        assert len(runs) == 1  # twenty turns, nothing archived: compacts at once
        last = session._upkeep.episodes.last()
        assert last is not None
    with holon_ctx.open_session(path, compaction=policy) as session:
        frontier = last.span.last_seq + policy.recent_turns
        while session._turn is not None and session._turn.seq < frontier + policy.every_turns - 1:
            session.operator_message("more")
            session.next_request(100_000)
            assert len(runs) == 1
        session.operator_message("one more")
        session.next_request(100_000)
        assert len(runs) == 2
