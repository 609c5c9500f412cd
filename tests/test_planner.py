"""The planner on its own (holon_ctx/projection/planning/planner.py): synthetic items with exact costs.

No ledger and no tokenizer: items are forms of given token counts, so each rule of the step order
(rounds, tiers, section shares, pinned order), the prefix rule, clipping, the lazy sources and the
reported entitlement is checked in isolation, in the style of rich's ``tests/test_ratio.py``.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from holon_ctx.errors import BudgetTooSmallError
from holon_ctx.projection.base.items import Block, Item, Rendered
from holon_ctx.projection.base.model import Form, Priority, Section
from holon_ctx.projection.planning.planner import (
    SECTION_WEIGHTS,
    Bound,
    Plan,
    entitlement,
    plan,
    step_round,
    tier_start,
)

NO_HEADERS = dict.fromkeys(Section, 0)


def form(tokens: int, *refs: str) -> Rendered:
    return Rendered(blocks=(Block(head="x\n", tokens=tokens, refs=refs),), tokens=tokens,
                    refs=refs)


def item(key: str, *, priority: Priority = Priority.NORMAL, section: Section = Section.RECENT_TURNS,
         order: int = 0, tier: int = 0, compact: int | None = None, full: int | None = 10,
         ref: int | None = None) -> Item:
    forms = {}
    if ref is not None:
        forms[Form.REF] = form(ref, key)
    if compact is not None:
        forms[Form.COMPACT] = form(compact, key)
    if full is not None:
        forms[Form.FULL] = form(full, key)
    return Item(key=key, section=section, priority=priority, reasons=(), order=order,
                position=(order,), forms=forms, refs=(key,), tier=tier)


def no_clip(_rendered: Rendered, _limit: int) -> Rendered | None:
    return None


def run(items: Sequence[Item], budget: int, *, headers: dict[Section, int] | None = None,
        clip=no_clip, sources=()) -> Plan:  # type: ignore[no-untyped-def]
    return plan(items, budget_tokens=budget, header_tokens=headers or NO_HEADERS, clip=clip,
                sources=sources)


def chosen(p: Plan) -> dict[str, str]:
    return {k: f.label for k, (f, _) in p.chosen.items()}


# -- rounds -----------------------------------------------------------------------------------
@pytest.mark.parametrize(("priority", "form_", "index", "tier", "expected"), [
    (Priority.PINNED, Form.REF, 0, 0, 0),
    (Priority.PINNED, Form.COMPACT, 1, 0, 1),
    (Priority.PINNED, Form.FULL, 2, 3, 1),  # pinned rounds ignore the tier
    (Priority.HIGH, Form.COMPACT, 0, 0, 2),
    (Priority.HIGH, Form.FULL, 1, 0, 3),
    (Priority.NORMAL, Form.COMPACT, 0, 0, 4),
    (Priority.NORMAL, Form.FULL, 1, 0, 5),
    (Priority.LOW, Form.COMPACT, 0, 0, 6),
    (Priority.LOW, Form.FULL, 1, 0, 7),
    (Priority.DIAGNOSTIC, Form.COMPACT, 0, 0, 8),
    (Priority.DIAGNOSTIC, Form.FULL, 1, 0, 9),
    (Priority.HIGH, Form.REF, 0, 0, 2),  # a ref form of a non-pinned item counts as compact
    (Priority.HIGH, Form.COMPACT, 0, 1, 10),
    (Priority.NORMAL, Form.FULL, 1, 2, 21),
])
def test_step_round(priority: Priority, form_: Form, index: int, tier: int, expected: int) -> None:
    """Pinned minimum, pinned upgrades, then per tier: high, normal, low, diagnostic × forms."""
    it = item("i", priority=priority, tier=tier, compact=1, full=2)
    assert step_round(it, form_, index) == expected


def test_tier_start_is_the_high_compact_round_of_the_tier() -> None:
    """Tier k begins 8 rounds after tier k-1, with its high compact forms."""
    assert [tier_start(k) for k in range(4)] == [2, 10, 18, 26]
    assert tier_start(1) == step_round(item("i", priority=Priority.HIGH, tier=1, compact=1),
                                       Form.COMPACT, 0)


# -- order and the prefix rule ----------------------------------------------------------------
def test_classes_enter_in_order_compact_then_full() -> None:
    """High compact, high full, normal compact, normal full, then low: whatever the item order
    (the low item is listed first)."""
    items = [item("low", priority=Priority.LOW, compact=5, full=20),
             item("normal", compact=5, full=20, order=1),
             item("high", priority=Priority.HIGH, compact=5, full=20, order=2)]
    assert chosen(run(items, 10)) == {"high": "compact"}
    assert chosen(run(items, 25)) == {"high": "full", "normal": "compact"}
    assert chosen(run(items, 45)) == {"high": "full", "normal": "full", "low": "compact"}


def test_the_plan_is_a_prefix_nothing_after_the_first_misfit() -> None:
    """A step that does not fit stops the plan: a smaller later step is not taken instead."""
    items = [item("big", priority=Priority.HIGH, full=50), item("small", full=1, order=1)]
    p = run(items, 40)
    assert p.chosen == {}
    assert p.omitted == {"big": 50, "small": 51}
    assert p.used_tokens == 0


def test_an_earlier_tier_fills_before_a_later_tier() -> None:
    """Every step of tier 0 (normal full included) precedes tier 1's high compact form."""
    items = [item("old-high", priority=Priority.HIGH, tier=1, compact=3, full=9),
             item("new-normal", compact=3, full=9)]
    assert chosen(run(items, 9)) == {"new-normal": "full"}
    assert chosen(run(items, 12)) == {"new-normal": "full", "old-high": "compact"}


