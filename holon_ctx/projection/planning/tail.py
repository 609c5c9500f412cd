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

from collections.abc import Mapping, Sequence

import attrs

from holon_ctx.ledger.records import Message, MessageRole
from holon_ctx.ledger.state import WaitState, WorkItemState
from holon_ctx.ledger.store import StoredRecord
from holon_ctx.projection.base.formats import RELATION_PREFIX, label_value, speech
from holon_ctx.projection.base.items import Block, Mark
from holon_ctx.projection.base.model import ControlState, Relation, TurnUnit
from holon_ctx.projection.base.relation import RELATION_TEXT
from holon_ctx.projection.base.waits import Settled
from holon_ctx.projection.planning.frontier import Tally, files_line
from holon_ctx.projection.planning.sections import control_blocks
from holon_ctx.projection.rendering.render import Renderer, settled_line

__all__ = ["TAIL_TITLE", "Tail", "anchor_line", "frontier_lines", "tail_blocks", "wait_lines",
           "work_item_head", "work_item_lines"]

TAIL_TITLE = "## Current state"
#: Characters of the anchor's words and of the work item's objective the tail repeats: enough to
#: say which request this is; the whole text is in the history.
TAIL_EXCERPT = 100
TAIL_OBJECTIVE = 120
#: Open waits the tail states in full; older ones are named by id.
MAX_WAIT_LINES = 3


@attrs.frozen
class Tail:
    """The tail's blocks and what they cost; ``refs`` are the records it names."""

    blocks: tuple[Block, ...]
    tokens: int
    refs: tuple[str, ...]
    #: The blocks' text, joined once (a walk measures the tail after every record).
    text: str = attrs.field(init=False)

    @text.default
    def _text(self) -> str:
        return "".join(b.text for b in self.blocks)


def anchor_line(r: Renderer, anchor: TurnUnit | None, current: TurnUnit) -> Block | None:
    """One line restating the turn the current one continues: the operator's words, else what
    triggered it. None when the current turn continues nothing."""
    if anchor is None or anchor.turn.id == current.turn.id:
        return None
    said = next((s for s in anchor.records if isinstance(s.record, Message)
                 and s.record.role is MessageRole.OPERATOR), None)
    # A pointer, not a copy: the words are in the history (pinned there at every re-plan), and
    # the tail is re-sent with every request.
    limit = TAIL_EXCERPT
    if said is not None:
        assert isinstance(said.record, Message)
        return r.line(f"continuing {anchor.ref} (operator {said.ref}): "
                      f"{speech(said.record.text, limit)}", [anchor.ref])
    label = f": {label_value(anchor.turn.label, limit)}" if anchor.turn.label else ""
    return r.line(f"continuing {anchor.ref} ({anchor.turn.trigger}){label}", [anchor.ref])


def tail_blocks(r: Renderer, *, relation: Relation, current: TurnUnit, anchor: TurnUnit | None,
                work_item: WorkItemState | None, waits: list[WaitState], tally: Tally | None,
                frontier_cover: str, control: ControlState | None,
                run: Block | None = None, effects: Sequence[Block] = (),
                held: Mapping[str, str] | None = None, stated: bool = True,
                settled: Sequence[Settled] = (), anchor_shown: bool = False,
                ends_request: bool = False, work_in_history: bool = False) -> Tail:
    """The tail for the current position (see the module docstring); ``run`` counts a run of
    low-value turns still going on; ``held``: constraints whose words the history shows
    (:func:`~holon_ctx.projection.planning.sections.held_words`), named instead of repeated.

    ``stated=False`` (a *whole* epoch, RFC 0025: the history holds every record) leaves out what
    the history's records already say — the relation, the anchor, the work item, the frontier —
    and keeps only what no record in the request says: the governed notices, side effects not
    resolved, a run of low-value turns not in the history yet. With none of those the tail is
    empty (no blocks, no title).

    ``anchor_shown``: the history shows the anchor turn (its operator's words whole): the tail
    then names no anchor line, the words being in the request already (RFC 0025, decision 4);
    the line returns when the history does not show it. Nothing left to state, the tail is
    empty too, unless it ``ends_request`` (a provider request must end on a user turn).

    ``work_in_history``: a planned epoch's history says the work item and the frontier
    (:mod:`.work_state`, RFC 0025 decision 5): the tail leaves them out."""
    blocks: list[Block] = [r.line(TAIL_TITLE)]
    refs: list[str] = []
    # Governed notices first: a blocked side effect is what the model must read before anything
    # else in the tail (the planner gives them the same precedence, RFC 0004).
    if control is not None:
        blocks.extend(b for lines in control_blocks(r, control, held) for b in lines)
    # Then what the ledger itself has not resolved (before compaction hands it to the store).
    blocks.extend(effects)
    if not stated:
        if run is not None:
            blocks.append(run)
        if len(blocks) == 1:
            return Tail(blocks=(), tokens=0, refs=())
        return Tail(blocks=tuple(blocks), tokens=sum(b.tokens for b in blocks), refs=())
    # An agent loop's next step on a request the history shows is what the history's last
    # records say already (a call, its result): stating it again on every call would be the
    # tail's dearest line for nothing. Any other relation is news, and said.
    if not (anchor_shown and relation is Relation.EXTENSION_CONTINUATION):
        blocks.append(r.line(f"{RELATION_PREFIX}{relation.value} — {RELATION_TEXT[relation]} "
                             f"({current.ref})", [current.ref], mark=Mark.RELATION))
    if run is not None:
        blocks.append(run)
    line = (None if anchor is None or anchor.turn.id == current.turn.id or anchor_shown else r.memo(
        ("tail_anchor", anchor.ref, len(anchor.records)),
        lambda: anchor_line(r, anchor, current)))
    if line is not None:
        blocks.append(line)
        refs.extend(line.refs)
    if work_item is not None:
        blocks.extend(_work_item_blocks(r, work_item, waits, settled, tally, frontier_cover,
                                        work_in_history))
        if not work_in_history:
            refs.append(work_item.ref)
    if len(blocks) == 1 and not ends_request:
        return Tail(blocks=(), tokens=0, refs=())
    refs = list(dict.fromkeys([current.ref, *refs]))
    return Tail(blocks=tuple(blocks), tokens=sum(b.tokens for b in blocks), refs=tuple(refs))


