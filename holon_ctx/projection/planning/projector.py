"""The orchestrator: one call per model turn, from a store to a Projection. It never writes.

    view     = load_view(store, at)                      view.py      bounded, indexed reads
    ctx      = analyse(view)                             context.py   relation, work item, pins
                                                                      (pins.py), previous step,
                                                                      exchange, frontier
    items    = sections + tier-0 turns                   sections.py, turns.py, folding.py
    plan     = plan(items, budget, history.sources())    planner.py   prefix of a budget-
                                                                      independent order; deeper
                                                                      pages and high turns read
                                                                      as it asks (history.py)
    result   = assemble(reading, items, plan)            manifest.py  text, manifest, decisions

Rendering (render.py, formats.py), clipping (clipping.py) and every limit (policy.py) are shared
by the stages. This is the only module that composes the others; the module docstrings say how
each stage works, and RFC 0002 why.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from holon_ctx.errors import EngineError, InputError, quote_value
from holon_ctx.ledger.store import LedgerStore
from holon_ctx.projection.base.items import Item
from holon_ctx.projection.base.model import ControlSource, EpisodeSource, RecalledEpisode, Section
from holon_ctx.projection.base.policy import Policy, WindowLimits
from holon_ctx.projection.base.waits import settle_control
from holon_ctx.projection.planning import sections
from holon_ctx.projection.planning.context import Context, analyse
from holon_ctx.projection.planning.history import History
from holon_ctx.projection.planning.manifest import (
    SECTION_TITLES,
    ItemDecision,
    Projection,
    Reading,
    assemble,
)
from holon_ctx.projection.planning.planner import Plan, plan
from holon_ctx.projection.planning.retention import FactsCache, Retention, extends_fold_run
from holon_ctx.projection.planning.shown_lines import fold_shown_lines
from holon_ctx.projection.planning.turns import TurnItems
from holon_ctx.projection.planning.view import load_view
from holon_ctx.projection.rendering.clipping import Clipper
from holon_ctx.projection.rendering.render import Renderer
from holon_ctx.tokens import TokenCounter, store_counter

__all__ = ["SECTION_TITLES", "ItemDecision", "Projection", "Projector", "plan_and_assemble"]


class Projector:
    """``Projector(store).project(budget_tokens=8192)`` — see the module docstring.

    Keep one per ledger: it remembers what cannot change between calls (rendered turns, retention
    facts), so a runtime's per-turn call costs what the budget needs, not the history's length.
    ``limits`` overrides ``policy.window`` (kept for callers that only size the window).
    """

    def __init__(self, store: LedgerStore, counter: TokenCounter | None = None,
                 *, limits: WindowLimits | None = None,
                 episodes: EpisodeSource | None = None,
                 control: ControlSource | None = None,
                 policy: Policy | None = None) -> None:
        self.store = store
        self.episodes = episodes
        self.control = control
        self.counter = counter or store_counter(store)
        policy = policy or Policy()
        self.policy = policy if limits is None else attrs.evolve(policy, window=limits)
        self.limits = self.policy.window
        self.renderer = Renderer(self.counter, store.counter_identity, self.policy, store=store)
        self._facts = FactsCache()
        self._headers = {s: self.counter.count(SECTION_TITLES[s] + "\n") for s in Section}

    def project(self, *, budget_tokens: int, at: str | None = None,
                verify: bool = False, limit_pos: int | None = None) -> Projection:
        """The prompt for turn ``at`` (default: the latest) under ``budget_tokens``; with
        ``limit_pos``, as of the records before that ledger position (a replay of a model call
        in the middle of a turn).

        Raises :class:`~holon_ctx.errors.InputError` for a budget that is not a positive number,
        :class:`~holon_ctx.errors.UnknownRefError` for an unknown turn,
        :class:`~holon_ctx.errors.BudgetTooSmallError` when the pinned minimum does not fit, and
        :class:`~holon_ctx.errors.EngineError` (an engine bug, not bad input) when ``verify``
        finds that the planned count disagrees with the text.
        """
        if isinstance(budget_tokens, bool) or not isinstance(budget_tokens, int) \
                or budget_tokens <= 0:
            raise InputError(f"budget must be a positive number of tokens, got {quote_value(budget_tokens)}",
                             path="budget_tokens")
        r = self.renderer
        view = load_view(self.store, at=at, extend=extends_fold_run, policy=self.policy,
                         limit_pos=limit_pos)
        # Control state is read per call: it changes outside the ledger (reconciliation).
        control = settle_control(self.store, self.control.control_state(), view.limit_pos) \
            if self.control else None
        ctx = analyse(view, self.store, self.policy, control)
        retention = Retention(ctx.pinned, self._facts)
        turns = TurnItems(ctx, r, retention)
        history = History(ctx, self.store, retention, turns, self.episodes)
        episode_items, recalled = sections.episodes(ctx, r, self.episodes)
        items = [*sections.environment(ctx, r), *sections.control(ctx, r),
                 *sections.work_item(ctx, r), *sections.work_refs(ctx, r), *episode_items,
                 *history.tier0(recalled).items,
                 *sections.current_input(ctx, r, turns, history.chain_of)]
        projection, _ = plan_and_assemble(ctx, history, items, recalled, r,
                                          budget_tokens=budget_tokens, headers=self._headers)
        if verify:
            actual = self.counter.count(projection.text)
            if actual != projection.used_tokens:
                raise EngineError(
                    f"planned {projection.used_tokens} tokens, the text has {actual}")
        return projection


def plan_and_assemble(ctx: Context, history: History, items: list[Item],
                      recalled: Sequence[RecalledEpisode], r: Renderer, *, budget_tokens: int,
                      headers: dict[Section, int]) -> tuple[Projection, Plan]:
    """Plan ``items`` (and the deeper pages ``history`` reads as the planner asks) under
    ``budget_tokens`` and assemble the projection; the plan too (a session's re-plan reads it).
    Shared by the stateless call and a session's re-plan (:mod:`.replan`)."""
    chosen = plan(items, budget_tokens=budget_tokens, header_tokens=headers,
                  clip=Clipper(r).clip, sources=history.sources())
    deeper = [item for tier in history.tiers[1:] for item in tier.items]
    # Once every form is chosen: lines an output shown above printed are shown once (RFC 0016).
    chosen = fold_shown_lines(chosen, [*items, *deeper], r.counter, budget_tokens,
                              frozenset(f"turn:{t}" for t in ctx.verbatim))
    reading = Reading(view=ctx.view, relation=ctx.relation, pages=tuple(history.pages),
                      units=tuple(history.units),
                      folds=tuple(f for tier in history.tiers for f in tier.folds),
                      reruns=ctx.frontier.reruns(), recalled=tuple(recalled),
                      high_read=history.high_read)
    return assemble(reading, [*items, *deeper], chosen, budget_tokens, r), chosen