def test_pinned_items_upgrade_in_their_own_order_across_sections() -> None:
    """Round 1 follows the pinned items' order (the current input first), not the share."""
    items = [item("work", priority=Priority.PINNED, section=Section.WORK_ITEM, order=-10,
                  ref=2, full=10),
             item("current", priority=Priority.PINNED, section=Section.CURRENT_INPUT,
                  order=-20, ref=2, full=10)]
    assert chosen(run(items, 12)) == {"current": "full", "work": "ref"}
    assert chosen(run(items, 20)) == {"current": "full", "work": "full"}


def test_sections_share_a_round_by_weight() -> None:
    """Inside one round, sections alternate by cost over weight: recent turns (weight 0.40) take
    about twice what the current input (0.20) does before the current input's next step."""
    items = [item(f"r{i}", section=Section.RECENT_TURNS, order=i, full=10) for i in range(6)]
    items += [item(f"c{i}", section=Section.CURRENT_INPUT, order=i, full=10) for i in range(6)]
    p = run(items, 60)
    recent = sum(1 for k in p.chosen if k.startswith("r"))
    current = sum(1 for k in p.chosen if k.startswith("c"))
    assert (recent, current) == (4, 2)
    assert SECTION_WEIGHTS[Section.RECENT_TURNS] == 2 * SECTION_WEIGHTS[Section.CURRENT_INPUT]


def test_a_section_title_is_counted_once_with_its_first_step() -> None:
    """Each section's title costs its tokens once, when its first item enters."""
    headers = {**NO_HEADERS, Section.RECENT_TURNS: 4}
    items = [item("a", full=10), item("b", full=10, order=1)]
    assert run(items, 24, headers=headers).used_tokens == 24
    assert chosen(run(items, 23, headers=headers)) == {"a": "full"}
    assert run(items, 23, headers=headers).omitted == {"b": 24}


# -- the pinned minimum -----------------------------------------------------------------------
def test_budget_too_small_names_the_exact_pinned_minimum() -> None:
    """Round 0 (pinned minimum forms and their section titles) must fit: exactly that fits."""
    headers = {**NO_HEADERS, Section.CURRENT_INPUT: 3, Section.WORK_ITEM: 2}
    items = [item("cur", priority=Priority.PINNED, section=Section.CURRENT_INPUT, ref=7, full=30),
             item("wi", priority=Priority.PINNED, section=Section.WORK_ITEM, ref=5, full=9),
             item("other", compact=1)]
    with pytest.raises(BudgetTooSmallError) as info:
        run(items, 16, headers=headers)
    assert (info.value.required_tokens, info.value.available_tokens) == (17, 16)
    assert chosen(run(items, 17, headers=headers)) == {"cur": "ref", "wi": "ref"}


# -- clipping ---------------------------------------------------------------------------------
def clip_to(rendered: Rendered, limit: int) -> Rendered | None:
    """A clip that keeps every ref and uses exactly the room given."""
    if limit < 2:
        return None
    return Rendered(blocks=rendered.blocks, tokens=limit, refs=rendered.refs, clipped=True)


def test_the_first_misfit_is_clipped_to_the_room_left() -> None:
    """The step that does not fit is clipped to the tokens left; nothing after it is taken."""
    items = [item("a", priority=Priority.HIGH, full=10), item("b", full=30, order=1),
             item("c", full=1, order=2)]
    p = run(items, 25, clip=clip_to)
    assert p.chosen["b"][1].clipped
    assert p.chosen["b"][1].tokens == 15
    assert p.used_tokens == 25
    assert "c" not in p.chosen
    assert p.upgrade_at["b"] == 40
    # c enters once a and b fit whole, not before: the clipped step is counted once.
    enters = p.omitted["c"]
    assert "c" in run(items, enters, clip=clip_to).chosen
    assert "c" not in run(items, enters - 1, clip=clip_to).chosen


def test_a_clip_that_would_lose_a_ref_is_refused() -> None:
    """An upgrade clipped to fewer refs than the form it replaces is not taken (monotonicity)."""
    def lossy(rendered: Rendered, limit: int) -> Rendered:
        return Rendered(blocks=(), tokens=limit, refs=(), clipped=True)
    items = [item("a", compact=5, full=50)]
    p = run(items, 30, clip=lossy)
    assert chosen(p) == {"a": "compact"}
    assert p.upgrade_at == {"a": 50}


def test_a_clip_no_larger_than_the_form_it_replaces_is_refused() -> None:
    """A clipped upgrade must show more than the smaller form already chosen."""
    def tiny(rendered: Rendered, limit: int) -> Rendered:
        return Rendered(blocks=rendered.blocks, tokens=5, refs=rendered.refs, clipped=True)
    p = run([item("a", compact=5, full=50)], 30, clip=tiny)
    assert chosen(p) == {"a": "compact"}
    assert not p.chosen["a"][1].clipped


