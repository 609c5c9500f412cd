"""The rules by which a session re-plans for the operator's words (RFC 0025 decision 4, issue 25
item 3), pinned one by one (issue 23, "tests that pin the session path"): an episode recalled
for the words re-plans when it scores past *twice* what the plan weighed it at, and the words
*single out* an episode when it scores at least ``_SINGLED_OUT`` times what the episode the plan
weighed first scores for the same words — unless it is that episode, or the plan shows it in
full, or that episode was not recalled because the recall was cut at its limit.

The rules are decided from scores alone, so they are tested on scores: ``_singled_out`` on
episodes made here, ``_recall_gap`` through a projector whose episode source answers a fixed
recall (what the source would rank is another module's business, test_episodes_recall.py)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import holon_ctx
from holon_ctx.compaction import GovernedControl
from holon_ctx.errors import BudgetTooSmallError
from holon_ctx.ledger.epochs import MemoryEpochStore
from holon_ctx.ledger.facts import Priority
from holon_ctx.ledger.records import Message, Turn
from holon_ctx.memory.interface import RecalledEpisode, RecallQuery
from holon_ctx.projection.base.model import EpisodeManifest, TurnUnit
from holon_ctx.projection.base.policy import Policy
from holon_ctx.projection.session import session_epochs
from holon_ctx.projection.session.session import (
    _REWEIGH,
    _SINGLED_OUT,
    Layout,
    SessionProjector,
    _singled_out,
)
from holon_ctx.projection.session.session_state import SessionPolicy


def _recalled(ref: str, score: float, priority: Priority = Priority.HIGH) -> RecalledEpisode:
    # The episode itself is never read by these rules: only its ref, score and priority.
    return RecalledEpisode(ref=ref, covers=("turn:t1", "turn:t2"), score=score, priority=priority,
                           reasons=(), episode=None, open_keys=None)  # type: ignore[arg-type]


def _weighed(ref: str, score: float, representation: str = "omitted") -> EpisodeManifest:
    return EpisodeManifest(ref=ref, covers=["turn:t1", "turn:t2"], score=score,
                           representation=representation)


def _fresh(text: str) -> str:
    """An equal string that is another object (refs come from different decodes)."""
    return "".join(list(text))


def test_the_constants_are_those_the_rules_state() -> None:
    assert (_REWEIGH, _SINGLED_OUT) == (2.0, 3.0)


@pytest.mark.parametrize(("best", "top_now", "expected"), [
    (30.0, 10.0, True),    # exactly _SINGLED_OUT times the top episode's score: singled out
    (31.0, 10.0, True),    # more than that
    (29.9, 10.0, False),   # less
    (1.0, 0.0, True),      # the top episode scores nothing for these words
])
def test_words_single_out_an_episode_at_three_times_the_plans_first(
        best: float, top_now: float, expected: bool) -> None:
    """The best recalled episode (another than the plan's first, not shown in full) is singled
    out when it scores at least three times what the plan's first episode scores now."""
    weighed = [_weighed("episode:a", 50.0), _weighed("episode:z", 5.0)]
    recalled = [_recalled("episode:z", best)]
    everything = [*recalled, _recalled("episode:a", top_now)]
    assert _singled_out(recalled, everything, weighed, cut=False) is expected
    assert _singled_out(recalled, everything, weighed, cut=True) is expected


@pytest.mark.parametrize(("best_ref", "top_ref"), [
    ("episode:b", "episode:a"),   # the best sorts after the plan's first
    ("episode:a", "episode:b"),   # and before it
])
def test_words_single_out_an_episode_whichever_way_its_ref_sorts(best_ref: str,
                                                                  top_ref: str) -> None:
    weighed = [_weighed(top_ref, 50.0)]
    recalled = [_recalled(best_ref, 40.0)]
    everything = [*recalled, _recalled(top_ref, 1.0)]
    assert _singled_out(recalled, everything, weighed, cut=False)


@pytest.mark.parametrize("score", [0.0, 1.0, 40.0])
def test_the_plans_first_episode_is_never_singled_out_against_itself(score: float) -> None:
    """A plan that weighed the episode first already is not re-planned again for it, at any
    score (refs compared by value: the manifest's and the recall's are different objects)."""
    weighed = [_weighed("episode:a", 50.0), _weighed("episode:b", 5.0)]
    recalled = [_recalled(_fresh("episode:a"), score)]
    assert recalled[0].ref is not weighed[0].ref
    assert not _singled_out(recalled, recalled, weighed, cut=False)


def test_an_episode_the_plan_shows_in_full_is_not_singled_out() -> None:
    weighed = [_weighed("episode:a", 50.0), _weighed("episode:b", 1.0, "full")]
    recalled = [_recalled(_fresh("episode:b"), 40.0)]
    everything = [*recalled, _recalled("episode:a", 1.0)]
    assert not _singled_out(recalled, everything, weighed, cut=False)
    # Shown in another form than full, it is.
    weighed[1] = _weighed("episode:b", 1.0, "compact")
    assert _singled_out(recalled, everything, weighed, cut=False)


def test_the_plans_first_not_recalled_counts_as_no_match_only_when_the_recall_was_not_cut() -> None:
    """Not recalled for these words: no match (score 0) when the recall found fewer than its
    limit, unknown when it was cut at the limit (then nothing is singled out)."""
    weighed = [_weighed("episode:a", 50.0)]
    recalled = [_recalled("episode:b", 0.5)]
    assert _singled_out(recalled, recalled, weighed, cut=False)
    assert not _singled_out(recalled, recalled, weighed, cut=True)


def test_nothing_is_singled_out_without_a_recalled_episode_or_a_weighed_one() -> None:
    assert not _singled_out([], [_recalled("episode:a", 9.0)], [_weighed("episode:b", 1.0)],
                            cut=False)
    assert not _singled_out([_recalled("episode:a", 9.0)], [_recalled("episode:a", 9.0)], [],
                            cut=False)


# -- _recall_gap: a projector with a fixed recall ------------------------------------------------
class _FixedRecall:
    """An episode source that answers every recall with the same episodes (at most ``limit``)."""

    def __init__(self, found: list[RecalledEpisode]) -> None:
        self.found = found
        self.limits: list[int] = []

    def recall(self, query: RecallQuery, limit: int) -> list[RecalledEpisode]:
        self.limits.append(limit)
        return self.found[:limit]


def _gap(found: list[RecalledEpisode], weighed: list[EpisodeManifest]) -> tuple[str | None, Any]:
    """``_recall_gap`` for an operator's message, the plan having weighed ``weighed``."""
    session = holon_ctx.open_session(":memory:", compaction=None)
    session.operator_message("what did we decide about the cents?")
    store = session.store
    end = store.end_pos()
    records = store.records_between(0, end)
    turn = next(s for s in records if isinstance(s.record, Turn))
    owned = tuple(s for s in records if isinstance(s.record, Message))
    source = _FixedRecall(found)
    projector = SessionProjector(store, episodes=source)  # type: ignore[arg-type]
    state = SimpleNamespace(current=TurnUnit(stored=turn, records=owned), work_item_id=None,
                            manifest=SimpleNamespace(episodes=weighed))
    return projector._recall_gap(state, end), source  # type: ignore[arg-type]


@pytest.mark.parametrize(("was", "now", "replans"), [
    (10.0, 20.5, True),    # past twice the score it was left out at
    (10.0, 20.0, False),   # exactly twice: a score that merely wobbles does not re-plan
    (10.0, 15.0, False),   # raised by more than a constant, not doubled
    (1.0, 2.5, True),
    (1.0, 1.5, False),
])
def test_an_episode_left_out_re_plans_once_its_score_doubles(was: float, now: float,
                                                            replans: bool) -> None:
    """An episode the plan weighed and left out re-plans for the operator's words when it
    scores more than ``_REWEIGH`` times what it scored then."""
    found = [_recalled("episode:b", now)]
    # The plan's first episode matches these words as well as episode:b, so no singling out.
    weighed = [_weighed("episode:a", 1000.0, "full"), _weighed("episode:b", was)]
    found.append(_recalled("episode:a", now))
    why, _ = _gap(found, weighed)
    assert why == ("episode_recalled" if replans else None)


def test_an_episode_never_weighed_re_plans_at_any_score_and_one_shown_in_full_never() -> None:
    found = [_recalled("episode:c", 0.0)]
    assert _gap(found, [_weighed("episode:c", 0.0, "full")])[0] is None
    assert _gap(found, [])[0] == "episode_recalled"


def test_only_relevant_episodes_re_plan() -> None:
    """Pinned or high (RFC 0003): a normal episode scoring far past its old score does not."""
    found = [_recalled("episode:b", 99.0, Priority.NORMAL)]
    assert _gap(found, [_weighed("episode:b", 1.0)])[0] is None
    found = [_recalled("episode:b", 99.0, Priority.PINNED)]
    assert _gap(found, [_weighed("episode:b", 1.0)])[0] == "episode_recalled"


@pytest.mark.parametrize(("fewer", "replans"), [(0, False), (1, True)])
def test_a_recall_of_exactly_its_limit_was_cut(fewer: int, replans: bool) -> None:
    """The recall asks for ``policy.recall`` episodes. When it returns that many, it was cut: the
    plan's first episode missing from it is unknown, not a non-match, so the words single out
    nothing; one fewer, and it is a non-match (the best episode is singled out)."""
    limit = Policy().recall
    weighed = [_weighed("episode:top", 50.0)]
    # Each recalled episode scores no more than twice what the plan weighed it at (no
    # re-weighing): only the singling-out rule can re-plan.
    found = [_recalled(f"episode:r{i:02d}", 4.0) for i in range(limit - fewer)]
    weighed += [_weighed(f"episode:r{i:02d}", 2.0) for i in range(limit)]
    why, source = _gap(found, weighed)
    assert source.limits == [limit]
    assert why == ("episode_recalled" if replans else None)


# -- _replan_pays: the bill of a re-plan at a work-item switch or an unshown anchor --------------
def _pays_by_the_rfc(size: int, mark: int, budget: int, growth: float, read: float,
                     write: float) -> bool:
    """RFC 0025, decision 4, in its own terms: re-planned, the ``n`` calls until the history
    fills the budget read the mark instead of the history, after one call that writes it."""
    if size <= mark:
        return False  # the history is no larger than a re-plan's: nothing to save
    calls = max(1.0, (budget - size) / max(1.0, growth))
    saved = read * (size - mark) * calls
    premium = (write - read) * mark
    return saved > premium


@pytest.mark.parametrize(("read", "write"), [(0.1, 1.25), (0.5, 1.0), (0.25, 3.0)])
def test_a_replan_pays_when_the_reads_it_saves_outweigh_its_cache_write(read: float,
                                                                     write: float) -> None:
    """Across sizes of the history (the frozen part and what was appended since, both
    counted), at the provider's prices: the re-plan pays exactly when the RFC's bill says so,
    and both answers occur."""
    session = holon_ctx.open_session(":memory:", compaction=None)
    for i in range(20):
        session.operator_message(f"step {i}: " + " ".join(f"w{i}x{k}" for k in range(3 + i % 3)))
    store = session.store
    end = store.end_pos()
    policy = SessionPolicy(cache_read=read, cache_write=write)
    projector = SessionProjector(store, session=policy)
    budget = 20_000
    mark = projector._low_water(budget, end)
    growth = projector._growth(budget, end)
    assert 1 < mark < budget
    assert growth > 1
    answers = set()
    for size in range(0, budget + 500, 97):
        for appended in (0, min(size, 37), size):
            state = SimpleNamespace(budget=budget, frozen_tokens=size - appended,
                                    appended_tokens=lambda a=appended: a)
            expected = _pays_by_the_rfc(size, mark, budget, growth, read, write)
            assert projector._replan_pays(state, end) is expected, (size, appended)  # type: ignore[arg-type]
            answers.add(expected)
    assert answers == {True, False}


# -- a saved epoch is continued, not re-planned --------------------------------------------------
def test_a_new_process_continues_the_saved_epoch_that_starts_at_the_request(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The epoch a request re-planned at the ledger's very end is saved; a new process asking
    for the same request (or the next one) loads it — no re-plan, the same parts and epoch, the
    saved epoch starts kept (RFC 0024: what the preview reads is what was sent)."""
    session = holon_ctx.open_session(":memory:", compaction=None)
    session.operator_message("Write the release notes for 2.4.")
    for i in range(39):
        session.assistant_message(f"draft {i}: " + "the changelog entry reads well; " * 12)
    store = session.store
    epochs = MemoryEpochStore()
    budget = 1500
    first = SessionProjector(store, epochs=epochs).request(budget_tokens=budget)
    end = store.end_pos()
    starts = SessionProjector(store, epochs=epochs).epoch_starts(budget_tokens=budget)
    # Shaped so: the last request re-planned, and its epoch starts exactly at the ledger's end.
    assert first.replanned
    assert starts[-1].limit_pos == end == first.epoch
    planned: list[int] = []
    real = session_epochs.replan

    def counted(*args: Any, **kwargs: Any) -> Any:
        planned.append(kwargs["limit_pos"])
        return real(*args, **kwargs)

    monkeypatch.setattr(session_epochs, "replan", counted)
    second = SessionProjector(store, epochs=epochs)
    again = second.request(budget_tokens=budget)
    assert planned == []
    assert not again.replanned
    assert (again.parts, again.epoch, again.request_tokens) == (
        first.parts, first.epoch, first.request_tokens)
    assert second.epoch_starts(budget_tokens=budget) == starts
    # The next turn, in yet another process: continued from the same saved epoch.
    session.operator_message("Now the upgrade notes.")
    later = SessionProjector(store, epochs=epochs).request(budget_tokens=budget)
    assert planned == []
    assert not later.replanned
    assert later.epoch == end


# -- the plan's budget -----------------------------------------------------------------------------
def test_a_current_input_above_the_low_water_mark_is_planned_whole_when_it_fits() -> None:
    """The re-plan starts at the low-water mark and raises the plan's budget to what the pinned
    turns need in full (up to the room the tail leaves): an operator's long message that fits
    the budget is sent whole, not clipped to the mark."""
    session = holon_ctx.open_session(":memory:", compaction=None)
    for i in range(30):
        session.operator_message(f"note {i}: " + "older context about the billing job; " * 10)
        session.assistant_message(f"ack {i}")
    session.operator_message("Please apply this plan: "
                             + " ".join(f"step{k} does item{k}" for k in range(350)))
    request = SessionProjector(session.store).request(budget_tokens=3000)
    figures = request.manifest.session
    assert figures is not None
    assert request.replanned
    low_water, planned = figures["low_water_tokens"], figures["plan_budget_tokens"]
    assert isinstance(low_water, int)
    assert isinstance(planned, int)
    assert low_water < planned <= 3000
    assert "step349 does item349" in request.text
    assert "clipped" not in request.text


@pytest.mark.parametrize("layout", [Layout.TEXT, Layout.MESSAGES])
def test_a_budget_the_frozen_part_and_tail_overrun_at_every_plan_is_refused_above_it(
        layout: Layout) -> None:
    """When the planner fits its share but the frozen part and the stated tail (a long work
    item's objective) overrun the caller's budget however far the plan shrinks, the error names
    that budget and a need above it (the overrun), never a figure below the budget."""
    session = holon_ctx.open_session(":memory:", compaction=None)
    session.operator_message("go")
    session.set_work_item("w1", objective="migrate the billing tables " * 60)
    session.operator_message("continue", work_item="w1")
    with pytest.raises(BudgetTooSmallError) as caught:
        SessionProjector(session.store, layout=layout).request(budget_tokens=60)
    assert caught.value.available_tokens == 60
    assert caught.value.required_tokens > 60
    assert "only 60 available" in str(caught.value)


class _Switch:
    """A control source whose governed state the test sets (read afresh by every request)."""

    def __init__(self) -> None:
        self.state: object = None

    def control_state(self) -> object:
        return self.state


def test_a_request_holds_its_budget_when_the_governed_state_grows_after_the_walk(
        tmp_path: Path) -> None:
    """The governed state can grow with no record walked (a compaction sealed at this very
    position): the request states it in its tail and must still hold its budget, re-planning
    (``over_budget``) when the walked state and the larger tail no longer fit — at every budget
    from below the first request's size to well above it, in both layouts."""
    with holon_ctx.open_session(tmp_path / "ledger.db", compaction=None) as session:
        session.operator_message("deploy the service")
        for w in range(3):
            session.open_wait(f"ci{w}", f"CI run {w} for the deploy of the payments service")
        for i in range(6):
            session.operator_message(f"and then step {i}: " + "check the logs " * 5)
        end = session.store.end_pos()
        session.compact(holon_ctx.CompactionPolicy(recent_turns=2))
        upkeep = session._upkeep
        assert upkeep.continuity is not None
        sealed = GovernedControl(upkeep.continuity, upkeep.identity.session_id) \
            .control_history().at(end)
        assert sealed is not None
        reasons = []
        for layout in (Layout.TEXT, Layout.MESSAGES):
            for budget in range(300, 520, 7):
                switch = _Switch()
                projector = SessionProjector(session.store, control=switch, layout=layout)  # type: ignore[arg-type]
                before = projector.request(budget_tokens=budget, limit_pos=end)
                switch.state = sealed
                after = projector.request(budget_tokens=budget, limit_pos=end)
                assert after.request_tokens <= budget, (layout, budget)
                assert after.request_tokens > before.request_tokens or after.replanned
                reasons.append(after.replan_reason)
    # Shaped so: some budgets fit the larger tail as they are, others must re-plan.
    assert {None, "over_budget"} <= set(reasons)


# -- the tail of a whole epoch ---------------------------------------------------------------------
def test_a_whole_epochs_tail_follows_whether_the_history_ends_on_the_models_reply() -> None:
    """In the messages layout a whole epoch states its tail only while its history ends with
    the model's reply (a provider request must end on a user turn); a runtime note after the
    reply ends it on a user part again, and the next request — the same walk, its tail kept
    since no record that changes it was walked — sends no tail, as a fresh walk does."""
    session = holon_ctx.open_session(":memory:", compaction=None)
    session.operator_message("Summarise the incident.")
    session.assistant_message("The incident was a bad deploy.")
    projector = SessionProjector(session.store, layout=Layout.MESSAGES)
    replied = projector.request(budget_tokens=4000)
    assert replied.has_tail
    assert replied.openai_messages()[-1]["role"] == "user"
    session.runtime_note("the reply was too short; answer in three sentences")
    noted = projector.request(budget_tokens=4000)
    assert not noted.replanned
    assert not noted.has_tail
    fresh = SessionProjector(session.store, layout=Layout.MESSAGES).request(budget_tokens=4000)
    assert noted.parts == fresh.parts
