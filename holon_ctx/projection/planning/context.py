"""What one projection knows before it builds any item: fixed for the call, the same at every budget.

:func:`analyse` reads it from the view (page 0 and the point queries, never a deeper page): why
the current turn exists, the work item it acts for, the pinned turns, an agent loop's previous
step, the previous exchange a short operator reply answers, and the execution frontier. Section
builders and turn items read a :class:`Context`; none of them changes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeGuard

import attrs

from holon_ctx.ledger.records import Brief, Message, MessageRole
from holon_ctx.ledger.store import LedgerStore, StoredRecord
from holon_ctx.projection.base.model import ControlState, Relation, TurnUnit
from holon_ctx.projection.base.policy import Policy
from holon_ctx.projection.base.questions import asks_question
from holon_ctx.projection.base.relation import current_relation
from holon_ctx.projection.base.topics import input_topic
from holon_ctx.projection.planning.frontier import Frontier, frontier
from holon_ctx.projection.planning.pins import pinned_turns, previous_step, tier0_units
from holon_ctx.projection.planning.view import View, units_of

__all__ = ["Context", "Exchange", "analyse", "newest_evidence"]


@attrs.frozen
class Exchange:
    """The assistant message or brief a short operator reply answers, and the turn holding it."""

    unit: TurnUnit
    message: StoredRecord


@attrs.frozen
class Context:
    view: View
    relation: Relation
    #: The work item the current turn acts for (its own, else its anchor's).
    work_item_id: str | None
    #: Tier 0: the current turn, window page 0 and the point-query turns, oldest first.
    units: tuple[TurnUnit, ...]
    #: Turn id → pinned reasons.
    pinned: Mapping[str, tuple[str, ...]]
    previous_step: TurnUnit | None
    exchange: Exchange | None
    frontier: Frontier
    #: Governed control state, read per call (it changes outside the ledger).
    control: ControlState | None
    policy: Policy
    #: Turn ids of the newest evidence, shown with no repeated-lines note (RFC 0023): the
    #: current turn, the turn before it, an agent loop's previous step and the continuation
    #: anchor. The model acts on these as it reads them, so none points back at other output.
    verbatim: frozenset[str] = frozenset()
    #: The terms of the operator's words in the current turn (RFC 0030, :mod:`.topics`): older
    #: turns sharing them rank first in their class; empty when the operator did not speak.
    topic: frozenset[str] = frozenset()

    def other_work_item(self, unit: TurnUnit) -> bool:
        """The turn acts for another work item than the current one (never chain evidence)."""
        wid = unit.turn.work_item_id
        return bool(self.work_item_id and wid and wid != self.work_item_id)


def analyse(view: View, store: LedgerStore | None, policy: Policy,
            control: ControlState | None = None) -> Context:
    cur = view.current
    wid = view.work_item.work_item_id if view.work_item else cur.turn.work_item_id
    units = tier0_units(view)
    step = previous_step(view)
    return Context(view=view, relation=current_relation(cur), work_item_id=wid,
                   units=tuple(units), pinned=pinned_turns(view), previous_step=step,
                   exchange=_find_exchange(view, store),
                   frontier=frontier(store, view, units, wid, policy), control=control,
                   policy=policy, verbatim=newest_evidence(view, step),
                   topic=input_topic(cur, [u for u in units if u is not cur]))


def newest_evidence(view: View, step: TurnUnit | None) -> frozenset[str]:
    """The turns whose tool outputs keep every line (:attr:`Context.verbatim`)."""
    ids = {view.current.turn.id}
    before = [u for u in view.window if u.turn.seq < view.current.turn.seq]
    if before:
        ids.add(max(before, key=lambda u: u.turn.seq).turn.id)
    if step is not None:
        ids.add(step.turn.id)
    if view.anchor_id:
        ids.add(view.anchor_id)
    return frozenset(ids)


#: Turns back (the anchor aside) in which an assistant statement, not a question, is taken as
#: the exchange an operator message follows up on.
_STATEMENT_TURNS = 3


def _other_item(unit: TurnUnit, view: View) -> bool:
    """``unit`` acts for another work item than the current one (as :meth:`Context.other_work_item`)."""
    mine = view.work_item.work_item_id if view.work_item else view.current.turn.work_item_id
    theirs = unit.turn.work_item_id
    return bool(mine and theirs and mine != theirs)


def _said(rec: object) -> TypeGuard[Message]:
    """An assistant message."""
    return isinstance(rec, Message) and rec.role is MessageRole.ASSISTANT


def _asks(rec: object) -> bool:
    """A record that asks the operator a question: an assistant message or a brief (any kind:
    an agent asks in a result brief too)."""
    return (isinstance(rec, Brief) or _said(rec)) and asks_question(rec.text)


def _find_exchange(view: View, store: LedgerStore | None = None) -> Exchange | None:
    """When the operator speaks, what the assistant side said last before it: the newest record
    that asks a question since the operator last spoke, whichever record holds it — an
    assistant message or a brief (any kind: an agent asks in a result brief too) — else the
    newest assistant message.

    A short reply ("y", "好", "oui", "2") means nothing without its question, and a question
    may be followed by a progress note or by ticks and retries before the reply comes, so the
    search runs back through the window (page 0) to the operator's previous words, and past it
    (:func:`_question_before`) when a long run of ticks and retries fills the window.
    """
    cur = view.current
    if not any(isinstance(r.record, Message) and r.record.by_operator for r in cur.records):
        return None
    newest: Exchange | None = None
    seen = 0
    for unit in reversed(view.window):
        if unit.turn.id == cur.turn.id:
            continue
        seen += unit.turn.id != view.anchor_id
        for stored in reversed(unit.records):
            rec = stored.record
            if isinstance(rec, Message) and rec.by_operator:
                return newest  # the operator's previous words: nothing older is answered now
            if unit.turn.id == view.anchor_id:
                continue  # the anchor is shown whole with the current input already
            if _asks(rec):
                return Exchange(unit, stored)
            if _said(rec) and seen <= _STATEMENT_TURNS and not _other_item(unit, view):
                # A statement is the exchange only when nothing since asked, and only from the
                # newest few turns; a brief that reports (a result, progress) is shown in its
                # turn, not as the exchange. Another work item's statement is that item's
                # evidence, a one-line reference (RFC 0013): the operator moving to this item
                # does not answer it (a question it asked still is what a reply answers).
                newest = newest or Exchange(unit, stored)
    if newest is None and store is not None and view.window and not view.reached_start:
        return _question_before(store, view, view.window[0].turn.seq)
    return newest


#: Turns read past the window for the question a reply answers (a few hundred ticks and
#: retries between a question and its reply; a read only when the window held neither the
#: operator's previous words nor a question).
_QUESTION_DEPTH = 256


def _question_before(store: LedgerStore, view: View, before_seq: int) -> Exchange | None:
    """The newest record asking a question in the turns before ``before_seq``, back to the
    operator's previous words (at most _QUESTION_DEPTH turns back), as :func:`_find_exchange`
    judges them; None when the operator spoke since or nothing asked."""
    cur = view.current
    spoke = store.latest_operator_turn(before_seq, view.limit_pos)
    lo = max(before_seq - _QUESTION_DEPTH, (spoke.turn_seq or 0) if spoke is not None else 0)
    for stored in reversed(store.records_of_turns(lo, before_seq - 1, view.limit_pos)):
        rec = stored.record
        if isinstance(rec, Message) and rec.by_operator:
            return None
        turn_id = getattr(rec, "turn_id", None)
        if turn_id in (view.anchor_id, cur.turn.id):
            continue
        if _asks(rec):
            turn = store.turn(turn_id) if turn_id else None
            if turn is None:
                return None
            return Exchange(units_of(store, [turn], view.limit_pos)[0], stored)
    return None