def test_no_clip_without_room() -> None:
    """With no token left, the clip function is not even asked."""
    asked: list[int] = []

    def spy(rendered: Rendered, limit: int) -> Rendered | None:
        asked.append(limit)
        return None
    run([item("a", full=10), item("b", full=10, order=1)], 10, clip=spy)
    assert asked == []


# -- lazy sources -----------------------------------------------------------------------------
class Chunks:
    """A source of pre-made chunks, recording which it handed out."""

    def __init__(self, chunks: list[tuple[Bound, list[Item]]]) -> None:
        self.chunks = chunks
        self.loaded: list[int] = []

    def bound(self) -> Bound | None:
        return self.chunks[len(self.loaded)][0] if len(self.loaded) < len(self.chunks) else None

    def load(self) -> list[Item]:
        self.loaded.append(len(self.loaded))
        return self.chunks[len(self.loaded) - 1][1]


def test_a_source_is_read_only_when_the_plan_reaches_it() -> None:
    """A chunk of tier 1 is loaded only once every tier-0 step fitted; a small budget never
    reads it, and the plan equals one made with the chunk given up front."""
    page1 = [item("p1", tier=1, full=10)]
    tier0 = [item("a", priority=Priority.HIGH, full=10), item("b", full=10, order=1)]
    small = Chunks([(Bound(tier_start(1), Section.RECENT_TURNS, 0), page1)])
    assert chosen(run(tier0, 15, sources=[small])) == {"a": "full"}
    assert small.loaded == []
    big = Chunks([(Bound(tier_start(1), Section.RECENT_TURNS, 0), page1)])
    lazy = run(tier0, 100, sources=[big])
    assert big.loaded == [0]
    assert chosen(lazy) == chosen(run([*tier0, *page1], 100))


def test_a_chunk_in_the_same_round_is_merged_by_its_steps_keys() -> None:
    """Old high turns (a chunk bounded in tier 0's high round) enter before tier 0's normal
    turns, after the high turns already known, and are read before any normal step is taken."""
    tier0 = [item("new-high", priority=Priority.HIGH, compact=2, full=6),
             item("new-normal", compact=2, full=6, order=1)]
    old = [item("old-high", priority=Priority.HIGH, compact=2, full=6, order=100)]
    source = Chunks([(Bound(tier_start(0), Section.RECENT_TURNS, 100), old)])
    p = run(tier0, 12, sources=[source])
    assert source.loaded == [0]
    assert chosen(p) == {"new-high": "full", "old-high": "full"}
    p = run(tier0, 4, sources=[Chunks([(Bound(tier_start(0), Section.RECENT_TURNS, 100), old)])])
    assert chosen(p) == {"new-high": "compact", "old-high": "compact"}


def test_nothing_is_read_after_the_plan_stops() -> None:
    """Once a step does not fit, no source is read, even one whose bound comes later."""
    later = [item("later", order=50)]
    source = Chunks([(Bound(tier_start(0) + 2, Section.RECENT_TURNS, 50), later)])
    run([item("a", priority=Priority.HIGH, full=20)], 10, sources=[source])
    assert source.loaded == []


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(list(Priority)[1:]), st.integers(0, 2),
                          st.integers(1, 30), st.integers(1, 60)), min_size=1, max_size=25),
       st.integers(1, 400), st.integers(1, 400))
def test_a_larger_budget_takes_a_superset_in_richer_forms(
        specs: list[tuple[Priority, int, int, int]], a: int, b: int) -> None:
    """The plan is a prefix of a budget-independent order: a larger budget keeps every item the
    smaller one chose, in an equal or richer form, and uses at least as many tokens."""
    items = [item(f"i{n}", priority=p, tier=t, compact=c, full=c + f, order=n)
             for n, (p, t, c, f) in enumerate(specs)]
    small, large = run(items, min(a, b)), run(items, max(a, b))
    for key, (f, _) in small.chosen.items():
        assert key in large.chosen
        assert large.chosen[key][0] >= f
    assert small.used_tokens <= large.used_tokens <= max(a, b)


# -- the reported entitlement (rich's _ratio style) -------------------------------------------
def _demand(section: Section, full: int, *, pinned_min: int | None = None) -> list[Item]:
    if pinned_min is None:
        return [item(f"{section}", section=section, full=full)]
    return [item(f"{section}", section=section, priority=Priority.PINNED, ref=pinned_min,
                 full=full)]


