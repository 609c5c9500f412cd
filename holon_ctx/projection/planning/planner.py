"""The budget planner: which items enter the prompt, in which form, under one token budget.

Theory of operation (RFC 0002). Every item offers forms REF < COMPACT < FULL with exact token
costs. The planner turns items into *steps* — "include item i in its minimum form", "upgrade item
i to form f" — and sorts them by a key that does not depend on the budget:

    (round, share, section, order)

``round`` comes from the item's priority, the form and the item's *tier*: pinned minimums first
(round 0), then pinned upgrades (round 1), then for tier 0, 1, 2, … in turn: high compact, high
full, normal compact, normal full, low…, diagnostic…. Tier 0 is every item outside the recent
window plus the turns of window page 0; tier k is window page k. ``share`` interleaves sections
fairly inside a round (cumulative section cost divided by the section's weight), and ``order`` is
the item's rank in its section (newest and current-chain first). The plan is the longest prefix
of that sequence that fits; the first step that does not fit is clipped to the remaining tokens
when its item allows it (and the clipped form keeps every ref of the form it replaces).

Because the order is fixed and the plan is a prefix, a larger budget selects a superset, every
item in an equal or richer form (budget monotonicity), and the only unused tokens are those the
clipped step could not use (utilisation). Spare tokens flow to whichever section still has steps.
Tiers are what let the window be read lazily: the steps of tier k+1 all come after those of tier
k, so the planner asks for page k+1 (``more``) only when every step so far has fitted, and the
order of the steps it already had never changes. Round 0 (pinned minimums) must fit or the
planner refuses with BudgetTooSmallError.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from typing import NamedTuple, Protocol

import attrs

from holon_ctx.errors import BudgetTooSmallError
from holon_ctx.projection.base.items import Block, ClipFn, Item, Rendered, operator_chars
from holon_ctx.projection.base.model import SECTION_ORDER, Form, Priority, Section

__all__ = ["SECTION_WEIGHTS", "Block", "Bound", "Item", "Plan", "Rendered", "Source",
           "entitlement", "plan", "step_round", "tier_start"]

#: Relative share of each section while several compete for the same round.
SECTION_WEIGHTS: dict[Section, float] = {
    Section.ENVIRONMENT: 0.06,
    Section.WORK_ITEM: 0.12,
    Section.WORK_REFS: 0.07,
    Section.EPISODES: 0.15,
    Section.RECENT_TURNS: 0.40,
    Section.CURRENT_INPUT: 0.20,
}


class Step(NamedTuple):
    """One step of the sequence (a named tuple: a plan makes thousands of them)."""

    item: Item
    form: Form
    delta_tokens: int
    key: tuple[float, ...]
    #: A grow step's form (the full form, caps lifted); None: ``item.forms[form]``.
    grown: Rendered | None = None


#: The round of the newest steps' grow steps (the current input's turns): after the compact
#: lines of tier 0 and before any older turn's full text, so when the budget binds the newest
#: steps are the last to lose text, and the trail of one-line stubs is never what pays for them.
GROW_NEWEST_ROUND = 4.5
#: The round of every other turn's grow step: after every other step of every tier, so a field
#: is cut to its cap only when the whole budget binds.
GROW_ROUND = float(1 << 40)
#: The pinned reasons that make a turn's words the operator's current request: the current turn,
#: the turn it continues, the newest operator intent (pins.pinned_turns).
_CURRENT_REQUEST = frozenset({"current_turn", "continuation_anchor", "latest_operator_intent"})
#: How far ahead of the pinned slot orders (pins.SLOTS, -30 and up) a pinned upgrade that brings
#: the operator's words in is taken.
_WORDS_FIRST = 1000.0
#: The round of a deferred item's full form (an unrelated topic's decision, RFC 0030): after
#: every other step, grow steps included.
DEFERRED_ROUND = GROW_ROUND + 1


@attrs.frozen
class Plan:
    chosen: dict[str, tuple[Form, Rendered]]
    #: Items with no form chosen, with the cumulative budget at which they would enter.
    omitted: dict[str, int]
    #: Items whose form is below FULL: the budget at which their next form would enter.
    upgrade_at: dict[str, int]
    header_tokens: dict[Section, int]
    used_tokens: int
    allocated: dict[Section, int]


#: Rounds of non-pinned steps in tier 0: high, normal, low, diagnostic × (compact, full); a REF
#: form of a non-pinned item counts as compact. Pinned steps are rounds 0 and 1 (step_round).
_ROUND: dict[tuple[Priority, Form], int] = {
    (p, f): 2 + 2 * (int(p) - 1) + (0 if f <= Form.COMPACT else 1)
    for p in Priority if p is not Priority.PINNED for f in Form}
_SECTION_INDEX: dict[Section, int] = {s: i for i, s in enumerate(SECTION_ORDER)}
#: Rounds of one tier: (high, normal, low, diagnostic) × (compact, full).
_TIER_ROUNDS = 8


def tier_start(tier: int) -> int:
    """The first round of ``tier`` (its high compact forms)."""
    return _ROUND[(Priority.HIGH, Form.COMPACT)] + _TIER_ROUNDS * tier


def step_round(item: Item, form: Form, index: int) -> int:
    """The round of ``item``'s step to ``form`` (its ``index``-th form from the smallest)."""
    if item.priority is Priority.PINNED:
        # Pinned items: their minimum form must fit (round 0); every upgrade is round 1, taken
        # in the items' own order (see _steps), so the current input upgrades first.
        return min(index, 1)
    return _ROUND[(item.priority, form)] + _TIER_ROUNDS * item.tier


