"""The figures a session projector derives from the ledger, pinned to what their docstrings say
(issue 23, "tests that pin the session path"): the history's growth per turn over the last
``GROWTH_TURNS`` turns, the low-water mark as the root of RFC 0025's equation, and a request's
``tail_tokens`` when the tail outweighs the rest of the request.

Each figure is checked against an independent computation (a bisection, not the closed form; a
sum over the store's own records per turn), on ledgers shaped so that a window one turn too
wide or too narrow, a cap not applied or a bound not held gives another figure."""

from __future__ import annotations

import math

import holon_ctx
from holon_ctx.ledger.memory import MemoryStore
from holon_ctx.ledger.records import Environment, Turn, WorkItem
from holon_ctx.ledger.store import LedgerStore
from holon_ctx.projection.base.model import Form
from holon_ctx.projection.planning.sections import environment_blocks
from holon_ctx.projection.session.session import Layout, SessionProjector
from holon_ctx.projection.session.session_epochs import GROWTH_TURNS, MIN_LOW_WATER, RECORD_OVERHEAD
from holon_ctx.projection.session.session_state import SessionPolicy


def _ledger(sizes: list[int]) -> LedgerStore:
    """One turn per size: an operator message of that many words (distinct turns)."""
    session = holon_ctx.open_session(":memory:", compaction=None)
    for i, words in enumerate(sizes):
        session.operator_message(f"turn {i}: " + " ".join(f"w{i}x{k}" for k in range(words)))
    return session.store


def _turn_cost(store: LedgerStore, seq: int, cap: int, end: int) -> int:
    """What one turn adds to the history, as ``_growth`` counts it: each record's body capped
    as the history caps it, plus a label's worth."""
    return sum(min(s.tokens, cap) + RECORD_OVERHEAD for s in store.records_of_turns(seq, seq, end))


def _turn_seqs(store: LedgerStore) -> list[int]:
    return [r.seq for r in store.iter_records() if isinstance(r, Turn)]


def test_growth_is_the_mean_over_the_last_growth_turns_turns_capped() -> None:
    """The window is exactly ``GROWTH_TURNS`` turns: the oldest turn in it is large (capped at
    ``entry_share`` of the budget), the one before it larger still, the rest small; a window of
    one turn fewer or more, an uncapped body or a sum divided by another count differ."""
    assert (GROWTH_TURNS, RECORD_OVERHEAD) == (16, 12)
    budget = 2000
    sizes = [900, 700, *([5] * (GROWTH_TURNS - 1))]
    store = _ledger(sizes)
    projector = SessionProjector(store)
    end = store.end_pos()
    cap = int(budget * projector.session.entry_share)
    seqs = _turn_seqs(store)
    window = seqs[-GROWTH_TURNS:]
    costs = [_turn_cost(store, seq, cap, end) for seq in window]
    # The ledger is shaped as meant: the window's oldest turn is capped, and it differs from the
    # small turns, as the turn before the window differs from it.
    assert max(s.tokens for s in store.records_of_turns(window[0], window[0], end)) > cap
    assert costs[0] > costs[1] == costs[-1]
    assert _turn_cost(store, seqs[0], 10**9, end) > costs[0]
    assert projector._growth(budget, end) == sum(costs) / GROWTH_TURNS
    # As of an earlier position: the window ends at the newest turn before it.
    limit = store.records_of_turns(seqs[8], seqs[8], end)[-1].pos + 1
    early = [_turn_cost(store, seq, cap, limit) for seq in seqs[:9]]
    assert projector._growth(budget, limit) == sum(early) / 9


def test_growth_of_a_ledger_without_turns_is_zero() -> None:
    store = holon_ctx.open_session(":memory:", compaction=None).store
    assert SessionProjector(store)._growth(1000, store.end_pos()) == 0.0


def _root(rho_gamma: float) -> float:
    """The share x in (0, 1] with x² + ρ·γ·x = 1, by bisection (not the closed form)."""
    lo, hi = 0.0, 1.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if mid * mid + rho_gamma * mid > 1:
            hi = mid
        else:
            lo = mid
    return lo


def test_the_low_water_mark_is_the_root_of_the_papers_equation() -> None:
    """Between the floor and the ceiling the mark is ``int(budget · x)`` where ``x² + ρ·γ·x = 1``
    (RFC 0025, decision 2); a slow history gives the ceiling and a history growing by about the
    budget a turn the floor, ``MIN_LOW_WATER`` of the budget."""
    assert MIN_LOW_WATER == 0.1  # "never below a tenth of the budget"
    dear = SessionPolicy(cache_read=0.1, cache_write=5.0)  # a body capped at entry_share
    # (a quarter of the budget) still makes the root fall below the floor at this premium
    seen = set()
    for words, budget, policy in [(3, 100_000, SessionPolicy()), (60, 6000, SessionPolicy()),
                                  (150, 8000, SessionPolicy()), (400, 1500, SessionPolicy()),
                                  (400, 1500, dear), (150, 4000, dear)]:
        rho = 2 * (policy.cache_write - policy.cache_read) / policy.cache_read
        store = _ledger([words] * 20)
        projector = SessionProjector(store, session=policy)
        end = store.end_pos()
        gamma = projector._growth(budget, end) / budget
        share = _root(rho * gamma)
        mark = projector._low_water(budget, end)
        ceiling = int(budget * policy.low_water)
        if share >= policy.low_water:
            assert mark == ceiling
            seen.add("ceiling")
        elif share <= MIN_LOW_WATER:
            assert mark == int(budget * MIN_LOW_WATER)
            seen.add("floor")
        else:
            assert abs(mark - budget * share) <= 1.0, (words, budget, mark, budget * share)
            assert mark < ceiling
            seen.add("root")
    assert seen == {"ceiling", "floor", "root"}


