"""Turn items: one item per turn shown on its own, one fold line per run of low-value turns.

A turn item offers COMPACT (one line of facts) and FULL (the turn with its records); a pinned turn
also offers REF and keeps the operator's words verbatim in its compact form. Inside a tier, turns
rank pinned first, then current-chain turns, then the rest, newest first; a run of low and
diagnostic turns folds into one line (:mod:`.folding`).

A turn's forms are a function of the turn's records and of the inputs named in its memo key
(class and reasons, chain label, other-work-item label, what is shown elsewhere), so a projector
renders each turn once across the calls in which those stay the same.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import attrs

from holon_ctx.ledger.records import WorkItem
from holon_ctx.projection.base.items import BlockKind, Item, Rendered
from holon_ctx.projection.base.model import FoldManifest, Form, Omission, Priority, Section, TurnUnit
from holon_ctx.projection.base.topics import RELEVANT, holds_decision, topic_rank
from holon_ctx.projection.planning.context import Context
from holon_ctx.projection.planning.retention import Retention
from holon_ctx.projection.rendering.folding import fold_item, segment
from holon_ctx.projection.rendering.render import Instead, Renderer

__all__ = ["Tier", "TurnItems"]

#: Chain membership: turn id → the rule that put it in the current chain, or None.
ChainOf = Callable[[str], str | None]


@attrs.frozen
class Tier:
    """The turn items of one tier and the folds among them (each fold's line is one of them)."""

    items: tuple[Item, ...]
    folds: tuple[FoldManifest, ...]


class TurnItems:
    """Builds turn items for one projection (see the module docstring)."""

    def __init__(self, ctx: Context, r: Renderer, retention: Retention) -> None:
        self.ctx = ctx
        self.r = r
        self.retention = retention
        view = ctx.view
        #: Turns in view by sequence number (a loop step's predecessor, see item()).
        self._by_seq = {u.turn.seq: u for u in (*view.window, *view.extra.values(), view.current)}
        #: Turn id → :func:`.topics.topic_rank` (a turn is ranked once per projection).
        self._topic_ranks: dict[str, int] = {}

    def _in_loop(self, unit: TurnUnit | None) -> bool:
        """``unit`` is a step of the loop the current turn is in (same trigger, same anchor)."""
        cur = self.ctx.view.current.turn
        return (unit is not None and unit.turn.id != cur.id
                and unit.turn.anchor_turn_id is not None and unit.turn.trigger == cur.trigger
                and unit.turn.anchor_turn_id == cur.anchor_turn_id)

    def _plain_step_before(self, unit: TurnUnit) -> bool:
        """The turn before ``unit`` in the ledger is a plain step of the same loop: same work
        item, no outcome (its heading, if it has one, is its ref alone), in view."""
        prev = self._by_seq.get(unit.turn.seq - 1)
        return (prev is not None and self._in_loop(prev)
                and prev.turn.work_item_id == unit.turn.work_item_id and prev.turn.outcome is None)

    def item(self, unit: TurnUnit, section: Section, order: int, position: tuple[int, ...],
             chain: str | None, tier: int = 0, required: bool = False) -> Item:
        """The item of one turn; ``required``: a decision the current input is about, whose
        steps lead its tier (RFC 0030; window pages only, see :meth:`tier`)."""
        ctx, r = self.ctx, self.r
        priority, reasons = self.retention.priority(unit)
        # Another work item's turn the current chain links to (or the continuation anchor) is
        # evidence the current work needs: shown and labelled like the chain's own (RFC 0018).
        other = (ctx.other_work_item(unit) and chain is None
                 and unit.turn.id != ctx.view.anchor_id)
        elsewhere = self._elsewhere(unit, r)
        # Forms and refs follow from these inputs alone (records never change; a turn can only
        # gain records), so the renderer's memo keeps them across the projections of a turn's
        # neighbours: most of a window is the same from one turn to the next.
        loop_step, headless, anchor_stated, verbatim = self._shape(unit, section)
        memo_key = ("turn_item", unit.ref, len(unit.records), priority, reasons, other, chain,
                    loop_step, headless, anchor_stated, verbatim,
                    tuple(elsewhere.items()) if elsewhere else ())
        forms, refs, full_head = r.memo(memo_key, lambda: self._forms(
            unit, priority, reasons, other, chain, elsewhere, loop_step, headless, anchor_stated,
            verbatim))
        item_reasons = reasons
        if other and priority is not Priority.PINNED:
            # Evidence of another work item is a one-line reference however large the budget:
            # its full text would answer a question nobody is asking now, and the current
            # chain reaches it through a link, a pin or its anchor (see above) when it
            # does need it. The manifest says why the rest of the turn is left out.
            forms = {Form.COMPACT: forms[Form.COMPACT]}
            item_reasons = (*reasons, Omission.OTHER_WORK_ITEM.value)
        if priority is not Priority.PINNED and self._topic_rank(unit) == 0:
            item_reasons = (*item_reasons, RELEVANT)
        grow = None
        if Form.FULL in forms and any(b.excerpt for b in forms[Form.FULL].blocks):
            def grow(limit: int | None) -> Rendered | None:
                return r.turn_full_within(unit, full_head, elsewhere, limit,
                                          exact=section is Section.CURRENT_INPUT,
                                          verbatim=verbatim)
        shrink = None
        if Form.FULL in forms and r.huge(unit):
            def shrink(limit: int) -> Rendered | None:
                return r.turn_newest_within(unit, full_head, elsewhere, limit,
                                            verbatim=verbatim)
        return Item(key=unit.ref, section=section, priority=priority, reasons=item_reasons,
                    order=order, position=position, forms=forms, refs=refs,
                    chain=chain, kind="turn", tier=tier, grow=grow, shrink=shrink,
                    required=required and priority is not Priority.PINNED,
                    # A turn the current input continues (its anchor chain) is never an
                    # unrelated topic, whatever its words: the runtime says it is the subject.
                    deferred=(priority is not Priority.PINNED and chain is None
                              and unit.turn.id != ctx.view.anchor_id
                              and self._topic_rank(unit) == 2))

    def _elsewhere(self, unit: TurnUnit, r: Renderer) -> dict[str, Instead]:
        """The turn's records the prompt shows elsewhere, each with what to say instead."""
        ctx = self.ctx
        # The previous exchange's assistant message is shown once, in the current-input section.
        elsewhere: dict[str, Instead] = (
            {ctx.exchange.message.ref: "shown below as the previous exchange"}
            if ctx.exchange is not None and ctx.exchange.unit.turn.id == unit.turn.id else {})
        if unit.turn.id not in ctx.pinned:
            elsewhere.update(ctx.frontier.stubs(unit, r))
        elsewhere.update(self.objectives_set(unit))
        return elsewhere

    def _shape(self, unit: TurnUnit, section: Section) -> tuple[bool, bool, bool, bool]:
        """How the turn is laid out where it is: (a step of the current loop, shown without a
        heading, its anchor stated right above it, its tool outputs kept verbatim)."""
        ctx = self.ctx
        cur = ctx.view.current.turn
        # A step of the loop the current turn is in: the relation line and the current turn's
        # heading state its trigger and anchor once for every step (RFC 0012-densea).
        loop_step = self._in_loop(unit)
        # A loop step among the recent turns shows no heading when the turn before it in the
        # ledger is a step of the same loop: its message's fence opens it (see _forms), and its
        # turn ref is in the manifest and on its stub (RFC 0019). The first step after the
        # anchor or after another kind of turn, and every step of the current input, keep one:
        # a step never reads as part of an operator's turn shown before it.
        headless = (loop_step and section is Section.RECENT_TURNS
                    and self._plain_step_before(unit))
        # The current turn's relation line names its anchor right above its heading (the
        # current-input section; a session's history has no relation line above it).
        anchor_stated = (unit.turn.id == cur.id and section is Section.CURRENT_INPUT
                         and unit.turn.anchor_turn_id is not None
                         and unit.turn.anchor_turn_id == ctx.view.anchor_id)
        # The newest evidence keeps every line of its tool outputs (RFC 0023).
        verbatim = section is Section.CURRENT_INPUT or unit.turn.id in ctx.verbatim
        return loop_step, headless, anchor_stated, verbatim

    def _topic_rank(self, unit: TurnUnit) -> int:
        """:func:`.topics.topic_rank` of ``unit``, computed once per turn and projection."""
        found = self._topic_ranks.get(unit.turn.id)
        if found is None:
            found = self._topic_ranks[unit.turn.id] = topic_rank(unit, self.ctx.topic)
        return found

    def required(self, unit: TurnUnit) -> bool:
        """A relevant turn holding a decision (:func:`.topics.is_required`)."""
        return self._topic_rank(unit) == 0 and holds_decision(unit)

    def objectives_set(self, unit: TurnUnit) -> dict[str, Instead]:
        """The line each work-item record of ``unit`` shows when the objective it set is still
        the current work item's: named, not repeated (the work item section states it, and an
        objective that is a task's opening paragraph is hundreds of tokens; RFC 0015)."""
        state = self.ctx.view.work_item
        out: dict[str, Instead] = {}
        if state is None:
            return out
        for stored in unit.records:
            rec = stored.record
            # A short objective is said again (naming it would cost as much).
            if (isinstance(rec, WorkItem) and rec.work_item_id == state.work_item_id
                    and rec.objective is not None and rec.objective == state.objective
                    and len(rec.objective) > self.r.chars.objective_spoken):
                out[stored.ref] = (self.r.work_item_change(stored, rec, current_objective=True,
                                                           current=state),)
        return out

    def _forms(self, unit: TurnUnit, priority: Priority, reasons: tuple[str, ...],
               other: bool, chain: str | None, elsewhere: dict[str, Instead], loop_step: bool,
               headless: bool = False, anchor_stated: bool = False, verbatim: bool = False,
               ) -> tuple[dict[Form, Rendered], tuple[str, ...], str]:
        """The item's forms, its refs, and the heading of its full form ("" for none)."""
        r = self.r
        head = r.turn_head(unit, priority=priority, reasons=reasons, other_work_item=other,
                           chain=chain, loop_step=loop_step, anchor_stated=anchor_stated)
        forms = {Form.COMPACT: r.turn_compact(unit, head)}
        full_head = head
        if not other or priority is Priority.PINNED:
            # Another work item's turn offers its compact form alone (see item()): its full
            # form would never be read, and rendering it is most of a cold turn's cost.
            body = r.turn_body(unit, elsewhere, verbatim=verbatim)
            if (headless and head == f"turn:{unit.turn.id}" and body
                    and body[0].kind is BlockKind.FENCED and body[0].head.count("\n") == 1):
                # Only a heading that says nothing but the ref goes (an outcome or another
                # work item stays said), and only a fence that names its record opens a step
                # (a fenced block whose head is its fence line alone, no label above it):
                # a step that begins with a label line (its message shown elsewhere) keeps it.
                full_head = ""
            forms[Form.FULL] = r.turn_full(unit, full_head, elsewhere=elsewhere,
                                           verbatim=verbatim)
        if priority is Priority.PINNED:
            forms[Form.REF] = r.turn_ref(unit)
            # A pinned turn's compact form keeps the operator's words verbatim: they are why
            # the turn is pinned, and a one-line excerpt can cut the constraint that matters.
            forms[Form.COMPACT] = r.turn_compact_verbatim(unit, head)
        refs = tuple(dict.fromkeys([unit.ref, *(s.ref for s in unit.records
                                                if not isinstance(elsewhere.get(s.ref), str))]))
        return forms, refs, full_head

    def tier(self, units: Iterable[TurnUnit], tier: int, skip: set[str],
             chain_of: ChainOf) -> Tier:
        """Turn items of one tier, runs of low-value turns folded into one counted line each.

        ``skip`` holds turns shown elsewhere (the current turn, the anchor, a pinned or earlier
        tier's turn): a run never spans one, so the same run folds the same way at every budget.
        """
        ordered = sorted(units, key=lambda u: u.turn.seq)
        pinned = self.ctx.pinned

        def rank(u: TurnUnit) -> tuple[int, int, int, int]:
            # Pinned first, then current-chain turns, then turns relevant to the current input,
            # unrelated ones, unrelated decisions (RFC 0030); each newest first.
            return (0 if u.turn.id in pinned else 1, 0 if chain_of(u.turn.id) else 1,
                    self._topic_rank(u), -u.turn.seq)

        shown = sorted((u for u in ordered if u.turn.id not in skip), key=rank)
        ranks = {u.turn.id: i for i, u in enumerate(shown)}
        items: list[Item] = []
        folds: list[FoldManifest] = []
        for part in segment(ordered, skip=lambda u: u.turn.id in skip,
                            folds=lambda u: self.retention.priority(u)[0] >= Priority.LOW):
            if isinstance(part, list):
                item, fold = fold_item(self.r, part, self.retention.facts,
                                       order=ranks[part[-1].turn.id], tier=tier)
                items.append(item)
                folds.append(fold)
            else:
                items.append(self.item(part, Section.RECENT_TURNS, ranks[part.turn.id],
                                       (part.turn.seq,), chain_of(part.turn.id), tier,
                                       required=self.required(part)))
        return Tier(items=tuple(items), folds=tuple(folds))