@attrs.frozen
class Bound:
    """A lower bound on the steps of a source's next chunk: no item of it is in an earlier round
    than ``round`` (see :func:`step_round`), every item is in ``section``, and none ranks before
    ``order`` there."""

    round: int
    section: Section
    order: int
    #: The chunk may hold required items, whose steps lead their round (RFC 0030).
    lead: bool = False


class Source(Protocol):
    """Items the planner reads lazily, one chunk at a time (a window page, a page of high turns).

    ``bound()`` describes the next chunk without reading it (None: no more chunks); ``load()``
    reads it and moves on. The planner loads a chunk just before the first step that could sort
    after one of its steps, and only while every step so far has fitted; so reading lazily gives
    the order that reading every chunk at those moments would, and a plan reads exactly as much
    as its budget needs.
    """

    def bound(self) -> Bound | None: ...

    def load(self) -> Sequence[Item]: ...


class _Sequence:
    """The step sequence, built chunk by chunk: each chunk's steps sorted, chunks merged by key.

    ``share`` accumulates per (round, section) across chunks in the order chunks are added, so a
    chunk added later ranks after the earlier ones of its round and section at equal cost.
    """

    def __init__(self) -> None:
        self.cum: dict[tuple[int, Section], float] = {}
        # (key, chunk serial, position, steps) of each chunk's next step not taken yet.
        self.heads: list[tuple[tuple[float, ...], int, int, list[Step]]] = []
        self.serial = 0

    def add(self, items: Sequence[Item]) -> None:
        steps: list[Step] = []
        cum = self.cum
        # Per-item step chains in section order, then one sort by key.
        for item in sorted(items, key=lambda it: (_SECTION_INDEX[it.section], it.order)):
            section_index = _SECTION_INDEX[item.section]
            prev_tokens = words_before = 0
            for i, form in enumerate(sorted(item.forms)):
                rnd = step_round(item, form, i)
                delta = item.forms[form].tokens - prev_tokens
                prev_tokens = item.forms[form].tokens
                slot = (rnd, item.section)
                share = cum.get(slot, 0.0) / SECTION_WEIGHTS[item.section]
                if not (item.required and rnd > 1):
                    cum[slot] = cum.get(slot, 0.0) + delta  # a leading step takes no share
                key: tuple[float, ...]
                if item.required and rnd > 1:
                    # A decision the current input is about leads its tier's first round, both
                    # forms, ahead of the fair share: it is what the input refers back to.
                    key = (tier_start(item.tier), -1.0, section_index, item.order, i)
                elif item.deferred and rnd > 1 and form is Form.FULL:
                    key = (DEFERRED_ROUND, float(item.tier), section_index, item.order, i)
                elif rnd <= 1:
                    # Pinned rounds follow the items' own order across sections (control notices,
                    # current turn, question, anchor, work item, …), not the fair share: these
                    # are not competing evidence but the order the prompt must not lose them in.
                    # A form that brings the operator's current request in (the words of the
                    # current turn, of the turn it continues, of the newest intent) goes before
                    # every other upgrade: the current step's tool output never pushes out what
                    # was asked (RFC 0010, decision 7).
                    words = (rnd == 1 and item.kind == "turn"
                             and not _CURRENT_REQUEST.isdisjoint(item.reasons)
                             and operator_chars(item.forms[form]) > words_before)
                    key = (rnd, float(item.order) - (_WORDS_FIRST if words else 0.0),
                           section_index, 0, i)
                else:
                    key = (rnd, share, section_index, item.order, i)
                steps.append(Step(item, form, delta, key))
                if rnd == 1 and item.kind == "turn":
                    words_before = max(words_before, operator_chars(item.forms[form]))
            if item.grow is not None and Form.FULL in item.forms:
                grown = item.grow(None)
                # The whole form can cost less than the capped one (a command the whole message
                # shows is not repeated on its tool line): a step of negative delta is a gain.
                if grown is not None and grown is not item.forms[Form.FULL]:
                    newest = item.section is Section.CURRENT_INPUT
                    key = (GROW_NEWEST_ROUND if newest else GROW_ROUND, float(item.tier),
                           section_index, item.order, 0)
                    steps.append(Step(item, Form.FULL, grown.tokens - item.forms[Form.FULL].tokens,
                                      key, grown))
        steps.sort(key=lambda st: st.key)
        if steps:
            heapq.heappush(self.heads, (steps[0].key, self.serial, 0, steps))
            self.serial += 1

    def bound_key(self, bound: Bound) -> tuple[float, ...]:
        """The smallest key a step of a chunk with ``bound`` can get if it is added now."""
        share = (-1.0 if bound.lead else
                 self.cum.get((bound.round, bound.section), 0.0) / SECTION_WEIGHTS[bound.section])
        return (bound.round, share, _SECTION_INDEX[bound.section], bound.order, -1)

    def run(self, take: Callable[[Step], None], limit: tuple[float, ...] | None) -> None:
        """Take every step whose key is below ``limit`` (all of them when None), in key order."""
        heads = self.heads
        while heads and (limit is None or heads[0][0] < limit):
            _, serial, pos, steps = heapq.heappop(heads)
            # This chunk's steps are sorted: take them in a plain loop up to the next chunk's
            # head (ties go to the older chunk, as one stable sort of every step would) or the
            # limit, whichever is smaller.
            stop = heads[0][0] if heads else limit
            if limit is not None and stop is not None and limit < stop:
                stop = limit
            take(steps[pos])
            pos += 1
            end = len(steps)
            while pos < end and (stop is None or steps[pos].key < stop):
                take(steps[pos])
                pos += 1
            if pos < end:
                heapq.heappush(heads, (steps[pos].key, serial, pos, steps))


