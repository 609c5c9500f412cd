"""The session projection's tail: what changes every turn, said last and kept small (RFC 0010).

Whatever follows the history is never a cached prefix (the next request puts a new record where
the tail was), so the tail holds only what the model must see *now* and what changes as the
agent works, each in its smallest faithful form:

    ## Current state
    relation: external_continuation — an external event continuing a waiting chain
    continuing turn:t1 (operator message:m1): “Fix the flaky login test; do not touch the DB schema”
    work item w1 · status active · work_item:w9   (the compact work item: objective, todos, waits)
    execution frontier for w1: 12 tool runs (2 failed, …); 3 files modified
    files modified: src/login.py, tests/test_login.py, …
    BLOCKED ON RECONCILIATION (governed store): …   (governed control notices, when any)

The relation and anchor lines are the current input's; the work item and frontier come from the
ledger's folded state; the control notices from the governed store (RFC 0004), read per request.
Every line is a label line, so the tail's tokens add exactly.
"""

from __future__ import annotations

import attrs

from holon_ctx.ledger.records import Message, MessageRole
from holon_ctx.ledger.state import WaitState, WorkItemState
from holon_ctx.ledger.store import StoredRecord
from holon_ctx.projection.formats import RELATION_PREFIX, one_line
from holon_ctx.projection.frontier import Tally
from holon_ctx.projection.items import Block
from holon_ctx.projection.model import ControlState, Form, Relation, TurnUnit
from holon_ctx.projection.relation import RELATION_TEXT
from holon_ctx.projection.render import Renderer
from holon_ctx.projection.sections import control_blocks

__all__ = ["TAIL_TITLE", "Tail", "anchor_line", "tail_blocks"]

TAIL_TITLE = "## Current state"


@attrs.frozen
class Tail:
    """The tail's blocks and what they cost; ``refs`` are the records it names."""

    blocks: tuple[Block, ...]
    tokens: int
    refs: tuple[str, ...]

    @property
    def text(self) -> str:
        return "".join(b.text for b in self.blocks)


def anchor_line(r: Renderer, anchor: TurnUnit | None, current: TurnUnit) -> Block | None:
    """One line restating the turn the current one continues: the operator's words, else what
    triggered it. None when the current turn continues nothing."""
    if anchor is None or anchor.turn.id == current.turn.id:
        return None
    said = next((s for s in anchor.records if isinstance(s.record, Message)
                 and s.record.role is MessageRole.OPERATOR), None)
    limit = r.chars.operator_excerpt
    if said is not None:
        assert isinstance(said.record, Message)
        return r.line(f"continuing {anchor.ref} (operator {said.ref}): "
                      f"“{one_line(said.record.text, limit)}”", [anchor.ref])
    label = f": {one_line(anchor.turn.label, limit)}" if anchor.turn.label else ""
    return r.line(f"continuing {anchor.ref} ({anchor.turn.trigger}){label}", [anchor.ref])


def tail_blocks(r: Renderer, *, relation: Relation, current: TurnUnit, anchor: TurnUnit | None,
                work_item: WorkItemState | None, waits: list[WaitState], tally: Tally | None,
                frontier_cover: str, control: ControlState | None) -> Tail:
    """The tail for the current position (see the module docstring)."""
    blocks: list[Block] = [r.line(TAIL_TITLE)]
    refs: list[str] = []
    # Governed notices first: a blocked side effect is what the model must read before anything
    # else in the tail (the planner gives them the same precedence, RFC 0004).
    if control is not None:
        for lines in control_blocks(r, control):
            blocks.extend(lines)
    blocks.append(r.line(f"{RELATION_PREFIX}{relation.value} — {RELATION_TEXT[relation]} "
                         f"({current.ref})", [current.ref]))
    line = (None if anchor is None or anchor.turn.id == current.turn.id else r.memo(
        ("tail_anchor", anchor.ref, len(anchor.records)),
        lambda: anchor_line(r, anchor, current)))
    if line is not None:
        blocks.append(line)
        refs.extend(line.refs)
    if work_item is not None:
        mine = [w for w in waits if w.work_item_id in (None, work_item.work_item_id)]
        # A work item's state is the fold of its transitions: the latest transition's ref names
        # it, so its form is rendered once per transition (and per set of open waits).
        form = r.memo(("tail_work_item", work_item.ref,
                       tuple((w.wait_id, w.opened_ref) for w in mine)),
                      lambda: r.work_item(work_item, mine))
        blocks.extend(form[Form.COMPACT].blocks)
        refs.append(work_item.ref)
        if tally is not None and (tally.done or tally.pending):
            blocks.extend(tally.minimal(r, work_item.work_item_id, r.policy,
                                        frontier_cover).blocks)
    refs = list(dict.fromkeys([current.ref, *refs]))
    return Tail(blocks=tuple(blocks), tokens=sum(b.tokens for b in blocks), refs=tuple(refs))


def records_by_ref(units: list[TurnUnit]) -> dict[str, StoredRecord]:
    """Every record of these turns (turn records included) by ref."""
    out: dict[str, StoredRecord] = {}
    for unit in units:
        out[unit.ref] = unit.stored
        for stored in unit.records:
            out[stored.ref] = stored
    return out
