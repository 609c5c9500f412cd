"""A session's refusal states a budget that works (Session.next_request, BudgetTooSmallError).

A runtime told "need N tokens" retries with N. The layers below report a floor (the planner's
pinned minimum, the message framing), which fell short: on a one-message session a budget of 5
was told 12, 12 was refused asking 22, and the request was made only at 38. The refusal now tries
budgets until one is made and states that one (docs/library.md, "Budgets").
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest
from generated_turns import agent_turn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tiers import sized

import holon_ctx
from holon_ctx.ledger.memory import MemoryStore


def _history(session: holon_ctx.Session, seed: int, turns: int) -> None:
    rng, waits = random.Random(seed), []  # type: list[str]
    for i in range(turns):
        agent_turn(session, i, rng, waits)
    if turns == 0:
        session.operator_message("word " * rng.randint(1, 400))


@pytest.mark.scaled
@settings(max_examples=sized(25, 120), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**16), turns=st.integers(0, 6), budget=st.integers(1, 400))
def test_the_need_a_refusal_states_makes_the_request(seed: int, turns: int, budget: int) -> None:
    """Refused at ``budget``, the session states a need above it, not as a floor, and a request
    at that need is made, by the same session and by a new one on the same ledger."""
    store = MemoryStore()
    session = holon_ctx.open_session(store, compaction=None)
    _history(session, seed, turns)
    try:
        made = session.next_request(budget)
    except holon_ctx.BudgetTooSmallError as refused:
        stated: holon_ctx.BudgetTooSmallError | None = refused
    else:
        assert made.budget_tokens == budget
        return
    assert stated is not None
    need = stated.required_tokens
    assert need > budget
    assert stated.available_tokens == budget
    assert not stated.at_least
    assert "at least" not in str(stated)
    assert session.next_request(need).budget_tokens == need
    again = holon_ctx.open_session(store, compaction=None)
    assert again.next_request(need).budget_tokens == need


def test_the_need_is_the_smallest_budget_on_a_session_whose_plans_grow_with_the_budget(
        tmp_path: Path) -> None:
    """On a one-message session every budget from the need up is made and the one below it is
    refused: the search halves down to the lowest budget made, not the first the climb hit."""
    def fresh() -> holon_ctx.Session:
        session = holon_ctx.open_session(MemoryStore(), compaction=None)
        session.operator_message("Upgrade the payments service to Python 3.12.")
        return session

    with pytest.raises(holon_ctx.BudgetTooSmallError) as refused:
        fresh().next_request(5)
    need = refused.value.required_tokens
    with pytest.raises(holon_ctx.BudgetTooSmallError):
        fresh().next_request(need - 1)
    for budget in range(need, need + 20):
        assert fresh().next_request(budget).budget_tokens == budget


@given(least=st.integers(1, 200_000), start=st.integers(1, 200_000),
       overshoot=st.integers(0, 50), shortfall=st.integers(0, 50))
def test_the_search_states_a_budget_made_within_its_slack_of_the_least(
        least: int, start: int, overshoot: int, shortfall: int) -> None:
    """On a threshold (every budget from ``least`` up is made), with refusals whose reported
    need falls short or overshoots, the need stated is made and at most ``need // SLACK`` above
    the least: the precision traded for walks is bounded (need.py)."""
    from holon_ctx.errors import BudgetTooSmallError
    from holon_ctx.projection.session.need import SLACK, stated_need

    if start >= least:
        return
    tried: list[int] = []

    def made(tokens: int) -> int | None:
        tried.append(tokens)
        if tokens >= least:
            return None
        return max(1, least - shortfall if tokens % 2 else least + overshoot)

    refusal = BudgetTooSmallError(least - shortfall or 1, start, "the pinned references")
    need = stated_need(refusal, made).required_tokens
    assert least <= need <= least + max(1, least // SLACK)
    # Exact where the slack rounds to a token: small needs are the least.
    if need < 2 * SLACK:
        assert need == least
    assert len(tried) <= 24


def _recorded(answer: Callable[[int], int | None]
              ) -> tuple[list[int], Callable[[int], int | None]]:
    """``made`` for stated_need that records each budget tried and answers ``answer(tokens)``."""
    tried: list[int] = []

    def made(tokens: int) -> int | None:
        tried.append(tokens)
        return answer(tokens)
    return tried, made


@pytest.mark.parametrize(("budget", "reported"),
                         [(100, 1), (100, 40), (100, 99), (100, 100), (101, 7), (101, 101)])
def test_a_refusal_reporting_no_more_than_its_budget_tries_above_it(budget: int,
                                                                     reported: int) -> None:
    """A layer below may report a need at or under the budget it refused (a floor that falls
    short): the search starts one token above the refused budget, never at or under it, and
    states a whole number of tokens. An odd budget too (``budget | 1`` is the budget itself)."""
    from holon_ctx.errors import BudgetTooSmallError
    from holon_ctx.projection.session.need import SLACK, stated_need

    least = 130
    tried, made = _recorded(lambda tokens: None if tokens >= least else tokens + 1)
    stated = stated_need(BudgetTooSmallError(reported, budget, "the framing"), made)
    assert tried[0] == budget + 1
    assert min(tried) > budget
    assert type(stated.required_tokens) is int
    assert least <= stated.required_tokens <= least + max(1, least // SLACK)
    assert (stated.available_tokens, stated.what, stated.at_least) == (budget, "the framing",
                                                                       False)


def test_reports_that_creep_are_replaced_by_a_step_that_grows_to_doubling() -> None:
    """A refusal reporting no more than a slack above the budget refused says little: the next
    try is a step of 1/16 of that budget (at least a token), doubled with each such refusal in a
    row up to doubling the budget, so refusals that report one token more still reach the made
    budget in a few tries."""
    from holon_ctx.errors import BudgetTooSmallError
    from holon_ctx.projection.session.need import stated_need

    least = 1000
    tried, made = _recorded(lambda tokens: None if tokens >= least else tokens + 1)
    stated_need(BudgetTooSmallError(11, 10, "the pinned references"), made)
    climb = tried[:tried.index(next(t for t in tried if t >= least)) + 1]
    assert climb == [11, 12, 13, 16, 24, 48, 96, 192, 384, 768, 1536]


@pytest.mark.parametrize("budget", [40, 320, 3200])
def test_a_report_more_than_a_slack_above_the_try_is_tried_as_it_is(budget: int) -> None:
    """The slack that marks a report as creeping is ``need // SLACK`` tokens, at least one: a
    report one token more than that is tried as it is, try after try (two tokens above a try
    under 64 is such a report), while one exactly a slack above is replaced by the step of 1/16
    of the try (at 320, a report of 330 is followed by a try at 341)."""
    from holon_ctx.errors import BudgetTooSmallError
    from holon_ctx.projection.session.need import SLACK, stated_need

    def slack(tokens: int) -> int:
        return max(1, tokens // SLACK)

    least = budget * 8
    tried, made = _recorded(lambda t: None if t >= least else t + slack(t) + 1)
    stated_need(BudgetTooSmallError(budget + 1, budget, "the pinned references"), made)
    assert tried[:6] == [budget + 1, *(t + slack(t) + 1 for t in tried[:5])]
    tried, made = _recorded(lambda t: None if t >= least else t + slack(t))
    stated_need(BudgetTooSmallError(budget + 1, budget, "the pinned references"), made)
    assert tried[1] == tried[0] + max(1, tried[0] >> 4) > tried[0] + slack(tried[0])


def test_a_refusal_below_asking_more_than_the_budget_made_is_confirmed_a_slack_below() -> None:
    """On the way down, a refusal that reports more than the lowest budget made (not only
    exactly it) makes that budget likely the need: the next try is a slack below it, not a
    halving, and refused there the search ends."""
    from holon_ctx.errors import BudgetTooSmallError
    from holon_ctx.projection.session.need import stated_need

    # Made from 300; every refusal reports 310. 150 refused; 310 made; 301 (a slack below) made;
    # 225 (halving) refused asking 310 > 301: 292, a slack below 301, refused ends it.
    tried, made = _recorded(lambda tokens: None if tokens >= 300 else 310)
    stated = stated_need(BudgetTooSmallError(150, 100, "the pinned references"), made)
    assert tried == [150, 310, 301, 225, 292]
    assert (stated.required_tokens, stated.at_least) == (301, False)


def test_the_climb_tries_each_refusals_report_and_makes_one_request() -> None:
    """A session's refusals report the floor of the turn its walk stopped at, the next try
    passes that turn and stops at a later one: the climb tries each floor reported, however
    close (here 3 % apart, less than doubling's step), and the first try made is the need;
    its refusal below having asked for it, one refusal a slack below ends the search. One
    request made in all (on the demo a made try costs 4-20 refused ones)."""
    from holon_ctx.errors import BudgetTooSmallError
    from holon_ctx.projection.session.need import SLACK, stated_need

    floors = [112, 183, 204, 252, 268, 313, 334, 415, 440, 456, 472, 488, 572, 607, 682, 722,
              812]
    tried, made = _recorded(lambda tokens: next((f for f in floors if f > tokens), None))
    stated = stated_need(BudgetTooSmallError(112, 100, "the pinned references"), made)
    assert tried == [*floors, 812 - 812 // SLACK]
    assert [t for t in tried if t >= floors[-1]] == [812]
    assert (stated.required_tokens, stated.at_least) == (812, False)


def test_a_made_budget_below_the_one_asked_for_is_searched_down_by_halving() -> None:
    """When the try a slack below the budget made is made too, the search halves between the
    highest refused and the lowest made (no second try a slack below: on a report far too high
    that would step down a slack at a time)."""
    from holon_ctx.errors import BudgetTooSmallError
    from holon_ctx.projection.session.need import stated_need

    tried, made = _recorded(lambda tokens: None if tokens >= 300 else 1000)
    stated = stated_need(BudgetTooSmallError(200, 100, "the pinned references"), made)
    # 200 refused asks 1000; 1000 made; 969 (a slack below) made; then halves from (200, 969].
    assert tried[:5] == [200, 1000, 969, 584, 392]
    assert 300 <= stated.required_tokens <= 300 + 300 // 32


def test_a_reported_need_above_twice_the_try_is_taken_as_it_is() -> None:
    """A refusal that reports more than twice the budget refused is tried at what it reports."""
    from holon_ctx.errors import BudgetTooSmallError
    from holon_ctx.projection.session.need import stated_need

    tried, made = _recorded(lambda tokens: None if tokens >= 500 else 500)
    stated = stated_need(BudgetTooSmallError(12, 10, "the pinned references"), made)
    assert tried[:2] == [12, 500]
    assert stated.required_tokens == 500


@pytest.mark.parametrize("reported", [0, 10**9])
def test_when_the_tries_run_out_the_need_is_stated_as_a_floor(reported: int) -> None:
    """Past ``TRIES`` refusals and none made, the need is stated "at least": above the last
    budget refused and at least what its refusal reported, for the budget first refused."""
    from holon_ctx.errors import BudgetTooSmallError
    from holon_ctx.projection.session.need import TRIES, stated_need

    tried, made = _recorded(lambda _tokens: reported)
    stated = stated_need(BudgetTooSmallError(7, 5, "the pinned references"), made)
    assert len(tried) == TRIES
    assert stated.at_least
    assert stated.required_tokens == max(reported, tried[-1] + 1)
    assert (stated.available_tokens, stated.what) == (5, "the pinned references")
    assert "need at least" in str(stated)


def test_a_need_made_at_the_last_try_up_is_not_a_floor() -> None:
    """A request made on the last of the ``TRIES`` budgets tried upward states that budget
    (not "at least"); one refusal fewer than ``TRIES`` leaves the search going."""
    from holon_ctx.errors import BudgetTooSmallError
    from holon_ctx.projection.session.need import TRIES, stated_need

    tried, made = _recorded(lambda tokens: None if len(tried) >= TRIES else tokens + 1)
    stated = stated_need(BudgetTooSmallError(2, 1, "the pinned references"), made)
    assert not stated.at_least
    assert len(tried) >= TRIES
    assert stated.required_tokens <= tried[TRIES - 1]


def test_a_need_reported_far_too_high_is_halved_down_to_the_least() -> None:
    """A refusal may overshoot by orders of magnitude (a floor from another plan): the search
    then halves from that figure down to within ``need // SLACK`` of the least budget made, in
    the ``TRIES`` halvings it allows, rather than stating a budget thousands of times larger."""
    from holon_ctx.errors import BudgetTooSmallError
    from holon_ctx.projection.session.need import SLACK, TRIES, stated_need

    least = 100
    tried, made = _recorded(lambda tokens: None if tokens >= least else 1_000_000)
    stated = stated_need(BudgetTooSmallError(11, 10, "the pinned references"), made)
    assert least <= stated.required_tokens <= least + max(1, least // SLACK)
    assert not stated.at_least
    assert len(tried) <= 2 * TRIES


@pytest.mark.parametrize(("least", "floor"), [(8192, False), (3_670_017, True)])
def test_creeping_reports_reach_4096_times_the_first_figure_in_16_tries(
        least: int, floor: bool) -> None:
    """With refusals that report one token more, the climb from the first figure tried (2)
    finds a request made at 4,096 times it within 16 tries; one made only past the last of the
    ``TRIES`` budgets tried upward (3,670,016) is stated as a floor (need.py's ``TRIES``)."""
    from holon_ctx.errors import BudgetTooSmallError
    from holon_ctx.projection.session.need import SLACK, TRIES, stated_need

    tried, made = _recorded(lambda tokens: None if tokens >= least else tokens + 1)
    stated = stated_need(BudgetTooSmallError(2, 1, "the pinned references"), made)
    assert stated.at_least is floor
    assert tried[0] == 2
    if floor:  # a floor: above every budget refused, and no budget made is below it
        assert len(tried) == TRIES
        assert max(tried) < stated.required_tokens <= least
    else:
        assert len([t for t in tried[:16] if t < least]) < 16
        assert least <= stated.required_tokens <= least + least // SLACK


def _agent_session(seed: int, turns: int) -> tuple[MemoryStore, holon_ctx.Session]:
    store = MemoryStore()
    session = holon_ctx.open_session(store, compaction=None)
    _history(session, seed, turns)
    return store, session


def test_a_text_refused_near_the_messages_floor_states_its_own_need() -> None:
    """The text is laid out on its own (headers, trust labels) and can need more than the
    messages: at 140 the messages are made and the text refused; the need its refusal states is
    the text's, and a retry with it reads a text within it, in this session and a new one."""
    store, session = _agent_session(0, 3)
    request = session.next_request(140)
    assert request.request_tokens <= 140
    with pytest.raises(holon_ctx.BudgetTooSmallError) as refused:
        _ = request.text
    need = refused.value.required_tokens
    assert need > 140
    assert not refused.value.at_least
    for retry in (session, holon_ctx.open_session(store, compaction=None)):
        again = retry.next_request(need)
        assert again.text
        assert again.used_tokens <= need


def _made_with_text(session: holon_ctx.Session, budget: int) -> holon_ctx.Request:
    """``next_request(budget, text=True)``, checked: both layouts within the budget."""
    made = session.next_request(budget, text=True)
    assert made.request_tokens <= budget
    assert made.text
    assert made.used_tokens <= budget
    return made


def test_a_request_asked_with_text_states_a_need_both_layouts_meet() -> None:
    """Asked with ``text=True`` at the budget whose messages were made but whose text was not,
    the request is refused at once, with a need at which both the messages and the text are
    made (by this session and by a new one)."""
    store, session = _agent_session(0, 3)
    with pytest.raises(holon_ctx.BudgetTooSmallError) as refused:
        session.next_request(140, text=True)
    need = refused.value.required_tokens
    assert need > 140
    assert refused.value.available_tokens == 140
    for retry in (session, holon_ctx.open_session(store, compaction=None)):
        _made_with_text(retry, need)


@pytest.mark.scaled
@settings(max_examples=sized(20, 100), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**16), turns=st.integers(0, 6), budget=st.integers(1, 400))
def test_with_text_the_need_stated_makes_both_layouts(seed: int, turns: int,
                                                      budget: int) -> None:
    """Asked with ``text=True``, a request is made with both layouts within the budget, or
    refused with a need above it (not a floor) at which both are made, in a new session too."""
    store, session = _agent_session(seed, turns)
    try:
        _made_with_text(session, budget)
    except holon_ctx.BudgetTooSmallError as refused:
        stated: holon_ctx.BudgetTooSmallError | None = refused
    else:
        return
    assert stated is not None
    need = stated.required_tokens
    assert need > budget
    assert not stated.at_least
    _made_with_text(session, need)
    _made_with_text(holon_ctx.open_session(store, compaction=None), need)


def test_text_must_be_a_flag() -> None:
    """``text`` is True or False: anything else is refused at the call, naming the argument."""
    _, session = _agent_session(0, 1)
    with pytest.raises(holon_ctx.InputError, match="next_request: text: expected True or False"):
        session.next_request(400, text="yes")  # type: ignore[arg-type]


def test_the_reads_a_request_keeps_never_change_its_need(monkeypatch: pytest.MonkeyPatch) -> None:
    """What re-plans read at each position is kept for the request (session_epochs
    ``PREPARED_POSITIONS``): the need stated and the request made at it are the same with none
    kept, and nothing is kept once the request returns or raises."""
    from holon_ctx.projection.session import session_epochs

    store, _ = _agent_session(3, 4)

    def need_and_text(cap: int) -> tuple[int, str]:
        monkeypatch.setattr(session_epochs, "PREPARED_POSITIONS", cap)
        session = holon_ctx.open_session(store, compaction=None)
        with pytest.raises(holon_ctx.BudgetTooSmallError) as refused:
            session.next_request(60, text=True)
        made = session.next_request(refused.value.required_tokens, text=True)
        for projector in session._projectors.values():
            assert not projector._prepared
        return refused.value.required_tokens, made.text

    assert need_and_text(0) == need_and_text(session_epochs.PREPARED_POSITIONS)


def test_a_request_with_text_as_of_an_earlier_turn_is_the_one_without(tmp_path: Path) -> None:
    """``text=True`` as of an earlier turn, with compactions run since: the same messages and
    the same text as the request without it (its text read afterwards)."""
    session = holon_ctx.open_session(tmp_path / "ledger.db",
                                     compaction=holon_ctx.CompactionPolicy(recent_turns=2,
                                                                           every_turns=3))
    rng, waits = random.Random(5), []  # type: random.Random, list[str]
    for i in range(4):
        agent_turn(session, i, rng, waits)
    earlier = session.next_request(4000).current_turn
    for i in range(4, 12):
        agent_turn(session, i, rng, waits)
        session.next_request(4000)
    plain = session.next_request(4000, at=earlier)
    with_text = session.next_request(4000, at=earlier, text=True)
    assert with_text.current_turn == plain.current_turn == earlier
    assert with_text.openai_messages == plain.openai_messages
    assert with_text.text == plain.text