def plan(
    items: Sequence[Item],
    *,
    budget_tokens: int,
    header_tokens: dict[Section, int],
    clip: ClipFn,
    sources: Sequence[Source] = (),
) -> Plan:
    """Choose forms under ``budget_tokens``; ``header_tokens`` is each section's title cost.

    ``items`` must hold every pinned item; ``sources`` give the rest lazily (see :class:`Source`).
    Raises BudgetTooSmallError when the pinned minimum (round 0) does not fit.
    """
    items = list(items)
    pinned = [it for it in items if it.priority is Priority.PINNED]
    pinned_min = (sum(it.forms[it.min_form].tokens for it in pinned)
                  + sum(header_tokens[s] for s in {it.section for it in pinned}))
    if pinned_min > budget_tokens:
        raise BudgetTooSmallError(pinned_min, budget_tokens,
                                  "the pinned references (current input, anchor, work item)")
    run = _Run(budget_tokens=budget_tokens, header_tokens=header_tokens, clip=clip)
    sequence = _Sequence()
    sequence.add(items)
    while True:
        # The next chunk to read is the one whose steps could sort first; every step before it
        # is taken first. Once a step does not fit nothing more is read: the remaining steps
        # are only accounted (the budget at which each would enter).
        bounds = [] if run.stopped else [(sequence.bound_key(b), i) for i, src in
                                         enumerate(sources) if (b := src.bound()) is not None]
        limit, index = min(bounds) if bounds else (None, -1)
        sequence.run(run.take, limit)
        if run.stopped:
            sequence.run(run.take, None)
            break
        if limit is None:
            break
        more = sources[index].load()
        items.extend(more)
        sequence.add(more)
    return Plan(chosen=run.chosen, omitted=run.omitted, upgrade_at=run.upgrade_at,
                header_tokens=header_tokens, used_tokens=run.used,
                allocated=entitlement(items, budget_tokens, header_tokens))