@pytest.mark.parametrize(("budget", "demands", "expected"), [
    # nothing asked, nothing given
    (100, [], {}),
    # one section takes what it asks for, no more
    (100, [(Section.RECENT_TURNS, 30, None)], {Section.RECENT_TURNS: 30}),
    # one section asking more than the budget gets the budget
    (100, [(Section.RECENT_TURNS, 300, None)], {Section.RECENT_TURNS: 100}),
    # two sections over budget split by weight (0.40 : 0.20)
    (90, [(Section.RECENT_TURNS, 300, None), (Section.CURRENT_INPUT, 300, None)],
     {Section.RECENT_TURNS: 60, Section.CURRENT_INPUT: 30}),
    # what one section cannot use flows to the other
    (90, [(Section.RECENT_TURNS, 300, None), (Section.CURRENT_INPUT, 10, None)],
     {Section.RECENT_TURNS: 80, Section.CURRENT_INPUT: 10}),
    # a pinned floor is given first, the rest by weight
    (100, [(Section.RECENT_TURNS, 300, None), (Section.WORK_ITEM, 300, 40)],
     {Section.RECENT_TURNS: 46, Section.WORK_ITEM: 54}),
    # floors above the budget: floors only
    (10, [(Section.WORK_ITEM, 300, 40)], {Section.WORK_ITEM: 40}),
    # only sections asking for more share the rounding (2 x 0.15 / 0.35 = 0.86 rounds to 1); a
    # section asking for nothing takes no part, or its share would shift the rounding
    (2, [(Section.EPISODES, 40, None), (Section.CURRENT_INPUT, 14, None)],
     {Section.EPISODES: 1, Section.CURRENT_INPUT: 1}),
])
def test_entitlement(budget: int, demands: list[tuple[Section, int, int | None]],
                     expected: dict[Section, int]) -> None:
    """Pinned floors first, then the rest divided by weight up to each section's demand."""
    items = [it for s, full, floor in demands for it in _demand(s, full, pinned_min=floor)]
    got = entitlement(items, budget, NO_HEADERS)
    assert {s: v for s, v in got.items() if v} == expected


def test_entitlement_counts_section_titles_in_demand_and_floor() -> None:
    """A section's title is part of what it asks for, and of its floor when it has one."""
    headers = {**NO_HEADERS, Section.WORK_ITEM: 5}
    got = entitlement(_demand(Section.WORK_ITEM, 20, pinned_min=8), 100, headers)
    assert got[Section.WORK_ITEM] == 25


def test_entitlement_is_independent_of_set_order() -> None:
    """The division does not depend on iteration order (it once summed weights over a set)."""
    demands = [(s, 1000, None) for s in Section]
    items = [it for s, full, floor in demands for it in _demand(s, full, pinned_min=floor)]
    assert entitlement(items, 997, NO_HEADERS) == entitlement(items[::-1], 997, NO_HEADERS)


def test_a_clipped_upgrade_replaces_the_smaller_form_and_pays_only_the_difference() -> None:
    """The stopping step upgrades an item already chosen compact: the clip gets the compact
    form's tokens plus the room left, replaces it, and the plan's total is the budget exactly;
    a first step into a section pays the section's title once."""
    headers = {**NO_HEADERS, Section.RECENT_TURNS: 3, Section.CURRENT_INPUT: 2}
    asked: list[int] = []

    def spy(rendered: Rendered, limit: int) -> Rendered | None:
        asked.append(limit)
        return clip_to(rendered, limit)
    items = [item("a", compact=10, full=100)]
    p = run(items, 51, headers=headers, clip=spy)
    assert asked == [48]  # the room left (51 - 3 - 10) plus the compact form's 10 tokens
    assert p.chosen["a"][1].tokens == 48
    assert p.used_tokens == 51
    # A clipped first step into a new section: the room excludes that section's title.
    items = [item("a", compact=10, full=12),
             item("c", section=Section.CURRENT_INPUT, full=100)]
    asked.clear()
    p = run(items, 40, headers=headers, clip=spy)
    assert asked == [23]  # 40 - (3 + 12) - 2
    assert p.used_tokens == 40


def test_a_clip_that_does_not_fit_with_its_title_is_refused() -> None:
    """A clip must fit together with the title of the section it opens."""
    headers = {**NO_HEADERS, Section.CURRENT_INPUT: 5}

    def too_big(rendered: Rendered, limit: int) -> Rendered:
        return Rendered(blocks=rendered.blocks, tokens=limit + 1, refs=rendered.refs,
                        clipped=True)
    p = run([item("c", section=Section.CURRENT_INPUT, full=100)], 30, headers=headers,
            clip=too_big)
    assert p.chosen == {}
    assert p.used_tokens == 0


def test_entitlement_floor_includes_the_title_of_a_section_with_pinned_items() -> None:
    """Below the floors, a section gets exactly its pinned minimum plus its title."""
    headers = {**NO_HEADERS, Section.WORK_ITEM: 5, Section.RECENT_TURNS: 4}
    items = [*_demand(Section.WORK_ITEM, 30, pinned_min=8), *_demand(Section.RECENT_TURNS, 30)]
    got = entitlement(items, 10, headers)
    assert (got[Section.WORK_ITEM], got[Section.RECENT_TURNS]) == (13, 0)


