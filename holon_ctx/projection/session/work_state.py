"""A planned epoch's work state: said in the history when it changes, not in every tail.

RFC 0025, decision 5. The current-state tail follows the history, so no provider ever caches
it: every line it holds is paid at the plain input price on every call. The work item and the
execution frontier change far less often than calls are made, so a planned epoch (RFC 0010)
says them in its history instead:

    re-plan         the frozen history ends with ``## Current state as of turn:…``: the work
                    item's line (and its blocker) and the frontier's, as the tail stated them
    later records   join the history as ever: a tool run is its own line there, so the block
                    and the runs below it are the frontier (as in a whole epoch, decision 1)
    a change        a work-item record, a switch to another work item that does not re-plan:
                    the work item's lines again, appended to the history after the record
                    that changed them

The tail keeps what changes without a record (governed notices), what a line in the history
could leave reading as current once it changed (the work item's open and answered waits, RFC
0023: a history line is never taken back), what the history does not show (an anchor's words,
a run of folded turns still going on), and the relation when it is news. A request that must
end on a user turn keeps the full tail (RFC 0025, decision 1).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from holon_ctx.ledger.state import WaitState, WorkItemState
from holon_ctx.ledger.store import LedgerStore
from holon_ctx.projection.base.items import Block
from holon_ctx.projection.base.spans import spans_of
from holon_ctx.projection.base.waits import Settled, settle_waits
from holon_ctx.projection.planning.frontier import Tally
from holon_ctx.projection.planning.tail import TAIL_TITLE, frontier_lines, work_item_head
from holon_ctx.projection.provider_formats.native import Part, text_part
from holon_ctx.projection.rendering.render import Renderer
from holon_ctx.projection.session.session_state import WalkState

__all__ = ["WorkReads", "say_work_state", "state_part", "work_key", "work_reads",
           "work_state_blocks"]

#: What the tail reads of the work item: its state, its open waits, the waits a record answered.
WorkReads = tuple[WorkItemState | None, list[WaitState], list[Settled]]


def work_key(reads: WorkReads) -> Hashable:
    """What the history's work item lines depend on: the latest transition's ref (a work item's
    state is the fold of its transitions). None: no work item."""
    return reads[0].ref if reads[0] is not None else None


def work_state_blocks(r: Renderer, reads: WorkReads, *, at: str, tally: Tally | None = None,
                      cover: str = "") -> list[Block]:
    """The work item's own lines under a heading naming the turn they are as of, with the
    frontier's lines when ``tally`` is given (at a re-plan). Empty without a work item. Its
    waits are not said here: they stay in the tail, where a wait answered since cannot be
    left reading as open (RFC 0023)."""
    work_item = reads[0]
    if work_item is None:
        return []
    blocks = [r.line(f"{TAIL_TITLE} as of {at}", [at]), *work_item_head(r, work_item)]
    if tally is not None and (tally.done or tally.pending):
        blocks.extend(frontier_lines(r, tally, cover))
    return blocks


def state_part(blocks: Sequence[Block]) -> Part:
    """The blocks as one user-role part of the history (runtime facts, as the tail's are)."""
    refs = dict.fromkeys(ref for b in blocks for ref in b.refs)
    return text_part("".join(b.text for b in blocks), sum(b.tokens for b in blocks), refs,
                     spans=spans_of(blocks))


def work_reads(store: LedgerStore, state: WalkState, limit: int) -> WorkReads:
    """The work item, its open waits and the waits a record answered, as of ``limit``."""
    wid = state.work_item_id
    reads = state.tail_reads
    if reads is None or reads[0] != wid:
        # Kept until the walk passes a work-item or a wait record: the store derives these
        # states from those records alone, so the reads as of ``limit`` are the same.
        work_item = store.work_item_state(wid, limit) if wid else None
        waits, settled = (settle_waits(store, store.open_waits(limit), limit)
                          if work_item is not None else ([], []))
        reads = state.tail_reads = (wid, work_item, waits, settled)
    return reads[1], reads[2], reads[3]


def say_work_state(store: LedgerStore, r: Renderer, state: WalkState, limit: int, *,
                   replan: bool = False) -> None:
    """Say the work state in a planned epoch's history (see the module docstring): at a
    re-plan (``replan``), as the end of its frozen part; after a record, appended when the work
    item's lines changed (the walk drops its reads at a work-item or wait record and at a
    switch, so a record that leaves them be costs nothing here)."""
    if state.whole or (state.tail_reads is not None and not replan):
        return
    reads = work_reads(store, state, limit)
    key = work_key(reads)
    if key == state.work_stated and not replan:
        return
    state.work_stated = key
    assert state.current is not None
    blocks = work_state_blocks(r, reads, at=state.current.ref,
                               tally=state.tally if replan else None, cover=state.cover)
    if blocks:
        (state.freeze if replan else state.append_state)(state_part(blocks), r.framing)
        state.open_turn = None  # a later record of the current turn then says whose it is