def _work_item_blocks(r: Renderer, work_item: WorkItemState, waits: list[WaitState],
                      settled: Sequence[Settled], tally: Tally | None, frontier_cover: str,
                      work_in_history: bool) -> list[Block]:
    """The tail's work-item lines: its state, its waits (open and answered) and the frontier;
    only the waits when the history says the rest (``work_in_history``)."""
    mine = [w for w in waits if w.work_item_id in (None, work_item.work_item_id)]
    answered = [s for s in settled if s.wait.work_item_id in (None, work_item.work_item_id)]
    # A work item's state is the fold of its transitions: the latest transition's ref names
    # it, so its lines are made once per transition (and per set of open waits).
    waiting = (tuple((w.wait_id, w.opened_ref) for w in mine),
               tuple((s.wait.wait_id, s.by) for s in answered))
    if work_in_history:
        # The waits stay: a wait answered must never read as open (RFC 0023), and a line
        # once in the history stays there, so what may change under it is said here.
        return r.memo(("tail_waits", *waiting), lambda: wait_lines(r, mine, answered))
    blocks = list(r.memo(("tail_work_item", work_item.ref, *waiting),
                         lambda: work_item_lines(r, work_item, mine, answered)))
    if tally is not None and (tally.done or tally.pending):
        blocks.extend(frontier_lines(r, tally, frontier_cover))
    return blocks


def records_by_ref(units: list[TurnUnit]) -> dict[str, StoredRecord]:
    """Every record of these turns (turn records included) by ref."""
    out: dict[str, StoredRecord] = {}
    for unit in units:
        out[unit.ref] = unit.stored
        for stored in unit.records:
            out[stored.ref] = stored
    return out


def work_item_lines(r: Renderer, state: WorkItemState, waits: list[WaitState],
                    settled: Sequence[Settled] = ()) -> list[Block]:
    """The current work item in a line or two: status, objective, the todo count and the next
    todo, its open waits, the waits a record answered (RFC 0023) and its blocker (the full plan
    is in the history's transitions)."""
    head, *blocker = work_item_head(r, state)
    return [head, *wait_lines(r, waits, settled), *blocker]


def work_item_head(r: Renderer, state: WorkItemState) -> list[Block]:
    """The work item's own line (status, objective, todos) and its blocker's, if any: what
    changes only with a work-item record."""
    c = r.chars
    done = sum(1 for t in state.todos if t.done)
    nxt = next((t.text for t in state.todos if not t.done), None)
    todos = (f"; todos {done}/{len(state.todos)} done" + (f", next: {label_value(nxt, c.next_todo)}"
                                                            if nxt else "")) if state.todos else ""
    lines = [r.line(f"work item {label_value(state.work_item_id, c.ident)} ({state.status.value}, "
                    f"{state.ref}): {label_value(state.objective, TAIL_OBJECTIVE)}{todos}",
                    [state.ref])]
    if state.blocker:
        lines.append(r.line(f"blocker: {label_value(state.blocker, c.blocker_compact)}"))
    return lines


def wait_lines(r: Renderer, waits: list[WaitState], settled: Sequence[Settled] = ()) -> list[Block]:
    """The work item's open waits (the newest in full, older ones by id) and the waits a
    record answered (RFC 0023)."""
    c = r.chars
    lines = [r.line(f"waiting on {label_value(w.wait_id, c.ident)}: "
                    f"{label_value(w.condition, c.wait_condition_compact)}")
             for w in waits[-MAX_WAIT_LINES:]]
    older = waits[:-MAX_WAIT_LINES]
    if older:
        # Re-sent every request: the newest waits in full, the others by id (each wait's
        # opening is in the history).
        ids = ", ".join(label_value(w.wait_id, c.ident) for w in older[-MAX_WAIT_LINES:])
        more = ", …" if len(older) > MAX_WAIT_LINES else ""
        lines.append(r.line(f"… {len(older)} more open waits: {ids}{more}"))
    lines += [r.line(settled_line(s, c)) for s in settled[-MAX_WAIT_LINES:]]
    return lines


def frontier_lines(r: Renderer, tally: Tally, cover: str) -> list[Block]:
    """The execution frontier in a line and every file modified (the names line is rendered
    once per set of files: it changes only when a new file is written)."""
    repeated = tally.done - len(tally.run_keys)
    pending = f", {tally.pending} pending" if tally.pending else ""
    head = r.line(f"frontier: {tally.done} tool runs, {tally.failed} failed, {repeated} repeated"
                  f"{pending}; {len(tally.files)} files modified{cover}{tally.answered_note()}")
    names = tuple(tally.files)
    if not names:
        return [head]
    limit = r.policy.frontier_ref_files
    path = r.chars.path_in_frontier_ref

    def named() -> Block:
        return r.line(files_line(tally.files, limit, path, marked=True))
    return [head, r.memo(("tail_files", names, limit), named)]