def test_loaded_chunks_interleave_by_key_and_a_later_source_waits() -> None:
    """A chunk read by lookup merges with what is known by the steps' keys (sections share a
    round by weight: recent turns 0.40, current input 0.20), not chunk after chunk; a source
    bounded later is read only once every step before its bound was taken."""
    def current() -> list[Item]:
        return [item(f"n{i}", section=Section.CURRENT_INPUT, priority=Priority.HIGH, compact=4,
                     full=None, order=i) for i in range(3)]

    def chunks() -> tuple[Chunks, Chunks]:
        old = [item(f"o{i}", priority=Priority.HIGH, compact=4, full=None, order=10 + i)
               for i in range(3)]
        late = [item("late", tier=1, compact=4, full=None)]
        return (Chunks([(Bound(tier_start(0), Section.RECENT_TURNS, 10), old)]),
                Chunks([(Bound(tier_start(1), Section.RECENT_TURNS, 0), late)]))
    early, late = chunks()
    p = run(current(), 12, sources=[late, early])
    assert set(p.chosen) == {"o0", "n0", "o1"}  # shares 0 (o0, n0), then 10 (o1) < 20 (n1)
    assert (early.loaded, late.loaded) == ([0], [])
    early, late = chunks()
    p = run(current(), 28, sources=[late, early])
    assert set(p.chosen) == {"o0", "o1", "o2", "n0", "n1", "n2", "late"}
    assert late.loaded == [0]


def test_entitlement_of_every_section_follows_the_documented_weights() -> None:
    """With every section asking for more than the budget, each gets its weight's share (RFC
    0002: environment 0.06, work item 0.12, work refs 0.07, episodes 0.15, recent turns 0.40,
    current input 0.20)."""
    items = [it for s in Section for it in _demand(s, 10_000)]
    assert entitlement(items, 1000, NO_HEADERS) == {
        Section.ENVIRONMENT: 60, Section.WORK_ITEM: 120, Section.WORK_REFS: 70,
        Section.EPISODES: 150, Section.RECENT_TURNS: 400, Section.CURRENT_INPUT: 200}


def test_no_clip_when_the_section_title_alone_does_not_fit() -> None:
    """When what is left is smaller than the title of the section a step would open, the clip
    function is not asked (it would be asked for a negative size)."""
    asked: list[int] = []

    def spy(rendered: Rendered, limit: int) -> Rendered | None:
        asked.append(limit)
        return None
    headers = {**NO_HEADERS, Section.CURRENT_INPUT: 5}
    p = run([item("a", full=10), item("c", section=Section.CURRENT_INPUT, full=100, order=1)],
            12, headers=headers, clip=spy)
    assert asked == []
    assert chosen(p) == {"a": "full"}


def test_a_clip_larger_than_the_room_left_is_refused_after_other_steps() -> None:
    """A clip function that returns more than it was given is refused also when earlier steps
    have used part of the budget (the check is against what is left, not the whole budget)."""
    def too_big(rendered: Rendered, limit: int) -> Rendered:
        return Rendered(blocks=rendered.blocks, tokens=limit + 1, refs=rendered.refs,
                        clipped=True)
    p = run([item("a", full=10), item("b", full=100, order=1)], 30, clip=too_big)
    assert chosen(p) == {"a": "full"}
    assert p.used_tokens == 10


def test_every_section_s_first_step_in_a_round_comes_before_any_second_step() -> None:
    """Inside a round a section that has taken nothing yet goes first, whatever its weight: the
    environment's only item (weight 0.06) enters before a second recent turn (0.40), even when
    the recent turns are cheap."""
    items = [item("env", section=Section.ENVIRONMENT, full=5),
             item("r0", full=2), item("r1", full=2, order=1)]
    assert set(run(items, 7).chosen) == {"env", "r0"}


def test_sections_are_ranked_by_their_exact_share_not_a_rounded_one() -> None:
    """17 tokens of recent turns are 42.5 tokens per unit of weight (17 / 0.40), 3 tokens of work
    refs 42.9 (3 / 0.07): the recent turns are further below their share and take the next step,
    although the work refs come first in section order."""
    recent_share = 17 / SECTION_WEIGHTS[Section.RECENT_TURNS]
    refs_share = 3 / SECTION_WEIGHTS[Section.WORK_REFS]
    assert int(recent_share) == int(refs_share)  # the same whole part: only exact shares tell
    assert recent_share < refs_share
    items = [item("r0", full=17), item("r1", full=5, order=1),
             item("w0", section=Section.WORK_REFS, full=3),
             item("w1", section=Section.WORK_REFS, full=5, order=1)]
    assert set(run(items, 25).chosen) == {"r0", "w0", "r1"}


def test_a_chunk_of_a_section_with_nothing_in_its_round_is_read_before_that_round() -> None:
    """A chunk whose section has no step yet in its round shares the round from zero, so it is
    read before any step of the round is taken: the plan equals one made with the chunk given
    up front (here the environment's item enters before a second recent turn)."""
    recent = [item("r0", full=2), item("r1", full=2, order=1)]
    env = [item("env", section=Section.ENVIRONMENT, full=5)]
    # A normal item with only a full form: round 3 of its tier (normal full).
    source = Chunks([(Bound(tier_start(0) + 3, Section.ENVIRONMENT, 0), env)])
    lazy = run(recent, 7, sources=[source])
    assert source.loaded == [0]
    assert chosen(lazy) == chosen(run([*recent, *env], 7)) == {"env": "full", "r0": "full"}


