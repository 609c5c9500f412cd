"""The session projection: one request per model call, most of it a prefix the provider cached.

Theory of operation (RFC 0010). A request is a stable prefix, an append-only history and a small
tail (:mod:`.tail`). A session *walks* the ledger one record at a time, in order, each record
once:

    record    joins the history, rendered once (its turn's heading with the turn's first record;
              a later record of an earlier turn under a "(continued)" heading)
    check     stable prefix + history + tail as of this record ≤ budget, the environment
              unchanged, the work item unchanged, every pinned turn in the history?
    re-plan   if not: the stateless planner at the low-water budget (:mod:`.replan`), laid out
              as the new frozen prefix and history — a new *epoch*

A request as of position p is the state after walking every record before p: what a request
holds depends on the ledger, the budget and the policy only, never on when requests were made,
so any process (or a rebuild from the ledger) produces the same bytes. Between re-plans a request
starts with the previous one minus its tail. The state is persisted at each re-plan
(:mod:`holon_ctx.ledger.epochs`); a new process loads it and walks the records since.

Layouts. ``text`` is one prompt text (budgeted as counted); ``messages`` is the provider's own
conversation (:mod:`.native`), budgeted as
:func:`~holon_ctx.projection.provider_formats.providers.measure` counts it, framing included — an
OpenAI and an Anthropic request from the same parts.

The projector is built in three modules: what it holds, its state key and the tail
(:mod:`.session_base`), the re-plans and the persisted epochs (:mod:`.session_epochs`), and here
the walk and the request.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from typing import Final

from holon_ctx.errors import BudgetTooSmallError, InputError, quote_value
from holon_ctx.ledger.epochs import EpochStart
from holon_ctx.ledger.records import (
    Brief,
    Environment,
    Message,
    Pin,
    TaskResult,
    Tool,
    Turn,
    Wait,
    WorkItem,
)
from holon_ctx.ledger.store import StoredRecord
from holon_ctx.projection.base.model import (
    ControlHistory,
    EpisodeManifest,
    Moment,
    Priority,
    RecalledEpisode,
    RecallQuery,
    TurnUnit,
)
from holon_ctx.projection.base.spans import spans_of
from holon_ctx.projection.base.topics import abandoned, input_topic, is_required
from holon_ctx.projection.base.waits import resolves_listed, settle_control
from holon_ctx.projection.planning.frontier import Tally
from holon_ctx.projection.planning.retention import in_fold_run, judged_beside, may_join_fold_run
from holon_ctx.projection.planning.view import continuation_anchor, units_of
from holon_ctx.projection.provider_formats.native import text_part
from holon_ctx.projection.rendering.effects import track_effects
from holon_ctx.projection.rendering.render import Renderer
from holon_ctx.projection.session.checkpoints import checkpoint_turn, opens_block
from holon_ctx.projection.session.need import stated_need
from holon_ctx.projection.session.session_base import ENGINE_VERSION, cur_id
from holon_ctx.projection.session.session_epochs import _EpochPlanner
from holon_ctx.projection.session.session_state import (
    Layout,
    SessionPolicy,
    SessionRequest,
    Snapshot,
    WalkState,
    append_fold,
    append_record,
    session_manifest,
)
from holon_ctx.projection.session.work_state import say_work_state

# cur_id is re-exported: it was defined here before the split (tests/test_session_bill.py).
__all__ = ["ENGINE_VERSION", "Layout", "SessionPolicy", "SessionProjector", "SessionRequest",
           "cur_id"]

#: How many times the score an episode was left out at it must now reach to re-plan for it.
_REWEIGH: Final = 2.0
#: How many times the score (for the operator's words) of the episode the epoch's plan weighed
#: first the best episode's must reach to re-plan for it: the words are about something else.
_SINGLED_OUT: Final = 3.0


def _singled_out(recalled: Sequence[RecalledEpisode], everything: Sequence[RecalledEpisode],
                 weighed: Sequence[EpisodeManifest], *, cut: bool) -> bool:
    """The operator's words match best (``recalled``: the relevant ones of ``everything``
    recalled for them) an episode the epoch does not show in full, at least
    :data:`_SINGLED_OUT` times as well as the episode the epoch's plan weighed first (issue 25,
    item 3): the words moved away from what the plan was made for, toward an older episode.

    Scores of different words do not compare: an early decision weighed at a re-plan for words
    of its topic (filler on the same topic matches every episode of it, the decision's among
    them) scores higher there than when the operator asks about it in few words, so the doubling
    of :data:`_REWEIGH` never comes. Scores of the same words do: a question the stateless plan
    answers with that episode first, while the episode the session's plan ranked first matches
    it far less, makes the session re-plan; more words of the topic, which that episode matches
    as well, do not, and a plan that weighed the episode first already is not re-planned again
    for it."""
    top = max(weighed, key=lambda e: e.score, default=None)
    if not recalled or top is None:
        return False  # (an epoch that weighed no episode re-plans by _REWEIGH's rule)
    best = recalled[0]
    if best.ref == top.ref or any(e.ref == best.ref and e.representation == "full"
                                  for e in weighed):
        return False
    now = next((ep.score for ep in everything if ep.ref == top.ref), None)
    if now is None:
        # Not recalled: no match for these words when the recall ran short of its limit
        # (``everything`` it found), unknown when it was ``cut`` at the limit.
        if cut:
            return False
        now = 0.0
    return best.score >= _SINGLED_OUT * now


class SessionProjector(_EpochPlanner):
    """``SessionProjector(store).request(budget_tokens=8192)`` — see the module docstring.

    Keep one per ledger and process: it keeps each budget's walk in memory, and persists every
    re-plan in ``epochs`` (default: in memory; a database ledger's callers pass the store beside
    it, so a new process continues where the last one stopped).
    """

    # -- requests ---------------------------------------------------------------------------------
    def request(self, *, budget_tokens: int, at: str | None = None,
                limit_pos: int | None = None, ledger_end: int | None = None,
                moment: Moment | None = None, state_need: bool = True) -> SessionRequest:
        """The request as of turn ``at`` (all its records), as of position ``limit_pos``, or
        (neither) as of the end of the ledger — ``ledger_end`` when the caller just read it
        (a round trip less on a server). ``moment``: another request's
        (``SessionRequest.moment``), to show the governed state and the archive as that request
        read them; none: as they are now (read here, and kept on the request).
        ``state_need=False``: a refusal says the floor its walk met, unsearched (for a caller
        that searches a need of its own, over both layouts: need.py)."""
        if isinstance(budget_tokens, bool) or not isinstance(budget_tokens, int) \
                or budget_tokens <= 0:
            raise InputError(f"budget must be a positive number of tokens, got {quote_value(budget_tokens)}",
                             path="budget_tokens")
        end = ledger_end if ledger_end is not None and at is None and limit_pos is None \
            else self._end(at, limit_pos)
        if moment is None:
            moment = self._moment(end)
        controls = moment.controls
        source = self.episodes
        bound = getattr(source, "as_of_moment", None)
        if callable(bound) and moment.archive is not None:
            # The archive as the request read it, for this walk only (the projector's own source
            # stays unbounded for the requests made after it).
            self.episodes = bound(moment.archive)
        try:
            try:
                state, replanned, reason = self._walk_to(budget_tokens, end, controls)
            except BudgetTooSmallError as refusal:
                if not state_need:
                    raise
                # The need stated is a budget whose request is made (need.py).
                def made(tokens: int) -> int | None:
                    try:
                        self._walk_to(tokens, end, controls)
                    except BudgetTooSmallError as again:
                        return again.required_tokens
                    return None
                raise stated_need(refusal, made) from None
            # A side effect the governed store holds that a newer run resolved is stated
            # resolved (RFC 0023), as of the request's own position.
            control = settle_control(self.store, controls.at(end), end)
            return self._request(state, end, control, replanned, reason, moment)
        finally:
            self.episodes = source
            if not self._keeping_reads:
                self._prepared.clear()

    @contextlib.contextmanager
    def reads_kept(self) -> Iterator[None]:
        """Keep what re-plans read at each position (``_prepared_at``) across the requests made
        inside, emptied at the end: for a caller's own need search, whose every try is a request
        as of one position with one ``moment`` (the same governed state and archive)."""
        self._keeping_reads = True
        try:
            yield
        finally:
            self._keeping_reads = False
            self._prepared.clear()

    def moment(self, *, at: str | None = None, ledger_end: int | None = None) -> Moment:
        """The governed state and the archive a request as of turn ``at`` (or ``ledger_end``,
        else the end of the ledger) sees now: what ``request`` reads when given no moment."""
        end = ledger_end if ledger_end is not None and at is None else self._end(at, None)
        return self._moment(end)

    def _moment(self, end: int) -> Moment:
        """The governed state and the archive as a request at ``end`` sees them now: the
        control history (one read of the envelope ids) and the newest episode visible at ``end``
        (one read), so the request's other layout, made later, sees the same (RFC 0024)."""
        read = getattr(self.episodes, "moment", None)
        archive = read(end) if callable(read) else None
        return Moment(self._controls(), archive if isinstance(archive, int) else None)

    def _controls(self) -> ControlHistory:
        """The governed control state by ledger position (RFC 0020): a walk reads each record's
        own, so a rebuild states what the continuing walk stated at every position."""
        source = self.control
        if source is None:
            return ControlHistory.constant(None)
        history = getattr(source, "control_history", None)
        if callable(history):
            found = history()
            assert isinstance(found, ControlHistory)
            return found
        return ControlHistory.constant(source.control_state())

    def walked(self, budget_tokens: int) -> int | None:
        """Where the walk of ``budget_tokens`` kept in memory stopped (the next request reads
        the records from there on), or None when none is kept."""
        state = self._states.get(budget_tokens)
        return None if state is None else state.pos

    def rebuild(self, *, budget_tokens: int) -> None:
        """Forget the persisted state of ``budget_tokens``: the next request walks the ledger
        again from its first turn (derived data, so the requests come out the same)."""
        self.epochs.clear(self.state_key(budget_tokens))
        self._states.pop(budget_tokens, None)

    def epoch_starts(self, *, budget_tokens: int) -> list[EpochStart]:
        return self.epochs.starts(self.state_key(budget_tokens))

    def _end(self, at: str | None, limit_pos: int | None) -> int:
        from holon_ctx.projection.planning.view import resolve_limit  # noqa: PLC0415 - one use

        if at is None:
            # The end is all a walk needs (a ledger with no turn fails where the walk starts):
            # the newest turn as well would be a round trip more on a server, every request.
            end = self.store.end_pos()
            return end if limit_pos is None else min(limit_pos, end)
        return resolve_limit(self.store, at, limit_pos)[1]

    # -- the walk -----------------------------------------------------------------------------------
    def _walk_to(self, budget: int, end: int,
                 controls: ControlHistory) -> tuple[WalkState, bool, str | None]:
        state = self._states.get(budget)
        if state is None or state.pos > end:
            state = self._load(budget, end, controls)
        replanned, reason = False, None
        if state is None:
            start = checkpoint_turn(self.store, end, self.session.checkpoint_turns)
            state = self._replan(budget, start.pos + 1, controls.at(start.pos + 1),
                                 reason="checkpoint")
            replanned, reason = True, "checkpoint"
        try:
            for stored in self.store.records_between(state.pos, end):
                # The governed state as of this record (RFC 0020), not as of the request.
                control = controls.at(stored.pos + 1)
                why = self._step(state, stored, control)
                if why is not None:
                    state = self._replan(budget, stored.pos + 1, control, reason=why,
                                         after=state.start)
                    replanned, reason = True, why
                else:
                    state.pos = stored.pos + 1
            # The governed state may have grown since the last record was walked (a compaction
            # sealed at this very position): the request must still hold its budget, with the
            # governed state as the request states it (settled as of ``end``, RFC 0023).
            control = settle_control(self.store, controls.at(end), end)
            if state.frozen_tokens + state.appended_tokens() + self._tail_cost(
                    state, self._tail(state, end, control)) > budget:
                state = self._replan(budget, end, control, reason="over_budget",
                                     after=state.start)
                replanned, reason = True, "over_budget"
        except BaseException:
            # A half-walked state must not be reused: the next request starts from the saved epoch.
            self._states.pop(budget, None)
            raise
        self._states[budget] = state
        return state, replanned, reason

    def _step(self, state: WalkState, stored: StoredRecord, control: object) -> str | None:
        """Append one record; returns why a re-plan is needed instead (None: appended)."""
        rec = stored.record
        limit = stored.pos + 1
        if isinstance(rec, Environment):
            return "environment_changed"
        if state.still_open and resolves_listed(self.store, state.still_open, stored, limit):
            # An episode the history shows says STILL OPEN what this record resolves: a line
            # the prompt states as current would contradict it (RFC 0023, 2026-12-05).
            return "episode_item_resolved"
        r = self._entry_renderer(state.budget, whole=state.whole)
        why = (self._step_turn(state, stored, rec, r, limit) if isinstance(rec, Turn)
               else self._step_record(state, stored, r, limit))
        if why is not None:
            return why
        if not isinstance(rec, Message | Brief):
            # A reply or a brief changes nothing the tail states; anything else may.
            state.tail = None
            if isinstance(rec, WorkItem | Wait) or getattr(rec, "wait_id", None) is not None:
                # A task result or an event naming a wait answers it (RFC 0023).
                state.tail_reads = None
        say_work_state(self.store, self.renderer, state, limit)
        tail = self._tail(state, limit, control)
        total = state.frozen_tokens + state.appended_tokens() + self._tail_cost(state, tail)
        if total > state.budget:
            return "over_budget"
        return None

    def _step_turn(self, state: WalkState, stored: StoredRecord, rec: Turn, r: Renderer,
                   limit: int) -> str | None:
        """A turn record opens the walk's current turn: it joins the history (or the pending
        fold run); returns why a re-plan is needed instead (None: appended)."""
        if opens_block(self.store, rec, limit, state.current, self.session.checkpoint_turns):
            return "checkpoint"
        unit = TurnUnit(stored=stored, records=())
        prior = state.current
        # Judged beside the turn before it, or past a tick or retry (as the planner does).
        previous = None if prior is None else judged_beside(
            prior, self._facts.facts(prior, state.current_beside), state.current_beside)
        state.current, state.current_beside = unit, previous
        why = self._follow(state, unit, limit)
        if why is not None:
            return why
        if may_join_fold_run(unit, previous):
            # Rendered when its run ends; a turn whose records prove it substantive
            # leaves the run and joins the history whole (_append_to_run).
            state.pending.append((unit, previous))
        else:
            append_fold(state, r, self._fold_facts(state))
            append_record(state, stored, r, new_turn=True)
        return None

    def _step_record(self, state: WalkState, stored: StoredRecord, r: Renderer,
                     limit: int) -> str | None:
        """Any other record joins its turn in the history; returns why a re-plan is needed
        instead (None: appended)."""
        rec = stored.record
        if isinstance(rec, Pin) and self._pin_not_shown(state, rec):
            return "pinned_turn_not_in_history"
        cur = state.current
        if cur is not None and stored.turn_seq == cur.turn.seq:
            why = self._grow_current(state, stored, cur, limit)
            if why is not None:
                return why
        if isinstance(rec, Tool):
            track_effects(state.unresolved, [stored])
            if state.tally is not None \
                    and self._work_item_of(stored, state) in (state.work_item_id, None):
                state.tally.add(stored)
        self._append_to_run(state, stored, r)
        return None

    def _pin_not_shown(self, state: WalkState, rec: Pin) -> bool:
        """Whether the turn a pin names (or owns the record it names) is not in the history."""
        target = self.store.get(rec.target)
        owner = getattr(target.record, "turn_id", None) if target else None
        if isinstance(target.record if target else None, Turn):
            owner = rec.target.removeprefix("turn:")
        return owner is not None and owner not in state.shown

    def _grow_current(self, state: WalkState, stored: StoredRecord, cur: TurnUnit,
                      limit: int) -> str | None:
        """A record of the current turn joins it; returns why a re-plan is needed (None: none)."""
        rec = stored.record
        state.current = TurnUnit(stored=cur.stored, records=(*cur.records, stored))
        if isinstance(rec, Message) and rec.by_operator and not state.whole:
            # A whole epoch shows every turn an episode was made of: nothing to recall.
            # Not weighed against the bill: nothing else would show the recalled
            # decision (an anchor's words the tail can state), RFC 0025, decision 4.
            why = self._recall_gap(state, limit) or self._topic_gap(state, limit)
            if why is not None:
                return why
        if (isinstance(rec, TaskResult) and rec.spawned_by_turn_id
                and cur.turn.anchor_turn_id is None):
            # The turn's anchor is the task's spawning turn, known only now.
            why = self._follow(state, state.current, limit)
            if why is not None:
                return why
        return None

    def _append_to_run(self, state: WalkState, stored: StoredRecord, r: Renderer) -> None:
        """A record of the pending low-value turn that makes it substantive ends the run: the
        run before it becomes one fold line, the turn itself joins the history whole. Any other
        record ends the run too; a record of a turn still low waits with it."""
        if state.pending:
            unit, previous = state.pending[-1]
            if stored.turn_seq == unit.turn.seq:
                unit = TurnUnit(stored=unit.stored, records=(*unit.records, stored))
                if in_fold_run(unit, previous):
                    state.pending[-1] = (unit, previous)
                    return
                state.pending.pop()
                append_fold(state, r, self._fold_facts(state))
                append_record(state, unit.stored, r, new_turn=True)
                for owned in unit.records:
                    append_record(state, owned, r, new_turn=False)
                return
            append_fold(state, r, self._fold_facts(state))
        append_record(state, stored, r, new_turn=False)

    def _recall_gap(self, state: WalkState, limit: int) -> str | None:
        """The operator's words recall an episode the last re-plan never weighed (an early
        decision the conversation returns to): re-plan, so it competes for the prompt. Only a
        relevant one (pinned or high, RFC 0003) and only once per epoch, so a conversation that
        stays on its topic keeps its cached prefix."""
        if self.episodes is None or state.current is None:
            return None
        cur = state.current
        words = "\n".join(s.record.text for s in cur.records
                          if isinstance(s.record, Message) and s.record.by_operator)
        query = RecallQuery(current=cur, window_first_seq=cur.turn.seq,
                            work_item_id=state.work_item_id, limit_pos=limit, query_text=words,
                            refs=frozenset())
        # An episode the plan weighed and left out counts as weighed only at the score it had
        # then: an early decision weighed against the filler that followed it scores near
        # nothing, and once the operator's words return to it, it must compete again (issue 25,
        # item 3). Doubling is asked so a score that merely wobbles never re-plans twice.
        weighed = {e.ref: (e.score if e.representation == "omitted" else math.inf)
                   for e in state.manifest.episodes}
        everything = self.episodes.recall(query, self.policy.recall)
        recalled = [ep for ep in everything if ep.priority <= Priority.HIGH]
        for ep in recalled:
            if ep.score > _REWEIGH * weighed.get(ep.ref, -1.0):
                return "episode_recalled"
        cut = len(everything) >= self.policy.recall
        return "episode_recalled" if _singled_out(recalled, everything, state.manifest.episodes,
                                                  cut=cut) else None

    def _topic_gap(self, state: WalkState, limit: int) -> str | None:
        """The operator's words are about a decision of the newest high turns that the history
        does not show (RFC 0030): re-plan, so it leads the plan as it would a stateless one. The
        read is the planner's first tier of high turns, so it is bounded like the plan's."""
        cur = state.current
        if cur is None or not input_topic(cur):
            return None
        found = self.store.high_turns_before(cur.turn.seq, self.policy.high_turns_per_tier, limit)
        units = units_of(self.store, found, limit)
        topic = input_topic(cur, units)
        for unit in units:
            if unit.turn.id not in state.shown and is_required(unit, topic):
                return "relevant_decision_not_in_history"
        if state.whole:
            return None  # (a whole epoch shows every record, as a stateless plan that fits does)
        # The operator turned to another topic while the history shows the old one's decision
        # as the plan made it, for the old words (RFC 0030): re-plan, so it goes first.
        start = None if state.start.turn_id == cur.turn.id else self._unit(
            state.start.turn_id, limit)
        planned_for = input_topic(start, units) if start is not None else frozenset()
        if any(abandoned(unit, topic, planned_for, state.start.turn_seq)
               for unit in units if unit.turn.id in state.shown):
            return "topic_changed"
        return None

    def _work_item_of(self, stored: StoredRecord, state: WalkState) -> str | None:
        """The work item of the turn a record belongs to (a late result may belong to an older
        turn that acted for another work item)."""
        cur = state.current
        if cur is not None and stored.turn_seq == cur.turn.seq:
            return cur.turn.work_item_id
        owner = self.store.turn(str(getattr(stored.record, "turn_id", "")))
        return owner.record.work_item_id if owner is not None and isinstance(
            owner.record, Turn) else None

    def _follow(self, state: WalkState, unit: TurnUnit, limit: int) -> str | None:
        """A new turn: the work item and the anchor it continues must be the epoch's."""
        anchor_id, _ = continuation_anchor(self.store, unit, {}, limit, self.policy)
        # An agent loop continues the same anchor turn after turn: read it once. (What the tail
        # says of it — its first operator message or its trigger label — never changes.)
        if state.anchor is not None and state.anchor.turn.id == anchor_id:
            anchor: TurnUnit | None = state.anchor
        else:
            anchor = self._unit(anchor_id, limit) if anchor_id else None
        state.anchor = anchor
        wid = unit.turn.work_item_id or (anchor.turn.work_item_id if anchor else None)
        # A whole epoch's history holds both work items' records: a re-plan would write the
        # same turns to the cache again for nothing (RFC 0025).
        if wid != state.work_item_id and wid is not None and not state.whole:
            if self._replan_pays(state, limit):
                return "work_item_changed"
            # Kept: the history holds the new work item's records as they come; the tail states
            # the new work item, and its frontier counts from this turn on.
            state.work_item_id = wid
            state.tally, state.cover = Tally(), f"; counts cover {unit.ref} onward"
            state.tail, state.tail_reads = None, None
        if anchor_id is not None and anchor_id not in state.shown \
                and anchor_id != unit.turn.id and not state.whole \
                and self._replan_pays(state, limit):
            # (A whole epoch shows every turn but the low-value ones it folded, and a planned
            # epoch keeps going where the re-plan would not pay for itself: the tail states an
            # anchor the history does not show, _tail. RFC 0025, decision 4.)
            return "anchor_not_in_history"
        return None

    # -- the request --------------------------------------------------------------------------------
    def _request(self, state: WalkState, end: int, control: object, replanned: bool,
                 reason: str | None, moment: Moment | None = None) -> SessionRequest:
        tail = self._tail(state, end, control)
        # A whole epoch with nothing to state beyond its history sends no tail part at all.
        tail_parts = ((text_part(tail.text, tail.tokens, tail.refs, spans=spans_of(tail.blocks)),)
                      if tail.blocks else ())
        last = state.segments[-1] if state.segments else None
        parts = (*state.frozen, *state.closed_parts, *(last.parts if last else ()), *tail_parts)
        history_end = len(parts) - 1 - len(tail_parts)
        while history_end >= 0 and not (parts[history_end].content or parts[history_end].calls):
            history_end -= 1
        body = state.frozen_tokens + state.appended_tokens()
        request_tokens = body + self._tail_cost(state, tail)
        cached = 0 if replanned else state.last_request_end
        state.last_request_end = body
        frozen_text, frozen_content, frozen_content_tokens, _, _ = state.frozen_sums()
        # Joined from per-epoch and per-segment strings, the closed segments' kept as they
        # closed: no Python-level pass over what was appended since the re-plan.
        if self.layout is Layout.TEXT:
            text = "".join([frozen_text, *state.closed_texts, last.text if last else "",
                            tail.text])
            used = request_tokens
        else:
            text = "".join([frozen_content, *state.closed_contents,
                            last.content if last else "", tail.text])
            used = (frozen_content_tokens + state.closed_content_tokens
                    + (last.content_tokens if last else 0) + tail.tokens)
        # What the manifest needs, captured now (the state moves on with the next request).
        snapshot = Snapshot(
            frozen=state.manifest, budget=state.budget, start=state.start,
            plan_budget=state.plan_budget, low_water_tokens=state.low_water_tokens,
            frozen_tokens=state.frozen_tokens,
            prefix_tokens=state.frozen_sums()[3], appended_tokens=state.appended_tokens(),
            appended_log=state.appended_refs, appended_count=len(state.appended_refs),
            current=state.current, anchor=state.anchor, folds=list(state.folds))
        return SessionRequest(layout=self.layout, budget_tokens=state.budget, used_tokens=used,
                              request_tokens=request_tokens, parts=parts,
                              prefix_count=state.prefix_count,
                              frozen_count=len(state.frozen),
                              history_end=history_end, cached_tokens=cached,
                              tail_tokens=request_tokens - body, epoch=state.start.epoch,
                              replanned=replanned, replan_reason=reason, text=text,
                              binds=any(sec.omitted for sec in state.manifest.sections),
                              limit_pos=end, moment=moment,
                              has_tail=bool(tail_parts), tail_blocks=tail.blocks,
                              make_manifest=lambda: session_manifest(
                                  snapshot, tail, text, used, request_tokens, cached,
                                  replanned, reason, layout=self.layout))
