"""The recent window as the planner reads it: page 0 with the view, deeper pages on demand.

A :class:`History` is the one stateful part of a projection, and its state is what has been read:
the pages, the chain tracker fed with them newest first (RFC 0002, decision 4), the retention
facts of their turns, and the turn items and folds each page produced (returned as a
:class:`~holon_ctx.projection.turns.Tier` and kept in :attr:`History.tiers`). The planner asks for
page k+1 (:meth:`History.more`) only when every step of pages 0..k fitted, so the window is
exactly as deep as the budget needs.
"""

from __future__ import annotations

from collections.abc import Sequence

from holon_ctx.ledger.store import LedgerStore
from holon_ctx.projection.chains import ChainTracker
from holon_ctx.projection.context import Context
from holon_ctx.projection.items import Item
from holon_ctx.projection.model import RecalledEpisode, TurnUnit
from holon_ctx.projection.retention import Retention, in_fold_run
from holon_ctx.projection.turns import Tier, TurnItems
from holon_ctx.projection.view import Page, load_page

__all__ = ["History"]


class History:
    def __init__(self, ctx: Context, store: LedgerStore | None, retention: Retention,
                 turns: TurnItems) -> None:
        self.ctx = ctx
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
        #: Every turn read (tier 0 and deeper pages), for repeated-tool folds in the manifest.
        self.units: list[TurnUnit] = list(ctx.units)
        #: Turn items and folds of each tier read, tier 0 first.
        self.tiers: list[Tier] = []
        self.recalled: Sequence[RecalledEpisode] = ()
        self._spans: list[tuple[int, int]] | None = None

    def chain_of(self, turn_id: str) -> str | None:
        """The chain rule of a turn read so far (None: not in the current chain)."""
        return self.tracker.chain.get(turn_id)

    def _skip(self) -> set[str]:
        """Turns the recent-turns section never shows: they are in the current-input section."""
        view = self.ctx.view
        skip = {view.current.turn.id}
        if view.anchor_id:
            skip.add(view.anchor_id)
        if self.ctx.previous_step is not None:
            skip.add(self.ctx.previous_step.turn.id)
        return skip

    def tier0(self, recalled: Sequence[RecalledEpisode]) -> Tier:
        """Window page 0 and the pinned turns fetched by point query (tier 0)."""
        self.recalled = recalled
        view = self.ctx.view
        tier = self.turns.tier([*view.window, *view.extra.values()], 0, self._skip(),
                               self.chain_of)
        self.tiers.append(tier)
        return tier

    def more(self, index: int) -> list[Item] | None:
        """Items of window page ``index`` (tier ``index``), or None when there is no such page."""
        last = self.pages[-1]
        if last.last or self.store is None or len(self.pages) != index:
            return None
        view = self.ctx.view
        oldest = last.units[0].turn.seq if last.units else view.current.turn.seq
        page = load_page(self.store, before_seq=oldest, index=index, limit_pos=view.limit_pos,
                         limits=self.ctx.policy.window, extend=in_fold_run)
        self.pages.append(page)
        if not page.units:
            return None
        self.retention.read(page)
        for unit in reversed(page.units):
            self.tracker.feed(unit)
        self.units.extend(u for u in page.units if u.turn.id not in view.extra)
        # Page k > 0 is read only once every tier-0 item, recalled episodes included, is in its
        # full form: a turn an episode covers is shown by that episode, not twice.
        covered = self._episode_spans()
        skip = self._skip() | set(view.extra) | {
            u.turn.id for u in page.units if any(lo <= u.turn.seq <= hi for lo, hi in covered)}
        tier = self.turns.tier(page.units, index, skip, self.chain_of)
        self.tiers.append(tier)
        return list(tier.items)

    def _episode_spans(self) -> list[tuple[int, int]]:
        """Turn sequence ranges (closed) of the recalled episodes."""
        if self._spans is None:
            self._spans = []
            for ep in self.recalled:
                ends = [self.store.turn(ref.removeprefix("turn:")) if self.store else None
                        for ref in ep.covers]
                if ends[0] is not None and ends[1] is not None:
                    self._spans.append((ends[0].turn_seq or 0, ends[1].turn_seq or 0))
        return self._spans