def test_a_source_is_not_read_when_the_plan_stops_among_several_loaded_chunks() -> None:
    """With two chunks merged (the first items and a chunk of high turns read by lookup), a step
    that does not fit before the next source's bound ends the reading: that source is never
    loaded, and its items are not even accounted as omitted (a plan reads only what its budget
    needs)."""
    old_page = [item("old", tier=2, full=10)]
    high = Chunks([(Bound(tier_start(0), Section.RECENT_TURNS, 0),
                    [item("high", priority=Priority.HIGH, full=10)])])
    normal = Chunks([(Bound(tier_start(0) + 2, Section.RECENT_TURNS, 0), [item("normal", full=10)])])
    p = run(old_page, 5, sources=[high, normal])
    assert (high.loaded, normal.loaded) == ([0], [])
    assert set(p.omitted) == {"high", "old"}
    assert p.chosen == {}


def test_a_source_bounded_just_after_the_misfit_is_not_read() -> None:
    """A chunk of work refs whose bound is 3 / 0.07 = 42.9 tokens per weight into the round sorts
    after a recent turn at 17 / 0.40 = 42.5: when that turn does not fit the chunk is never
    read (its bound is compared exactly, as the steps' shares are)."""
    items = [item("r0", full=17), item("r1", full=5, order=1),
             item("w0", section=Section.WORK_REFS, full=3)]
    later = Chunks([(Bound(tier_start(0) + 3, Section.WORK_REFS, 1),
                     [item("w1", section=Section.WORK_REFS, full=5, order=1)])])
    p = run(items, 22, sources=[later])
    assert set(p.chosen) == {"r0", "w0"}
    assert later.loaded == []
    assert "w1" not in p.omitted


# -- grow steps (the newest step whole while the budget has room; RFC 0015) --------------------
def growing(it: Item, whole: int, *, refs: tuple[str, ...] | None = None) -> Item:
    """``it`` with a grow function: its full form's fields whole cost ``whole`` tokens; raised
    into a limit they take as much of it as they can, and below the capped form nothing."""
    capped = it.forms[Form.FULL].tokens
    shown = it.refs if refs is None else refs

    def grow(limit: int | None) -> Rendered | None:
        if limit is None:
            return form(whole, *shown)
        return None if limit < capped else form(min(limit, whole), *shown)
    return attrs.evolve(it, grow=grow)


def newest(*, full: int, whole: int) -> Item:
    """A current-input turn ``c`` shown in full at high priority (round 3), whose fields grow."""
    return growing(item("c", priority=Priority.HIGH, section=Section.CURRENT_INPUT, full=full),
                   whole)


@pytest.mark.parametrize(("whole", "budget"), [
    # The grow step costs the difference between the whole and the capped full form, so a later
    # step that fits after it is still taken: 10 + 2 + 4 + 6 tokens fill 22 exactly.
    (14, 22),
    # A whole form can cost less than the capped one (a command the whole message shows is not
    # repeated): its step frees tokens for the steps after it (10 + 2 - 2 + 6 = 16).
    (8, 16),
])
def test_a_grow_step_costs_what_the_whole_form_adds_to_the_capped_one(whole: int,
                                                                       budget: int) -> None:
    """The newest step is shown whole and the later turn still fits, in exactly the budget."""
    items = [newest(full=10, whole=whole), item("r", compact=2, full=8)]
    p = run(items, budget)
    assert p.chosen["c"][1].tokens == whole
    assert chosen(p) == {"c": "full", "r": "full"}
    assert p.used_tokens == budget


def test_the_current_input_grows_before_a_normal_turn_s_full_form_other_turns_last() -> None:
    """The current input's grow step comes after the compact lines and before any normal full
    form; a recent turn's grow step comes after every other step, even a far later tier's."""
    later = item("later", tier=100, compact=3, full=None)  # a window has as many pages as it needs
    p = run([newest(full=10, whole=14), item("n", full=8), later], 18)
    assert p.chosen["c"][1].tokens == 14
    assert "n" not in p.chosen
    recent = growing(item("r", priority=Priority.HIGH, full=10), 14)
    p = run([recent, item("n", full=8), later], 21)
    assert chosen(p) == {"r": "full", "n": "full", "later": "compact"}
    assert p.chosen["r"][1].tokens == 10


def test_a_grow_step_that_does_not_fit_whole_takes_exactly_the_room_left() -> None:
    """When the whole form does not fit, its fields are raised into the tokens left: the grow
    function is asked for the room plus the capped form's tokens, and the plan fills the budget."""
    asked: list[int | None] = []
    base = newest(full=10, whole=30)
    assert base.grow is not None
    inner = base.grow

    def spy(limit: int | None) -> Rendered | None:
        asked.append(limit)
        return inner(limit)
    p = run([attrs.evolve(base, grow=spy), item("r", compact=2, full=8)], 20)
    assert asked == [None, 18]  # the step's whole form, then 20 - 12 + 10
    assert p.chosen["c"][1].tokens == 18
    assert p.used_tokens == 20
    # r's full form enters once every step before it fits: 12, the 20 the whole form adds, 6
    assert p.upgrade_at["r"] == 12 + 20 + 6


