"""Rendering: a turn's forms (full, compact, ref) and the work item's, as counted blocks.

:class:`Renderer` is the projection's renderer; a record's blocks come from
:class:`~holon_ctx.projection.rendering.render_records.RecordRenderer` and the primitives under them (label
lines, excerpts, fences, the memo) from :class:`~holon_ctx.projection.rendering.render_base.BlockRenderer`
(whose docstring says how blocks add up and how trust stays visible). An episode's forms are
built from the episode in :mod:`holon_ctx.projection.rendering.episode_forms`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Final, TypeAlias

import attrs

from holon_ctx.ledger.records import Message, Tool, ToolStatus
from holon_ctx.ledger.state import WaitState, WorkItemState
from holon_ctx.ledger.store import StoredRecord
from holon_ctx.projection.base.formats import FOLD_PREFIX, label_value, one_line, operator_label
from holon_ctx.projection.base.items import Block, BlockKind, Mark, Rendered
from holon_ctx.projection.base.model import Form, Priority, TurnUnit
from holon_ctx.projection.base.policy import TextLimits
from holon_ctx.projection.base.waits import Settled
from holon_ctx.projection.rendering.digest import turn_digest
from holon_ctx.projection.rendering.folding import tool_repeats
from holon_ctx.projection.rendering.render_base import Extra
from holon_ctx.projection.rendering.render_records import RecordRenderer, changed_lines

__all__ = ["Instead", "Renderer", "changed_lines", "one_line"]

#: What a turn's body shows in place of one of its records: a line (the record is elsewhere, or
#: folded), or blocks (a compact form of it, such as a changed re-run's differing lines).
Instead: TypeAlias = "str | tuple[Block, ...]"
#: A cap floor no body reaches: every body whole.
_WHOLE = 1 << 62
#: Characters the grow search's last step adds to an excerpt's head or to its tail at most: more
#: than a token of cap adds to either.
_EXTRA_CHARS: Final = 6
#: The (head, tail) additions it tries, fewest characters first: one side at a time (both at once
#: used no room these do not, on the shared trajectories and the synthetic loops of the tests, and
#: cost a count of the excerpt each).
_EXTRAS: Final = sorted([(h, 0) for h in range(1, _EXTRA_CHARS + 1)]
                        + [(0, t) for t in range(1, _EXTRA_CHARS + 1)],
                        key=lambda ht: (ht[0] + ht[1], ht))
#: Characters the exact-fill search takes off an excerpt's head, one try each, and adds to its
#: tail at most (Renderer._fill).
_FILL_CUTS: Final = (0, 3, 7, 12, 18, 25, 33, 42)
_FILL_CHARS: Final = 160


def _by_operator(stored: StoredRecord) -> bool:
    return isinstance(stored.record, Message) and stored.record.by_operator


class Renderer(RecordRenderer):
    """A turn's and the work item's forms (the projection's renderer)."""

    def turn_head(self, unit: TurnUnit, *, priority: Priority, reasons: tuple[str, ...],
                  other_work_item: bool, chain: str | None, loop_step: bool = False,
                  anchor_stated: bool = False) -> str:
        """The turn's ref, its trigger and what the model needs to place it (RFC 0012-densea).

        Why the turn is kept (its class, reasons and chain rule) is in the manifest, not here:
        repeated on every heading it cost more than the content it introduced. The heading says
        only what changes how the turn reads: its outcome, that it belongs to another work item
        (not current-chain evidence), and the turn it continues — unless it is a ``loop_step``,
        a step of the loop the current turn is in (same trigger, same anchor), whose trigger and
        anchor the current turn's heading and the relation line state once for all of them; the
        current turn's own anchor is left to the relation line right above it when that line
        names it (``anchor_stated``).
        """
        del priority, reasons, chain  # the manifest's, per item (see the docstring)
        t = unit.turn
        parts = [f"turn:{t.id}"] if loop_step else [f"turn:{t.id}", t.trigger]
        if t.anchor_turn_id and not loop_step and not anchor_stated:
            parts.append(f"continues turn:{t.anchor_turn_id}")
        if t.outcome:
            parts.append(f"outcome {t.outcome.value}")
        if other_work_item:
            if t.work_item_id:
                parts.append(f"work item {label_value(t.work_item_id, self.chars.ident)}")
            parts.append("other work item, not current-chain evidence")
        return " · ".join(parts)

    def turn_full(self, unit: TurnUnit, head: str,
                  elsewhere: Mapping[str, Instead] | None = None, floor: int = 0,
                  extra: Extra = (0, 0), *, verbatim: bool = False,
                  newest: int | None = None) -> Rendered:
        """The turn's heading, then its body (:meth:`turn_body`); an empty ``head``: the body
        alone (a loop step among the recent turns, whose first fence names it; see
        turns.TurnItems)."""
        key = ("full", unit.ref, head, tuple(r.ref for r in unit.records),
               tuple(sorted(elsewhere.items())) if elsewhere else (), floor, extra, verbatim,
               newest)
        return self.memo(key, lambda: self.rendered(self._headed(unit, head, self.turn_body(
            unit, elsewhere, floor, extra, verbatim=verbatim, newest=newest))))

    def huge(self, unit: TurnUnit) -> bool:
        """The turn holds more records besides the operator's words than its full form shows
        (``Policy.turn_records``): its older records are one counted line."""
        limit = self.policy.turn_records
        return len(unit.records) > limit and sum(
            1 for s in unit.records if not _by_operator(s)) > limit

    def turn_newest_within(self, unit: TurnUnit, head: str,
                           elsewhere: Mapping[str, Instead] | None, limit: int, *,
                           verbatim: bool = False) -> Rendered | None:
        """A huge turn's full form with as many of its newest records as fit ``limit`` tokens:
        its operator's words, the counted line, the newest records (None: not even the words
        and the line fit). What a binding budget cuts of a huge turn is its oldest evidence,
        never its newest nor the operator's words (RFC 0010, decision 7)."""
        lo, hi = 0, self.policy.turn_records
        best: Rendered | None = None
        while lo <= hi:  # forms grow with the records shown: the largest that fits
            mid = (lo + hi) // 2
            form = self.turn_full(unit, head, elsewhere, verbatim=verbatim, newest=mid)
            if form.tokens <= limit:
                best, lo = form, mid + 1
            else:
                hi = mid - 1
        return best

    def _headed(self, unit: TurnUnit, head: str, body: tuple[Block, ...]) -> list[Block]:
        if head:
            return [self.heading(head, [unit.ref]), *body]
        if not body:
            return []
        # No heading: the first block opens the turn and shows its ref too (a clipped form, and
        # every larger one, still shows the turn its compact line named).
        first = attrs.evolve(body[0], refs=(*body[0].refs, unit.ref))
        return [first, *body[1:]]

    def turn_body(self, unit: TurnUnit, elsewhere: Mapping[str, Instead] | None = None,
                  floor: int = 0, extra: Extra = (0, 0), *,
                  verbatim: bool = False, newest: int | None = None) -> tuple[Block, ...]:
        """The turn's records as blocks; a record in ``elsewhere`` is one line saying where it is
        (or the blocks given for it: a compact form).

        A function of the turn's records, ``elsewhere``, ``floor`` (each token cap raised to
        at least this) and ``verbatim`` (newest evidence: tool outputs with no repeated-lines
        note, RFC 0023) only: what changes as a turn ages (its class, reasons and chain label)
        is in the manifest, never in the body.
        """
        key = ("turn_body", unit.ref, tuple(r.ref for r in unit.records),
               tuple(sorted(elsewhere.items())) if elsewhere else (), floor, extra, verbatim,
               newest)
        return self.memo(key, lambda: self._turn_body(unit, elsewhere, floor, extra, verbatim,
                                                      newest))

    def turn_full_within(self, unit: TurnUnit, head: str, elsewhere: Mapping[str, Instead] | None,
                         limit: int | None, *, exact: bool = False,
                         verbatim: bool = False) -> Rendered | None:
        """The turn's full form with its token caps raised: every body whole (``limit`` None),
        or the largest uniform raise whose form fits ``limit`` tokens (None when even the
        policy's caps do not fit). Excerpts keep their head and tail, so a field cut to fit
        still shows how its output ended."""
        whole = self.turn_full(unit, head, elsewhere, floor=_WHOLE, verbatim=verbatim)
        if limit is None or whole.tokens <= limit:
            return whole
        # Binary search on the floor (a form's size grows with it); only the one step that does
        # not fit a binding budget gets here, once per projection.
        lo, hi = 0, whole.tokens
        best: Rendered | None = None
        while lo < hi:
            mid = (lo + hi + 1) // 2
            form = self.turn_full(unit, head, elsewhere, floor=mid, verbatim=verbatim)
            if form.tokens <= limit:
                best, lo = form, mid
            else:
                hi = mid - 1
        if best is None or best.tokens >= limit or lo <= 0:
            return best
        # A token of cap is some four characters of excerpt, and the token count of a cut text
        # moves in steps of up to three: the room left below the next floor can be one or two
        # tokens no floor uses (a newest step cut with room, RFC 0016). The last step is by
        # characters: each excerpt's head or tail up to _EXTRA_CHARS longer, the largest form
        # that fits (the fewest characters added among equals).
        for h, t in _EXTRAS:
            form = self.turn_full(unit, head, elsewhere, floor=lo, extra=(h, t),
                                  verbatim=verbatim)
            if best.tokens < form.tokens <= limit:
                best = form
                if form.tokens == limit:
                    return best
        # The wider search costs tens of forms: only for a newest step (``exact``), which must
        # never be left cut while a token is unused (issue 12); an older step's last token or
        # two stay unused.
        return (self._fill(unit, head, elsewhere, lo, best, limit, verbatim) if exact
                else best)

    def _fill(self, unit: TurnUnit, head: str, elsewhere: Mapping[str, Instead] | None,
              floor: int, best: Rendered, limit: int, verbatim: bool = False) -> Rendered:
        """The form that fills ``limit`` exactly, when a few characters more at ``floor`` do
        not: an excerpt's count can skip the one value that fits (a multi-character token
        enters whole). An excerpt's head a few characters shorter moves every token boundary
        of its tail, so a longer tail lands on other counts: for each of a few head cuts, a
        binary search over the tail's added characters. Bounded (``_FILL_CUTS`` times a search
        over ``_FILL_CHARS``), and only for the one step a binding budget cuts."""
        for cut in _FILL_CUTS:
            low, high = 0, _FILL_CHARS
            while low < high:
                mid = (low + high + 1) // 2
                form = self.turn_full(unit, head, elsewhere, floor=floor, extra=(-cut, mid),
                                      verbatim=verbatim)
                if form.tokens <= limit:
                    low = mid
                    if form.tokens > best.tokens:
                        best = form
                        if form.tokens == limit:
                            return best
                else:
                    high = mid - 1
        return best

    def _turn_body(self, unit: TurnUnit, elsewhere: Mapping[str, Instead] | None,
                   floor: int, extra: Extra = (0, 0), verbatim: bool = False,
                   newest: int | None = None) -> tuple[Block, ...]:
        records, left_out = self._shown_records(unit, newest)
        repeats = tool_repeats(records)
        hidden = {r for refs in repeats.values() for r in refs}
        sole = sum(1 for r in unit.records if isinstance(r.record, Tool)) == 1
        blocks: list[Block] = []
        if unit.turn.label:
            blocks.append(self.line(f"trigger: {label_value(unit.turn.label, self.chars.trigger_label)}"))
        # The operator's words come first, then what happened: a clipped full form then always
        # keeps them (and so every ref its pinned compact form showed, which the planner needs
        # to accept the clip without losing a ref).
        ordered = sorted(records, key=lambda r: not _by_operator(r))
        if left_out:
            words = sum(1 for r in records if _by_operator(r))
            ordered.insert(words, left_out[0])  # the counted line's place (below)
        for stored in ordered:
            if left_out and stored is left_out[0]:
                blocks.append(self._left_out_line(left_out))
                continue
            if stored.ref in hidden:
                continue
            if elsewhere and stored.ref in elsewhere:
                instead = elsewhere[stored.ref]
                if isinstance(instead, str):
                    blocks.append(self.line(f"{stored.ref}: {instead}"))
                else:
                    blocks.extend(instead)
                continue
            blocks.extend(self.record_blocks(
                stored, repeats, "".join(b.body for b in blocks if b.kind is BlockKind.FENCED),
                floor, extra, sole_call=sole, verbatim=verbatim))
        return tuple(blocks)

    def _shown_records(self, unit: TurnUnit, newest: int | None,
                       ) -> tuple[Sequence[StoredRecord], Sequence[StoredRecord]]:
        """(the records a turn's full form shows, its older records left out): all of them, or
        for a huge turn (:meth:`huge`) the operator's words and the newest ``newest`` records
        (``Policy.turn_records`` when None) of the rest."""
        if not self.huge(unit):
            return unit.records, ()
        keep = self.policy.turn_records if newest is None else newest
        rest = [s for s in unit.records if not _by_operator(s)]
        left_out = rest[:len(rest) - keep]
        first_shown = len(left_out)
        shown = [s for s in unit.records if _by_operator(s)] + rest[first_shown:]
        return sorted(shown, key=lambda s: s.pos), left_out

    def _left_out_line(self, left_out: Sequence[StoredRecord]) -> Block:
        """``- folded tool:x2–tool:x301: tool run×290, failed run×8, reply×2 (300 earlier records
        of this turn, each by its ref)``: a huge turn's older records, counted by kind."""
        kinds: Counter[str] = Counter()
        for stored in left_out:
            rec = stored.record
            kinds["failed run" if isinstance(rec, Tool) and rec.status is not ToolStatus.OK
                  else "tool run" if isinstance(rec, Tool)
                  else "reply" if isinstance(rec, Message) else type(rec).__name__.lower()] += 1
        summary = ", ".join(f"{k}×{n}" for k, n in sorted(kinds.items(),
                                                          key=lambda kv: (-kv[1], kv[0])))
        first, last = left_out[0].ref, left_out[-1].ref
        span = first if first == last else f"{first}–{last}"
        return self.line(f"{FOLD_PREFIX}{span}: {summary} ({len(left_out)} earlier records of "
                         "this turn, each by its ref)", mark=Mark.FOLD)

    def turn_compact_verbatim(self, unit: TurnUnit, head: str) -> Rendered:
        """One line of facts, then each operator message in full (capped like FULL)."""
        blocks = [self.line(f"- {head} · {turn_digest(unit, self.chars, quote_operator=False)}",
                            [unit.ref])]
        for stored in unit.records:
            rec = stored.record
            if isinstance(rec, Message) and rec.by_operator:
                blocks.append(self.trusted(stored, operator_label(stored.ref), self.caps.operator))
        return self.rendered(blocks)

    def turn_compact(self, unit: TurnUnit, head: str) -> Rendered:
        # A bare ref (a loop step's head) needs no separator before the digest: the line reads
        # ``- turn:t8 bash `ls` → ok`` (RFC 0015).
        sep = " " if " " not in head else " · "
        key = ("compact", unit.ref, head, tuple(r.ref for r in unit.records))
        return self.memo(key, lambda: self.rendered(
            [self.line(f"- {head}{sep}{turn_digest(unit, self.chars)}", [unit.ref])]))

    def turn_ref(self, unit: TurnUnit) -> Rendered:
        t = unit.turn
        return self.rendered([self.line(f"- turn:{t.id} {t.trigger} (ref only)", [unit.ref])])

    # -- work item -----------------------------------------------------------------------
    def work_item(self, state: WorkItemState, waits: list[WaitState],
                  spoken_in: str | None = None,
                  settled: Sequence[Settled] = ()) -> dict[Form, Rendered]:
        """The work item's forms; ``spoken_in``: the ref of an operator message the prompt shows
        whole that holds the objective word for word (named instead: the text is said once);
        ``settled``: waits a task result or an event answered though no wait record closed them,
        each stated resolved with the record's ref in every form (the record itself may be left
        out for room, and an older turn's ``wait … open`` line must not read as current)."""
        ref = state.ref
        c = self.chars
        if spoken_in is not None:
            objective = self.line(f"objective: the operator's words in {spoken_in} (below)")
            compact_objective = full_objective = objective
        else:
            compact_objective = self.line(
                f"objective: {label_value(state.objective, c.objective_compact, marked=True)}")
            full_objective = self.line(
                f"objective: {label_value(state.objective, c.objective_full, marked=True)}")
        done = sum(1 for t in state.todos if t.done)
        head = (f"work item {label_value(state.work_item_id, c.ident)} · status "
                f"{state.status.value} · {ref}")
        ref_form = self.rendered([self.line(head, [ref])])
        compact = [self.line(head, [ref]), compact_objective]
        nxt = next((t.text for t in state.todos if not t.done), None)
        compact.append(self.line(f"todos: {done}/{len(state.todos)} done"
                                 + (f"; next: {label_value(nxt, c.next_todo)}" if nxt else "")))
        for w in waits:
            compact.append(self.line(f"waiting on {label_value(w.wait_id, c.ident)}: "
                                     f"{label_value(w.condition, c.wait_condition_compact)}"))
        answered = [self.line(settled_line(s, c)) for s in settled]
        compact.extend(answered)
        if state.blocker:
            compact.append(self.line(f"blocker: {label_value(state.blocker, c.blocker_compact)}"))
        full = [self.line(head, [ref]), full_objective]
        if state.plan:
            full.append(self.line("plan:"))
            full.extend(self.line(f"{i}. {label_value(p, c.plan_step)}")
                        for i, p in enumerate(state.plan, 1))
        if state.todos:
            full.append(self.line("todos:"))
            full.extend(self.line(f"- [{'x' if t.done else ' '}] {label_value(t.text, c.todo)}")
                        for t in state.todos)
        for w in waits:
            full.append(self.line(f"waiting on {label_value(w.wait_id, c.ident)} ({w.opened_ref}): "
                                  f"{label_value(w.condition, c.wait_condition_full)}"))
        full.extend(answered)
        if state.blocker:
            full.append(self.line(f"blocker: {label_value(state.blocker, c.blocker_full)}"))
        if state.completion_report:
            full.append(self.line("completion report: "
                                  f"{label_value(state.completion_report, c.completion_report)}"))
        return {Form.REF: ref_form, Form.COMPACT: self.rendered(compact),
                Form.FULL: self.rendered(full)}


def settled_line(settled: Settled, chars: TextLimits) -> str:
    """``wait task-1 resolved by task_result:r9 (opened wait:w3)``: a wait answered by a record
    though no wait record closed it (RFC 0023)."""
    w = settled.wait
    return (f"wait {label_value(w.wait_id, chars.ident)} resolved by {settled.by} "
            f"(opened {w.opened_ref})")