def test_the_low_water_mark_follows_the_policys_ceiling_and_prices() -> None:
    """A lower ``low_water`` lowers a slow history's mark to it; cache prices with a larger
    write premium lower a fast history's mark (ρ grows)."""
    store = _ledger([3] * 20)
    end = store.end_pos()
    assert SessionProjector(store, session=SessionPolicy(low_water=0.3))._low_water(
        100_000, end) == 30_000
    fast = _ledger([150] * 20)
    end = fast.end_pos()
    cheap = SessionProjector(fast, session=SessionPolicy(cache_read=0.1, cache_write=0.5))
    dear = SessionProjector(fast, session=SessionPolicy(cache_read=0.1, cache_write=2.5))
    assert dear._low_water(3000, end) < cheap._low_water(3000, end) < 3000 * 0.5


def _obligations_ledger(waits: int) -> holon_ctx.Session:
    """A session whose sealed envelope holds ``waits`` pending obligations: the tail states them
    all (the governed state), while the history is a few short turns."""
    session = holon_ctx.open_session(":memory:", compaction=holon_ctx.CompactionPolicy(
        recent_turns=2, every_turns=1000))
    session.operator_message("Watch these.")
    for i in range(waits):
        session.open_wait(f"w{i}", f"build {i} " + "x" * 300)
    for _ in range(2):
        session.operator_message("note")
        session.assistant_message("ok")
    session.compact()
    return session


def test_tail_tokens_is_the_tails_cost_when_the_tail_outweighs_the_rest() -> None:
    """``tail_tokens`` is what the tail adds to the request: the request's tokens less the
    frozen and appended parts. Checked where the tail is larger than everything before it (a
    remainder or any other figure that agrees with the difference only while the tail is the
    smaller part would differ here), in both layouts, against the tail part itself and against
    the next request's cached prefix."""
    session = _obligations_ledger(20)
    control = session._upkeep.control_source()
    for layout in (Layout.TEXT, Layout.MESSAGES):
        projector = SessionProjector(session.store, layout=layout, control=control)
        first = projector.request(budget_tokens=20_000)
        assert first.has_tail
        assert "pending obligations" in first.parts[-1].text
        body = first.request_tokens - first.tail_tokens
        assert first.tail_tokens > body, "the ledger is shaped so the tail outweighs the rest"
        if layout is Layout.TEXT:
            assert first.tail_tokens == first.parts[-1].text_tokens
        session.operator_message("one more")
        second = projector.request(budget_tokens=20_000)
        assert not second.replanned
        # The next request reads back everything the first sent but its tail.
        assert second.cached_tokens == body
    session.close()


def test_the_environment_is_whole_in_a_planned_epoch_up_to_entry_share_of_the_budget() -> None:
    """Whole when its full form takes at most ``entry_share`` of the budget (exactly that share
    included), else its compact lines: decided by the budget and the record alone."""
    session = holon_ctx.open_session(":memory:", compaction=None)
    session.set_environment(guidance="Run the tests before every commit. " * 20,
                            workspace="/srv/app", capabilities=["bash", "edit"])
    session.operator_message("start")
    store = session.store
    projector = SessionProjector(store)
    end = store.end_pos()
    env = store.latest_environment(end)
    assert env is not None
    _, full, _ = environment_blocks(env, projector.renderer)
    tokens = projector.renderer.rendered(full).tokens
    share = projector.session.entry_share
    exact = math.ceil(tokens / share)
    assert tokens <= exact * share
    assert projector._environment_form(exact, end) is Form.FULL
    assert projector._environment_form(exact - 1, end) is Form.COMPACT
    empty = holon_ctx.open_session(":memory:", compaction=None)
    empty.operator_message("no environment")
    assert SessionProjector(empty.store)._environment_form(10_000, empty.store.end_pos()) is None


def test_an_epoch_is_whole_only_right_after_the_ledgers_first_turn() -> None:
    """Whole (RFC 0025) when it starts right after the first turn record, with nothing but
    environments before it; not after a later record, nor with another record before the turn,
    nor when the policy turns whole histories off."""
    session = holon_ctx.open_session(":memory:", compaction=None)
    session.set_environment(workspace="/srv/app")
    session.operator_message("first")
    session.operator_message("second")
    store = session.store
    turns = [s for s in store.records_between(0, store.end_pos()) if isinstance(s.record, Turn)]
    projector = SessionProjector(store)
    first = turns[0].pos
    assert projector._opens_ledger(first + 1)
    assert not projector._opens_ledger(first + 2)  # past the turn's message
    assert not projector._opens_ledger(first)  # before the turn
    assert not projector._opens_ledger(turns[1].pos + 1)  # the second turn
    assert not SessionProjector(store, session=SessionPolicy(whole_history=False))._opens_ledger(
        first + 1)
    # An environment and another record before the first turn: not whole.
    other = MemoryStore()
    other.append([Environment(id="e0", workspace="/srv/app"),
                  WorkItem(id="w1", work_item_id="a", objective="before any turn"),
                  Turn(id="t2", seq=0, trigger="operator_input")])
    assert not SessionProjector(other)._opens_ledger(3)
    alone = MemoryStore()
    alone.append([Environment(id="e0", workspace="/srv/app"),
                  Turn(id="t1", seq=0, trigger="operator_input")])
    assert SessionProjector(alone)._opens_ledger(2)