def test_a_grown_form_that_drops_a_ref_of_its_base_is_not_used() -> None:
    """Raising fields never loses a ref the capped form showed (monotonicity): a grown form
    without it is refused, whether the plan grows it on the way or after it stopped."""
    it = item("c", priority=Priority.HIGH, section=Section.CURRENT_INPUT, full=10)
    lossy = growing(it, 30, refs=())
    p = run([lossy], 20)
    assert p.chosen["c"][1].tokens == 10
    assert p.chosen["c"][1].refs == ("c",)
    p = run([lossy, item("r", compact=50, full=None)], 27, clip=clip_short)
    assert p.chosen["c"][1].refs == ("c",)
    assert p.chosen["c"][1].tokens == 10


@pytest.mark.parametrize("size", [10, 1000])
def test_a_grow_that_shows_no_more_than_the_capped_form_is_not_taken(size: int) -> None:
    """A grow function whose raised form is no larger than the capped one leaves the capped
    form in place (the same size is not more text), at any size (counts are compared by
    value: a renderer's counts are fresh ints)."""
    it = item("c", priority=Priority.HIGH, section=Section.CURRENT_INPUT, full=size)
    capped = it.forms[Form.FULL]

    def same_size(limit: int | None) -> Rendered | None:
        if limit is None:
            return form(size * 3, "c")
        half = size // 2  # rendered afresh, in two blocks whose counts add up to the size
        return Rendered(blocks=(Block(head="x\n", tokens=half), Block(head="y\n",
                        tokens=size - half)), tokens=half + (size - half), refs=("c",))
    grows = attrs.evolve(it, grow=same_size)
    p = run([grows], size * 2)
    assert p.chosen["c"][1] is capped
    # Nor after the plan stopped with tokens left (3, by the clip of the trail).
    p = run([grows, item("r", compact=50, full=None, order=1)], size + 17, clip=clip_short)
    assert p.used_tokens == size + 14
    assert p.chosen["c"][1] is capped


def clip_short(rendered: Rendered, limit: int) -> Rendered | None:
    """A clip that keeps every ref and leaves 3 of the tokens it is given (a cut at a line end)."""
    if limit < 5:
        return None
    return Rendered(blocks=rendered.blocks, tokens=limit - 3, refs=rendered.refs, clipped=True)


def test_room_left_after_the_plan_stops_goes_to_the_current_input_s_step_only() -> None:
    """The plan stops on a compact trail clipped short (3 tokens left): those tokens go to the
    current input's grow step, so the newest step is not left cut while a token is free, and
    the plan uses the budget exactly; a recent turn's grow step gets none of them."""
    items = [newest(full=10, whole=30), item("r", compact=50, full=None, order=1)]
    p = run(items, 40, clip=clip_short)
    assert p.chosen["r"][1].tokens == 27  # clipped to the 30 left, 3 short
    assert p.chosen["c"][1].tokens == 13
    assert p.used_tokens == 40
    recent = growing(item("h", priority=Priority.HIGH, full=10), 30)
    p = run([recent, item("r", compact=50, full=None, order=1)], 40, clip=clip_short)
    assert p.chosen["h"][1].tokens == 10
    assert p.used_tokens == 37


def test_no_grow_step_for_a_full_form_that_did_not_enter() -> None:
    """A grow step raises the full form only: when the plan stopped before the full form, the
    room left is not spent on it and nothing about it is reported beyond its next form."""
    it = growing(item("c", priority=Priority.HIGH, section=Section.CURRENT_INPUT,
                      compact=4, full=20), 40)
    p = run([it], 10)
    assert chosen(p) == {"c": "compact"}
    assert p.used_tokens == 4
    assert p.upgrade_at == {"c": 20}


# -- clipping: the last token, and forms shown whole or not at all ----------------------------
def test_a_single_token_left_is_still_offered_to_the_clip() -> None:
    """The clip function is asked whenever any token is left, one included (it decides whether
    a form that small says anything)."""
    asked: list[int] = []

    def spy(rendered: Rendered, limit: int) -> Rendered | None:
        asked.append(limit)
        return None
    run([item("a", full=9), item("b", full=10, order=1)], 10, clip=spy)
    assert asked == [1]


def test_a_whole_item_s_larger_form_is_never_cut_but_its_first_form_may_be() -> None:
    """An item shown whole or not at all (the execution frontier) keeps its smaller form rather
    than show the larger one cut short; when nothing of it is shown yet, its first form can
    still be clipped into the room left."""
    whole = attrs.evolve(item("w", compact=5, full=50), whole=True)
    p = run([whole], 30, clip=clip_to)
    assert chosen(p) == {"w": "compact"}
    assert not p.chosen["w"][1].clipped
    assert p.used_tokens == 5
    first = attrs.evolve(item("w", compact=None, full=50), whole=True)
    p = run([first], 30, clip=clip_to)
    assert p.chosen["w"][1].clipped
    assert p.used_tokens == 30