@attrs.define
class _Run:
    """The progress of one plan through the step sequence."""

    budget_tokens: int
    header_tokens: dict[Section, int]
    clip: ClipFn
    used: int = 0
    stopped: bool = False
    #: Once stopped, the budget at which every step so far would fit: the plan is a prefix, so a
    #: step enters only when all the steps before it fit too.
    need: int = 0
    #: Sections whose title is already counted.
    opened: set[Section] = attrs.Factory(set)
    chosen: dict[str, tuple[Form, Rendered]] = attrs.Factory(dict)
    #: Items with no form chosen → the cumulative budget at which they would enter.
    omitted: dict[str, int] = attrs.Factory(dict)
    #: Items below their richest form → the budget at which their next form would enter.
    upgrade_at: dict[str, int] = attrs.Factory(dict)

    def take(self, step: Step) -> None:
        """Take one step of the sequence, clip the first that does not fit, or record why not."""
        item = step.item
        header = self.header_tokens[item.section] if item.section not in self.opened else 0
        cost = step.delta_tokens + header
        if step.grown is not None and self.chosen.get(item.key, (None,))[0] is not Form.FULL:
            # The full form did not enter (the plan stopped before it): nothing to grow. A
            # larger plan still takes this step before the later ones: they enter after it.
            self.need += cost
            return
        if not self.stopped and self.used + cost <= self.budget_tokens:
            self.opened.add(item.section)
            self.chosen[item.key] = (step.form, step.grown or item.forms[step.form])
            self.used += cost
            return
        if not self.stopped:
            self.stopped = True
            self.need = self.used
            if self._grow(step) if step.grown is not None else self._clip(step, header, cost):
                return
        elif step.grown is not None and item.section is Section.CURRENT_INPUT:
            # The plan stopped before the newest steps grew (on the trail of compact lines, cut
            # to fit): the few tokens that clip left are theirs, so a newest step is never shown
            # cut while the budget has a token it could use (RFC 0015). Refs are only added.
            self._spend(step)
        self.need += cost
        self.opened.add(item.section)  # counted once in `need`, as it would be in a larger plan
        if step.grown is not None:
            return  # already at its richest form: no upgrade to report
        if item.key in self.chosen:
            self.upgrade_at.setdefault(item.key, self.need)
        else:
            self.omitted.setdefault(item.key, self.need)

    def _grow(self, step: Step) -> bool:
        """Take ``step``'s fields raised as far as the room left allows, if that shows more."""
        item = step.item
        assert item.grow is not None
        base = self.chosen[item.key][1]
        grown = item.grow(self.budget_tokens - self.used + base.tokens)
        if (grown is None or grown.tokens <= base.tokens
                or not set(base.refs) <= set(grown.refs)):
            return False
        self.need = self.used + step.delta_tokens
        self.chosen[item.key] = (Form.FULL, grown)
        self.used += grown.tokens - base.tokens
        return True

    def _spend(self, step: Step) -> None:
        """After the plan stopped: ``step``'s fields raised into the room still left, if any; a
        whole form that costs no more than the capped one needs no room (any budget fits it)."""
        item = step.item
        chosen = self.chosen.get(item.key)
        if chosen is None or chosen[0] is not Form.FULL or item.grow is None:
            return
        base = chosen[1]
        room = self.budget_tokens - self.used
        if step.delta_tokens <= 0:
            grown = step.grown  # whole for no more than the capped form: it fits any room
        elif room > 0:
            grown = item.grow(room + base.tokens)
            if grown is None or grown.tokens <= base.tokens:
                return  # raised no further than the capped form: nothing more to show
        else:
            return
        if (grown is not None and grown.tokens - base.tokens <= room
                and set(base.refs) <= set(grown.refs)):
            self.chosen[item.key] = (Form.FULL, grown)
            self.used += grown.tokens - base.tokens

    def _clip(self, step: Step, header: int, cost: int) -> bool:
        """Take ``step`` clipped to the room left, if that shows more than before and loses no
        ref (a larger budget must never lose a ref: monotonicity)."""
        item = step.item
        room = self.budget_tokens - self.used - header
        prev = self.chosen.get(item.key)
        base = prev[1].tokens if prev else 0
        clipped = None
        if room > 0 and not ((item.whole or item.deferred) and prev is not None):
            if item.shrink is not None and step.form is Form.FULL:
                clipped = item.shrink(room + base)
            if clipped is None:
                clipped = self.clip(item.forms[step.form], room + base)
        if (clipped is None or clipped.tokens <= base
                or clipped.tokens - base + header > self.budget_tokens - self.used
                or (prev is not None and not set(prev[1].refs) <= set(clipped.refs))
                or (prev is not None and operator_chars(clipped) < operator_chars(prev[1]))):
            # (A pinned turn's compact form shows the operator's words whole: a full form cut
            # inside them would show more of its tool runs and less of what was asked.)
            return False
        self.need = self.used + cost
        self.upgrade_at.setdefault(item.key, self.need)
        self.opened.add(item.section)
        self.chosen[item.key] = (step.form, clipped)
        self.used += clipped.tokens - base + header
        return True


