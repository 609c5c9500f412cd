"""The history as the planner reads it: page 0 with the view, then two lazy sources.

* **Window pages** (:class:`Pages`): page k of the recent window is tier k; its turns are ranked
  and folded there (:mod:`.turns`).
* **High turns** (:class:`HighTurns`): turns marked high anywhere in the history, newest first,
  fetched by lookup (``LedgerStore.high_turns_before``). The n-th newest high turn (page 0's high
  turns included) belongs to tier ``n // Policy.high_turns_per_tier``: a page of high turns
  beside each page of recent turns (RFC 0002, decision 8). High turns run ahead of the pages, so a
  high turn 500 turns back competes with page 0's normal turns on its priority. The lookup stops
  at the archive frontier: archived turns are represented by their episodes.

The planner asks a source for its next chunk only when every step that sorts before it has fitted
(:class:`~holon_ctx.projection.planning.planner.Source`), so a projection reads what its budget needs.

A :class:`History` is the one stateful part of a projection, and its state is what has been read:
the pages, the chain tracker fed with them newest first (RFC 0002, decision 4), the retention
facts of their turns, which turns already have an item, and every chunk's items and folds
(:attr:`History.tiers`, returned by each read, not collected as a side effect of rendering).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from holon_ctx.ledger.facts import HIGH_FACTS
from holon_ctx.ledger.store import LedgerStore, StoredRecord
from holon_ctx.projection.base.chains import ChainTracker
from holon_ctx.projection.base.items import Item
from holon_ctx.projection.base.model import (
    EpisodeSource,
    Priority,
    RecalledEpisode,
    Section,
    TurnUnit,
)
from holon_ctx.projection.planning.context import Context
from holon_ctx.projection.planning.planner import Bound, tier_start
from holon_ctx.projection.planning.retention import (
    Retention,
    extends_fold_run,
    lowered_by_repeat,
)
from holon_ctx.projection.planning.turns import Tier, TurnItems
from holon_ctx.projection.planning.view import Page, load_page, units_of

__all__ = ["HighTurns", "History", "Pages", "episode_spans", "stored_turn_seq"]

#: High turns read per lookup: small, so the reads follow the budget closely.
_HIGH_CHUNK = 16
#: Ranks of high-turn items start here: after every page item of their tier.
_HIGH_ORDER = 1 << 20
#: Turns read before a looked-up wake that may be a redelivered copy (HighTurns._context): a
#: copy usually follows its original within a few ticks or retries.
_REPEAT_CONTEXT = 16


def episode_spans(store: LedgerStore | None, recalled: Sequence[RecalledEpisode],
                  turn_seq: Callable[[str], int | None] | None = None) -> list[tuple[int, int]]:
    """Turn sequence ranges (closed) of ``recalled``: what each episode covers. ``turn_seq``: a
    turn's sequence number by id, None for a turn the store does not hold (default: read from
    ``store``, :func:`stored_turn_seq`)."""
    seq_of = turn_seq or (lambda turn_id: stored_turn_seq(store, turn_id))
    spans = []
    for ep in recalled:
        first, last = (seq_of(ref.removeprefix("turn:")) for ref in ep.covers)
        if first is not None and last is not None:
            spans.append((first, last))
    return spans


def stored_turn_seq(store: LedgerStore | None, turn_id: str) -> int | None:
    """The sequence number of turn ``turn_id`` in ``store`` (None: not there)."""
    found = store.turn(turn_id) if store else None
    return None if found is None else found.turn_seq or 0


class History:
    def __init__(self, ctx: Context, store: LedgerStore | None, retention: Retention,
                 turns: TurnItems, episodes: EpisodeSource | None = None, *,
                 spans: Sequence[tuple[int, int]] | None = None) -> None:
        self.ctx = ctx
        self.episodes = episodes
        self.store = store
        self.retention = retention
        self.turns = turns
        view = ctx.view
        self.tracker = ChainTracker(view.current, ctx.work_item_id)
        for unit in reversed(view.window):
            self.tracker.feed(unit)
        for unit in sorted(view.extra.values(), key=lambda u: u.turn.seq, reverse=True):
            self.tracker.feed(unit)
        retention.read(view.first_page)
        #: Pages read, page 0 first.
        self.pages: list[Page] = [view.first_page]
        #: Every turn read (tier 0, pages, high turns), for repeated-tool folds in the manifest.
        self.units: list[TurnUnit] = list(ctx.units)
        #: Turn items and folds of each chunk read: tier 0 first, then in the order read.
        self.tiers: list[Tier] = []
        #: Turns that have an item (or are shown elsewhere): a later chunk skips them.
        self.itemized: set[str] = {u.turn.id for u in ctx.units}
        self.recalled: Sequence[RecalledEpisode] = ()
        #: High turns read by lookup (older than page 0).
        self.high_read = 0
        #: The recalled episodes' turn ranges: read on first use, or given (a session's re-plan
        #: reads them once per position, :class:`~holon_ctx.projection.session.replan.Prepared`).
        self._spans: list[tuple[int, int]] | None = None if spans is None else list(spans)

    def chain_of(self, turn_id: str) -> str | None:
        """The chain rule of a turn read so far (None: not in the current chain)."""
        return self.tracker.chain.get(turn_id)

    def _shown_with_input(self) -> set[str]:
        """Turns the recent-turns section never shows: they are in the current-input section."""
        view = self.ctx.view
        skip = {view.current.turn.id}
        if view.anchor_id:
            skip.add(view.anchor_id)
        if self.ctx.previous_step is not None:
            skip.add(self.ctx.previous_step.turn.id)
        return skip

    def tier0(self, recalled: Sequence[RecalledEpisode], known: Tier | None = None) -> Tier:
        """Window page 0 and the pinned turns fetched by point query (tier 0). ``known``: the
        tier another History of the same context and recalled episodes made (what it reads —
        page 0's facts, the chains fed at construction, the spans — is the same before any
        later page is read, and building it only fills memos; a session's re-plan reuses it
        across plan budgets, :class:`~holon_ctx.projection.session.replan.Prepared`)."""
        self.recalled = recalled
        if known is not None:
            self.tiers.append(known)
            return known
        view = self.ctx.view
        # A window turn a recalled episode covers is shown by the episode (as on deeper pages);
        # a pinned one keeps its own item.
        covered = {u.turn.id for u in view.window
                   if u.turn.id not in self.ctx.pinned and self.covered(u)}
        tier = self.turns.tier([*view.window, *view.extra.values()], 0,
                               self._shown_with_input() | covered, self.chain_of)
        self.tiers.append(tier)
        return tier

    def sources(self) -> tuple[Pages, HighTurns]:
        return Pages(self), HighTurns(self)

    def covered(self, unit: TurnUnit) -> bool:
        """A turn a recalled episode covers: the episode shows it, not a turn item."""
        return any(lo <= unit.turn.seq <= hi for lo, hi in self._episode_spans())

    def _episode_spans(self) -> list[tuple[int, int]]:
        """Turn sequence ranges (closed) of the recalled episodes."""
        if self._spans is None:
            self._spans = episode_spans(self.store, self.recalled)
        return self._spans

    def page(self, index: int) -> Tier | None:
        """Read window page ``index`` (tier ``index``); None when there is no such page."""
        last = self.pages[-1]
        if last.last or self.store is None:
            return None
        view = self.ctx.view
        oldest = last.units[0].turn.seq if last.units else view.current.turn.seq
        page = load_page(self.store, before_seq=oldest, index=index, limit_pos=view.limit_pos,
                         limits=self.ctx.policy.window, extend=extends_fold_run)
        self.pages.append(page)
        if not page.units:
            return None
        self.retention.read(page)
        for unit in reversed(page.units):
            self.tracker.feed(unit)
        self.units.extend(u for u in page.units if u.turn.id not in self.itemized)
        # Page k > 0 is read only once every tier-0 item, recalled episodes included, is in its
        # full form: a turn an episode covers is shown by that episode, not twice. A high turn
        # read by lookup already has its item.
        skip = self._shown_with_input() | set(view.extra) | self.itemized | {
            u.turn.id for u in page.units if self.covered(u)}
        tier = self.turns.tier(page.units, index, skip, self.chain_of)
        self.itemized.update(u.turn.id for u in page.units)
        self.tiers.append(tier)
        return tier


class Pages:
    """Window pages 1, 2, … as a planner source (tier k starts at round ``tier_start(k)``)."""

    def __init__(self, history: History) -> None:
        self.history = history
        self.done = False

    def bound(self) -> Bound | None:
        h = self.history
        if self.done or h.pages[-1].last or h.store is None:
            return None
        # A page may hold decisions the current input is about: their steps lead the round.
        return Bound(tier_start(len(h.pages)), Section.RECENT_TURNS, 0, lead=True)

    def load(self) -> Sequence[Item]:
        tier = self.history.page(len(self.history.pages))
        if tier is None:
            self.done = True
            return ()
        return tier.items


class HighTurns:
    """Turns marked high older than page 0, newest first, by lookup, as a planner source."""

    def __init__(self, history: History) -> None:
        self.history = history
        view = history.ctx.view
        self.per_tier = history.ctx.policy.high_turns_per_tier
        self.before = view.window[0].turn.seq if view.window else view.current.turn.seq
        #: High turns newer than the lookup (page 0's): they hold ranks 0 … base-1. A turn is in
        #: the store's index exactly when it has a high fact (the facts are already known).
        self.base = sum(1 for u in view.window
                        if any(f in HIGH_FACTS for f in history.retention.facts(u)))
        #: Index entries consumed so far (the next one has rank base + taken).
        self.taken = 0
        self.peeked: list[StoredRecord] | None = None
        self.done = history.store is None
        self.last_chunk = False
        self._frontier: int | None = None
        self._frontier_known = False

    def _archived_through(self) -> int | None:
        """Turns up to this sequence are archived: their episodes represent them, not turns."""
        if not self._frontier_known:
            source = self.history.episodes
            self._frontier = None if source is None else source.archived_through(
                self.before, self.history.ctx.view.limit_pos)
            self._frontier_known = True
        return self._frontier

    def _rank_tier(self, rank: int) -> int:
        return rank // self.per_tier

    def _peek(self) -> list[StoredRecord]:
        h = self.history
        if self.peeked is None:
            assert h.store is not None
            rank = self.base + self.taken
            # A chunk never crosses a tier boundary, so its bound is exact.
            count = min(_HIGH_CHUNK, self.per_tier - rank % self.per_tier)
            found = h.store.high_turns_before(self.before, count, h.ctx.view.limit_pos)
            frontier = self._archived_through()
            if frontier is not None and found and (found[-1].turn_seq or 0) <= frontier:
                found = [t for t in found if (t.turn_seq or 0) > frontier]
                self.done = not found  # nothing older than these will be read
                self.last_chunk = True
            self.peeked = found
        return self.peeked

    def bound(self) -> Bound | None:
        if self.done or not self._peek():
            self.done = True
            return None
        # With a topic, a chunk may hold decisions the input is about, which lead the round: it
        # is read at the round's start (without one, after page 0's high turns, as before).
        return Bound(tier_start(self._rank_tier(self.base + self.taken)), Section.RECENT_TURNS,
                     _HIGH_ORDER + self.taken, lead=bool(self.history.ctx.topic))

    def _context(self, unit: TurnUnit) -> list[TurnUnit]:
        """The turns just before a looked-up turn that a neighbour may make low (a redelivered
        wake naming a wait), to judge it as a page would; a few, so a copy after a longer run
        of ticks is judged alone and kept (classified up)."""
        h = self.history
        if h.store is None or not lowered_by_repeat(unit):
            return []
        limit = h.ctx.view.limit_pos
        return units_of(h.store, h.store.turns_before(unit.turn.seq, _REPEAT_CONTEXT, limit), limit)

    def load(self) -> Sequence[Item]:
        h = self.history
        turns = self._peek()
        self.peeked = None
        self.done = self.last_chunk
        assert h.store is not None
        assert turns, "load() after bound() said there is a chunk"
        self.before = turns[-1].turn_seq or 0
        units = units_of(h.store, turns, h.ctx.view.limit_pos)
        first = self.taken
        self.taken += len(turns)
        h.high_read += len(turns)
        skip = h._shown_with_input() | set(h.ctx.view.extra) | h.itemized
        items: list[Item] = []
        for i, unit in enumerate(sorted(units, key=lambda u: -u.turn.seq)):
            if unit.turn.id in skip or h.covered(unit):
                continue
            h.retention.read_alone(unit, self._context(unit))
            if h.retention.priority(unit)[0] is not Priority.HIGH:
                continue  # pinned (shown elsewhere) or not high as of this turn
            rank = first + i
            items.append(h.turns.item(unit, Section.RECENT_TURNS, _HIGH_ORDER + rank,
                                      (unit.turn.seq,), h.tracker.peek(unit),
                                      self._rank_tier(self.base + rank),
                                      required=h.turns.required(unit)))
            h.itemized.add(unit.turn.id)
            h.units.append(unit)
        h.tiers.append(Tier(items=tuple(items), folds=()))
        return items