# -- merging chunks ---------------------------------------------------------------------------
def test_a_chunk_s_steps_past_a_pending_source_s_bound_wait_for_it() -> None:
    """With two chunks merged, the steps of one that sort after a source's bound (but before the
    other chunk's next step) wait until that source is read: here the tier-1 turn read from the
    second source enters before the initial items' tier-2 turn, as with every item up front."""
    initial = [item("x", full=10), item("z", tier=2, full=10, order=1)]

    def sources() -> list[Chunks]:
        high = [item("h", priority=Priority.HIGH, full=10, order=2),
                item("deep", tier=3, full=10, order=3)]
        page1 = [item("y", tier=1, full=10, order=4)]
        return [Chunks([(Bound(tier_start(0), Section.RECENT_TURNS, 2), high)]),
                Chunks([(Bound(tier_start(1), Section.RECENT_TURNS, 4), page1)])]
    lazy = run(initial, 30, sources=sources())
    everything = [*initial, *(it for src in sources() for _, chunk in src.chunks for it in chunk)]
    assert chosen(lazy) == chosen(run(everything, 30)) == {"h": "full", "x": "full", "y": "full"}


def test_steps_with_equal_keys_go_to_the_older_chunk() -> None:
    """Ties between chunks go to the chunk read first, as one stable sort of every step would:
    two turns of the same rank and tier offer grow steps of equal keys, and the budget's last 4
    tokens go to the one given up front, not the one read later."""
    first = growing(item("a", priority=Priority.HIGH, full=10, order=5), 14)
    later = growing(item("b", priority=Priority.HIGH, full=10, order=5), 14)
    source = Chunks([(Bound(tier_start(0) + 1, Section.RECENT_TURNS, 5), [later])])
    p = run([first], 24, sources=[source])
    assert source.loaded == [0]
    assert (p.chosen["a"][1].tokens, p.chosen["b"][1].tokens) == (14, 10)


def test_three_chunks_merge_by_their_steps_keys() -> None:
    """Turns given up front, episodes and the current input read from two sources: whatever
    the order the chunks were read in, each step is taken after every smaller key of every
    other chunk (shares in a round: 0 for each section's first step, then 25 and 50 for recent
    turns, 50 for the second current step), so the plan equals one with every item up front."""
    recent = [item(f"r{i}", full=10, order=i) for i in range(3)]

    def sources() -> list[Chunks]:
        current = [item(f"c{i}", section=Section.CURRENT_INPUT, full=10, order=i)
                   for i in range(2)]
        episodes = [item(f"e{i}", section=Section.EPISODES, full=10, order=i) for i in range(2)]
        normal_full = tier_start(0) + 3
        return [Chunks([(Bound(normal_full, Section.CURRENT_INPUT, 0), current)]),
                Chunks([(Bound(normal_full, Section.EPISODES, 0), episodes)])]
    lazy = run(recent, 40, sources=sources())
    everything = [*recent, *(it for src in sources() for _, chunk in src.chunks for it in chunk)]
    assert chosen(lazy) == chosen(run(everything, 40))
    assert set(lazy.chosen) == {"e0", "r0", "c0", "r1"}


# -- what the plan reports after it stops -----------------------------------------------------
@pytest.mark.parametrize("compact", [4, None])
def test_an_item_after_a_grow_step_that_did_not_run_is_reported_where_it_enters(
        compact: int | None) -> None:
    """When the plan stops before a turn's full form, that turn's grow step still comes before
    later steps in any larger plan: an item after it is reported at the budget at which it truly
    enters (the capped full form, its growth, then the item), not that budget less the growth."""
    c = growing(item("c", priority=Priority.HIGH, section=Section.CURRENT_INPUT,
                     compact=compact, full=20), 40)
    items = [c, item("r", full=5)]
    p = run(items, 10)
    assert "r" not in p.chosen
    enters = p.omitted["r"]
    assert "r" in run(items, enters).chosen
    assert "r" not in run(items, enters - 1).chosen


def test_a_whole_form_cheaper_than_the_capped_one_is_taken_after_the_plan_stopped() -> None:
    """The plan stops on the compact trail with no token left (the clip used all of them): the
    current input's whole form costs less than its capped one, so it is still shown whole (it
    would fit any budget), not left cut."""
    c = newest(full=10, whole=8)
    assert c.grow is not None
    whole = c.grow(None)
    items = [c, item("r", compact=50, full=None, order=1)]
    p = run(items, 40, clip=clip_to)
    assert p.chosen["r"][1].clipped
    assert p.chosen["c"][1] == whole
    assert p.used_tokens == 40 - (10 - 8)


def test_a_grown_form_that_shows_more_refs_than_its_base_is_used() -> None:
    """Raising fields may show refs the capped form did not (a record its cut left out): only
    losing one is refused, on the way and after the plan stopped."""
    it = item("c", priority=Priority.HIGH, section=Section.CURRENT_INPUT, full=10)
    richer = growing(it, 30, refs=("c", "c.extra"))
    p = run([richer], 20)
    assert p.chosen["c"][1].refs == ("c", "c.extra")
    assert p.chosen["c"][1].tokens == 20
    p = run([richer, item("r", compact=50, full=None, order=1)], 40, clip=clip_short)
    assert p.chosen["c"][1].refs == ("c", "c.extra")
    assert p.used_tokens == 40


def test_a_chunk_of_hundreds_of_steps_is_taken_to_its_end() -> None:
    """A window page can hold hundreds of turns: every step of a chunk that long is taken when
    the budget holds them all, and the plan uses exactly their tokens."""
    items = [item(f"t{i}", full=1, order=i) for i in range(300)]
    p = run(items, 300)
    assert len(p.chosen) == 300
    assert p.used_tokens == 300