def entitlement(
    items: Sequence[Item], budget_tokens: int, header_tokens: dict[Section, int],
) -> dict[Section, int]:
    """What each section is entitled to: its pinned minimum, then a weighted share up to its demand.

    A divide-with-minimums-and-weights (as rich's ``_ratio``). It is *reported* — the manifest's
    ``allocated_tokens`` and the preview's bars — and never constrains the plan: hard per-section
    ceilings break budget monotonicity (RFC 0002, decision 1), and the plan's fixed step order
    already shares each round by these weights.
    """
    floor: dict[Section, int] = dict.fromkeys(Section, 0)
    demand: dict[Section, int] = dict.fromkeys(Section, 0)
    for item in items:
        demand[item.section] += item.forms[max(item.forms)].tokens
        if item.priority is Priority.PINNED:
            floor[item.section] += item.forms[item.min_form].tokens
    for section in Section:
        if demand[section]:
            demand[section] += header_tokens[section]
            floor[section] += header_tokens[section] if floor[section] else 0
    alloc = dict(floor)
    remaining = max(0, budget_tokens - sum(floor.values()))
    # Sections in their render order everywhere (never set order): a float sum over a set
    # depends on the hash seed, and the manifest must not.
    active = [s for s in SECTION_ORDER if demand[s] > alloc[s]]
    while remaining > 0 and active:
        # Each share is rounded against what is left of the total, so the shares add up to
        # exactly `remaining` (rich's ratio_distribute); a section capped by its demand gives
        # the rest back to the next pass.
        total_w = sum(SECTION_WEIGHTS[s] for s in active)
        left = remaining
        for s in active:
            share = round(left * SECTION_WEIGHTS[s] / total_w) if total_w > 0 else left
            total_w -= SECTION_WEIGHTS[s]
            left -= share
            give = min(share, demand[s] - alloc[s])
            alloc[s] += give
            remaining -= give
        active = [s for s in active if demand[s] > alloc[s]]
    return alloc
