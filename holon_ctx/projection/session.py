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
conversation (:mod:`.native`), budgeted as :func:`~holon_ctx.projection.providers.measure` counts
it, framing included — an OpenAI and an Anthropic request from the same parts.

This module is a little over the house's ~400 lines: the walk, the re-plan and the request share
one state object and one order of operations, and splitting them apart would hide that order.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from typing import Final

import attrs
import msgspec

from holon_ctx.errors import BudgetTooSmallError, InputError, quote_value
from holon_ctx.ledger.epochs import (
    EPOCH_FORMAT,
    EpochStart,
    EpochState,
    EpochStore,
    MemoryEpochStore,
)
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
from holon_ctx.ledger.store import LedgerStore, StoredRecord
from holon_ctx.projection.effects import effect_lines, track_effects
from holon_ctx.projection.framing import OPENAI, Framing, FramingRule
from holon_ctx.projection.frontier import Tally
from holon_ctx.projection.manifest import SECTION_TITLES
from holon_ctx.projection.model import (
    ControlHistory,
    ControlSource,
    ControlState,
    EpisodeSource,
    Form,
    Priority,
    RecallQuery,
    Section,
    TurnUnit,
)
from holon_ctx.projection.native import (
    Role,
    framing_between,
    text_part,
)
from holon_ctx.projection.policy import Policy, TokenCaps
from holon_ctx.projection.relation import current_relation
from holon_ctx.projection.render import Renderer
from holon_ctx.projection.replan import Frozen, replan
from holon_ctx.projection.retention import (
    FactsCache,
    in_fold_run,
    judged_beside,
    may_join_fold_run,
)
from holon_ctx.projection.sections import environment_blocks, held_words
from holon_ctx.projection.session_state import (
    Layout,
    Persisted,
    PersistedTally,
    SessionPolicy,
    SessionRequest,
    Snapshot,
    WalkState,
    append_fold,
    append_record,
    checkpoint_turn,
    opens_block,
    parts_cost,
    pending_line,
    session_manifest,
)
from holon_ctx.projection.tail import Tail, tail_blocks
from holon_ctx.projection.topics import input_topic, is_required
from holon_ctx.projection.view import continuation_anchor, units_of
from holon_ctx.projection.waits import settle_control, settle_waits
from holon_ctx.tokens import TokenCounter, store_counter

__all__ = ["ENGINE_VERSION", "Layout", "SessionPolicy", "SessionProjector", "SessionRequest"]

#: Changes whenever what a walk renders changes: part of every state key, so a persisted state
#: made by other code is never continued (it is rebuilt instead).
ENGINE_VERSION: Final = "session/8"
#: Turns whose records measure how fast the history grows, for the low-water mark.
GROWTH_TURNS: Final = 16
#: Tokens a record's label line and framing add to its body in the history (about).
RECORD_OVERHEAD: Final = 12
#: The lowest share of the budget a re-plan fills, however fast the history grows: below it a
#: re-plan keeps little beyond the pinned turns (which raise the plan's budget anyway).
MIN_LOW_WATER: Final = 0.1
#: How many times the score an episode was left out at it must now reach to re-plan for it.
_REWEIGH: Final = 2.0


class SessionProjector:
    """``SessionProjector(store).request(budget_tokens=8192)`` — see the module docstring.

    Keep one per ledger and process: it keeps each budget's walk in memory, and persists every
    re-plan in ``epochs`` (default: in memory; a database ledger's callers pass the store beside
    it, so a new process continues where the last one stopped).
    """

    def __init__(self, store: LedgerStore, counter: TokenCounter | None = None, *,
                 layout: Layout = Layout.TEXT, episodes: EpisodeSource | None = None,
                 control: ControlSource | None = None, policy: Policy | None = None,
                 session: SessionPolicy | None = None, epochs: EpochStore | None = None,
                 framing: FramingRule | None = None) -> None:
        self.store = store
        # The store's own counter by default: its cached counts are then the ones used.
        self.counter = counter or store_counter(store)
        self.layout = Layout(layout)
        self.episodes = episodes
        self.control = control
        self.policy = policy or Policy()
        self.session = session or SessionPolicy()
        self.epochs: EpochStore = epochs if epochs is not None else MemoryEpochStore()
        #: How the provider frames a request (RFC 0022): the messages layout is budgeted with it.
        self.framing = Framing(framing or OPENAI, self.counter)
        self.renderer = Renderer(self.counter, store.counter_identity, self.policy, self.framing)
        self._entry_renderers: dict[int, Renderer] = {}
        self._facts = FactsCache()
        self._headers = {s: self.counter.count(SECTION_TITLES[s] + "\n") for s in Section}
        self._states: dict[int, WalkState] = {}

    # -- the key and the renderers -------------------------------------------------------------
    def state_key(self, budget_tokens: int) -> str:
        """What a walk depends on besides the ledger, digested (see :mod:`holon_ctx.ledger.epochs`)."""
        spec = msgspec.json.encode([ENGINE_VERSION, EPOCH_FORMAT, budget_tokens, self.layout.value,
                                    self.counter.identity, attrs.asdict(self.session),
                                    attrs.asdict(self.framing.rule),
                                    attrs.asdict(self.policy)])
        return hashlib.sha256(spec).hexdigest()[:32]

    def _entry_renderer(self, budget: int) -> Renderer:
        """The renderer of records joining the history: each body may take ``entry_share`` of the
        budget, so the newest steps are not cut to the stateless caps while there is room."""
        found = self._entry_renderers.get(budget)
        if found is None:
            room = int(budget * self.session.entry_share)
            caps = self.policy.caps
            scaled = TokenCaps(**{name: max(value, room) for name, value in
                                  attrs.asdict(caps).items()})
            found = Renderer(self.counter, self.store.counter_identity,
                             attrs.evolve(self.policy, caps=scaled), self.framing)
            self._entry_renderers[budget] = found
        return found

    # -- requests ---------------------------------------------------------------------------------
    def request(self, *, budget_tokens: int, at: str | None = None,
                limit_pos: int | None = None) -> SessionRequest:
        """The request as of turn ``at`` (all its records), as of position ``limit_pos``, or
        (neither) as of the end of the ledger."""
        if isinstance(budget_tokens, bool) or not isinstance(budget_tokens, int) \
                or budget_tokens <= 0:
            raise InputError(f"budget must be a positive number of tokens, got {quote_value(budget_tokens)}",
                             path="budget_tokens")
        end = self._end(at, limit_pos)
        controls = self._controls()
        state, replanned, reason = self._walk_to(budget_tokens, end, controls)
        # A side effect the governed store holds that a newer run resolved is stated resolved
        # (RFC 0023), as of the request's own position.
        control = settle_control(self.store, controls.at(end), end)
        return self._request(state, end, control, replanned, reason)

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

    def rebuild(self, *, budget_tokens: int) -> None:
        """Forget the persisted state of ``budget_tokens``: the next request walks the ledger
        again from its first turn (derived data, so the requests come out the same)."""
        self.epochs.clear(self.state_key(budget_tokens))
        self._states.pop(budget_tokens, None)

    def epoch_starts(self, *, budget_tokens: int) -> list[EpochStart]:
        return self.epochs.starts(self.state_key(budget_tokens))

    def _end(self, at: str | None, limit_pos: int | None) -> int:
        from holon_ctx.projection.view import resolve_limit  # noqa: PLC0415 - one use

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
                    state = self._replan(budget, stored.pos + 1, control, reason=why)
                    replanned, reason = True, why
                else:
                    state.pos = stored.pos + 1
            # The governed state may have grown since the last record was walked (a compaction
            # sealed at this very position): the request must still hold its budget, with the
            # governed state as the request states it (settled as of ``end``, RFC 0023).
            control = settle_control(self.store, controls.at(end), end)
            if state.frozen_tokens + state.appended_tokens() + self._tail_cost(
                    state, self._tail(state, end, control)) > budget:
                state = self._replan(budget, end, control, reason="over_budget")
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
        r = self._entry_renderer(state.budget)
        if isinstance(rec, Turn):
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
        else:
            if isinstance(rec, Pin):
                target = self.store.get(rec.target)
                owner = getattr(target.record, "turn_id", None) if target else None
                if isinstance(target.record if target else None, Turn):
                    owner = rec.target.removeprefix("turn:")
                if owner is not None and owner not in state.shown:
                    return "pinned_turn_not_in_history"
            cur = state.current
            if cur is not None and stored.turn_seq == cur.turn.seq:
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
            if isinstance(rec, Tool):
                track_effects(state.unresolved, [stored])
                if state.tally is not None \
                        and self._work_item_of(stored, state) in (state.work_item_id, None):
                    state.tally.add(stored)
            self._append_to_run(state, stored, r)
        if not isinstance(rec, Message | Brief):
            # A reply or a brief changes nothing the tail states; anything else may.
            state.tail = None
            if isinstance(rec, WorkItem | Wait) or getattr(rec, "wait_id", None) is not None:
                # A task result or an event naming a wait answers it (RFC 0023).
                state.tail_reads = None
        tail = self._tail(state, limit, control)
        total = state.frozen_tokens + state.appended_tokens() + self._tail_cost(state, tail)
        if total > state.budget:
            return "over_budget"
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

    def _fold_facts(self, state: WalkState) -> Callable[[TurnUnit], list[str]]:
        """Each pending turn's facts, judged beside the turn before it (as the planner does)."""
        before = {unit.turn.id: previous for unit, previous in state.pending}
        return lambda unit: self._facts.facts(unit, before.get(unit.turn.id))

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
        for ep in self.episodes.recall(query, self.policy.recall):
            if ep.priority <= Priority.HIGH and ep.score > _REWEIGH * weighed.get(ep.ref, -1.0):
                return "episode_recalled"
        return None

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

    def _unit(self, turn_id: str, limit: int) -> TurnUnit | None:
        stored = self.store.turn(turn_id)
        if stored is None or stored.pos >= limit or stored.turn_seq is None:
            return None
        assert isinstance(stored.record, Turn)
        seq = stored.record.seq
        return TurnUnit(stored=stored, records=tuple(self.store.records_of_turns(seq, seq, limit)))

    def _tail(self, state: WalkState, limit: int, control: object) -> Tail:
        """The tail as of ``limit``; kept until a record that may change it is walked."""
        # Kept while nothing it states has changed: no record that could change it was walked,
        # and the governed state reads the same (it changes outside the ledger).
        # A whole epoch states only what no record says — unless its history ends with the
        # model's own reply: a provider request must end on a user turn (Anthropic reads a
        # trailing assistant message as a prefill), so the tail is the full one there.
        # So is it when the turn continues one the whole history folded (a tick a task result
        # answers): the tail's anchor line says what it continues.
        anchor = state.anchor
        ends_request = self.layout is Layout.MESSAGES and state.last_role() is Role.ASSISTANT
        stated = not state.whole or ends_request or (
            anchor is not None and anchor.turn.id != cur_id(state)
            and anchor.turn.id not in state.shown)
        if state.tail is not None and state.tail_control == control \
                and state.tail_stated == (stated, ends_request):
            return state.tail
        state.tail_control, state.tail_stated = control, (stated, ends_request)
        cur = state.current
        assert cur is not None
        wid = state.work_item_id
        reads = state.tail_reads
        if reads is None or reads[0] != wid:
            # Kept until the walk passes a work-item or a wait record: the store derives these
            # states from those records alone, so the reads as of ``limit`` are the same.
            work_item = self.store.work_item_state(wid, limit) if wid else None
            waits, settled = (settle_waits(self.store, self.store.open_waits(limit), limit)
                              if work_item is not None else ([], []))
            reads = state.tail_reads = (wid, work_item, waits, settled)
        _, work_item, waits, settled = reads
        for ref in state.unresolved.values():
            if ref not in state.effect_runs:
                found = self.store.get(ref)
                if found is not None:
                    state.effect_runs[ref] = found
        held = None
        if isinstance(control, ControlState) and control.constraints:
            # Words of a constraint the history lets the model read (its turn is shown: full,
            # or pinned compact) are named, not repeated. state.shown only grows with a turn
            # record walked, which drops this cached tail, so the tail follows it.
            records = (self.store.get(ref) for ref, _ in control.constraints)
            held = held_words(control, (s for s in records if s is not None
                                        and getattr(s.record, "turn_id", None) in state.shown),
                              self.policy.text.operator_excerpt)
        state.tail = tail_blocks(self.renderer, relation=current_relation(cur), current=cur,
                                 stated=stated,
                                 anchor=state.anchor, work_item=work_item, waits=waits,
                                 settled=settled,
                                 tally=state.tally, frontier_cover=state.cover,
                                 control=control,  # type: ignore[arg-type]
                                 run=pending_line(self.renderer, state, self._fold_facts(state)),
                                 effects=effect_lines(self.renderer, state.unresolved,
                                                      state.effect_runs), held=held,
                                 anchor_shown=anchor is not None and anchor.turn.id in state.shown,
                                 ends_request=ends_request)
        return state.tail

    def _tail_cost(self, state: WalkState, tail: Tail) -> int:
        if self.layout is Layout.TEXT:
            return tail.tokens
        rule = self.renderer.framing
        if not tail.blocks:
            return rule.reply  # no tail part: the reply's priming only
        framing = framing_between(rule, state.last_role(), text_part(tail.text, tail.tokens))
        return framing + tail.tokens + rule.reply

    # -- re-plans and persistence -------------------------------------------------------------------
    def _replan(self, budget: int, limit: int, control: object, *, reason: str) -> WalkState:
        """A new epoch at position ``limit``, planned at the low-water budget — raised until the
        pinned turns (the current input, its anchor, the previous step) are in their full forms,
        lowered until the frozen part and the tail fit (the tail is not planned: it is stated)."""
        low_water = plan_budget = self._low_water(budget, limit)
        whole = self._opens_ledger(limit)
        # A whole epoch's plan holds the environment as the planner chooses (the baselines send
        # it whole); a planned epoch's form is fixed by the budget alone (_environment_form).
        env_form = None if whole else self._environment_form(budget, limit)
        tried_full = shrinking = False
        over = step = 0
        for _ in range(16):
            try:
                frozen = replan(self.store, self.renderer, self.policy, self._facts,
                                self.episodes, control,  # type: ignore[arg-type]
                                limit_pos=limit, budget_tokens=plan_budget,
                                headers=self._headers, environment_form=env_form)
            except BudgetTooSmallError as exc:
                if tried_full or plan_budget >= budget:
                    # Said against the caller's budget: the pinned part the planner could not
                    # fit in its share, plus what the request needs beside the plan (the tail
                    # and the framing took the rest of the budget).
                    raise BudgetTooSmallError(
                        max(exc.required_tokens + budget - plan_budget, budget + 1), budget,
                        "the pinned references and the current state") from None
                # The low-water mark is below the pinned minimum: use the whole budget instead.
                tried_full, plan_budget = True, budget
                continue
            state = self._state_from(frozen, budget, limit, reason)
            state.whole = whole
            tail_cost = self._tail_cost(state, self._tail(state, limit, control))
            over = state.frozen_tokens + tail_cost - budget
            if over > 0:
                # Less by the overshoot, then by more each time: a plan does not always shrink
                # token for token (its forms step; message framing is not planned).
                step = over if not shrinking else max(over, step * 2)
                shrinking = True
                plan_budget -= step
                if plan_budget <= 0:
                    break
                continue
            room = budget - tail_cost - (state.frozen_tokens - frozen.projection.used_tokens)
            need = frozen.pinned_need
            if not shrinking and need is not None and plan_budget < min(need, room):
                # Up to the room there is: a pinned turn that still does not fit whole is then
                # clipped to the token, with the ref of its full text, rather than reduced to a
                # line.
                plan_budget = min(need, room)
                continue
            state.plan_budget, state.low_water_tokens = plan_budget, low_water
            self._persist(state)
            return state
        raise BudgetTooSmallError(budget + max(over, 1), budget,
                                  "the pinned references and the current state")

    def _environment_form(self, budget: int, limit: int) -> Form | None:
        """The environment's form in a planned epoch: whole when its full form takes at most
        ``entry_share`` of the budget (the most one record may take in the history), else its
        compact lines. Decided by the budget and the record alone, so every re-plan of a
        session at this budget sends the same stable prefix: left to the planner, the form
        followed the plan budget (whole, clipped at one point, clipped at another), and each
        re-plan rewrote the whole request from its system message on (RFC 0025)."""
        env = self.store.latest_environment(limit)
        if env is None:
            return None
        _, full, _ = environment_blocks(env, self.renderer)
        fits = self.renderer.rendered(full).tokens <= budget * self.session.entry_share
        return Form.FULL if fits else Form.COMPACT

    def _low_water(self, budget: int, limit: int) -> int:
        """The low-water mark of a re-plan at ``limit`` (RFC 0025, decision 2): the largest share
        of the budget at which the re-plan's cache write, spread over the calls until the next
        re-plan, costs no more than reading the cached prefix does on those calls.

        With the history growing by ``g`` tokens a call and a mark of ``L`` of a budget ``B``,
        the next re-plan comes after ``(B - L) / g`` calls; the re-plan writes ``L`` tokens
        where reading them costs ``cache_read``, a premium of ``(cache_write - cache_read) * L``;
        the calls read ``(L + B) / 2`` tokens each on average. The premium per call is at most
        the read per call when ``x² + ρ·γ·x ≤ 1`` (``x = L / B``, ``γ = g / B``,
        ``ρ = 2 (cache_write - cache_read) / cache_read``), so the mark is that equation's root,
        never above ``low_water`` (context the planner keeps) nor below ``MIN_LOW_WATER``. ``L``
        counts the whole frozen part, the environment too, although a re-plan leaves that
        cached: measured on the twelve trajectories, the lower mark this gives bills less than
        leaving the environment out (RFC 0025). The growth is read from the ledger — the
        records of the last ``GROWTH_TURNS`` turns, each body as the history caps it — so any
        process derives the same mark."""
        policy = self.session
        ceiling = max(1, int(budget * policy.low_water))
        gamma = self._growth(budget, limit) / budget
        rho_gamma = 2 * (policy.cache_write - policy.cache_read) / policy.cache_read * gamma
        share = (math.sqrt(rho_gamma * rho_gamma + 4) - rho_gamma) / 2
        return min(ceiling, max(1, int(budget * max(MIN_LOW_WATER, share))))

    def _growth(self, budget: int, limit: int) -> float:
        """Tokens the history grows by per turn, as of ``limit``: the records of the last
        ``GROWTH_TURNS`` turns, each body capped as the history caps it, plus a label's worth
        (read from the ledger, so any process gets the same figure)."""
        latest = self.store.latest_turn(limit)
        if latest is None:
            return 0.0
        seq = latest.record.seq  # type: ignore[union-attr]
        older = self.store.turns_before(seq, GROWTH_TURNS - 1, limit)
        first = older[-1].record.seq if older else seq  # type: ignore[union-attr]
        cap = int(budget * self.session.entry_share)
        grown = sum(min(s.tokens, cap) + RECORD_OVERHEAD
                    for s in self.store.records_of_turns(first, seq, limit))
        return grown / (1 + len(older))

    def _replan_pays(self, state: WalkState, limit: int) -> bool:
        """A re-plan at a work-item switch or at an anchor the history does not show pays for
        itself (RFC 0025, decisions 2 and 4): re-planned,
        the calls until the next forced re-plan read the mark ``L`` instead of the history's
        ``S`` tokens, after one call that writes ``L``. Over ``n = (B - S) / g`` calls it saves
        ``cache_read·(S - L)·n`` and costs ``(cache_write - cache_read)·L``."""
        budget, policy = state.budget, self.session
        size = state.frozen_tokens + state.appended_tokens()
        mark = self._low_water(budget, limit)
        if size <= mark:
            return False
        calls = max(1.0, (budget - size) / max(1.0, self._growth(budget, limit)))
        return (policy.cache_read * (size - mark) * calls
                > (policy.cache_write - policy.cache_read) * mark)

    def _opens_ledger(self, limit: int) -> bool:
        """The epoch starting at ``limit`` is *whole* (RFC 0025): ``limit`` is right after the
        ledger's first turn record, with nothing but environments before it — so the plan holds
        every record there is, and every later one joins the history as it is walked."""
        if not self.session.whole_history:
            return False
        latest = self.store.latest_turn(limit)
        if latest is None or latest.pos + 1 != limit:
            return False
        assert isinstance(latest.record, Turn)
        if self.store.turns_before(latest.record.seq, 1, limit):
            return False
        return all(isinstance(s.record, Environment)
                   for s in self.store.records_between(0, latest.pos))

    def _state_from(self, frozen: Frozen, budget: int, limit: int, reason: str) -> WalkState:
        view, ctx = frozen.view, frozen.ctx
        parts = list(frozen.parts)
        # Epochs are numbered by where they start, so any process numbers them alike.
        start = EpochStart(epoch=limit, turn_id=view.current.turn.id,
                           turn_seq=view.current.turn.seq, limit_pos=limit, reason=reason)
        tally = frozen.tally
        state = WalkState(
            key=self.state_key(budget), budget=budget, layout=self.layout, start=start,
            frozen=parts, prefix_count=frozen.prefix_count,
            frozen_tokens=(frozen.projection.used_tokens if self.layout is Layout.TEXT
                           else parts_cost(parts, None, self.layout, self.renderer.framing)),
            # Without its text: a request's manifest states the request's own text, so the
            # plan's (as long as the frozen part) would only be persisted at every re-plan.
            manifest=msgspec.structs.replace(frozen.projection.manifest, text=""),
            env_ref=view.environment.ref if view.environment else None,
            work_item_id=ctx.work_item_id, shown=set(frozen.shown), open_turn=frozen.open_turn,
            tally=None if tally is None else tally.copy(),
            cover=frozen.frontier_cover, pos=limit, current=view.current,
            anchor=view.unit(view.anchor_id) if view.anchor_id else None,
            unresolved=dict(frozen.unresolved))
        state.last_request_end = 0
        return state

    def _persist(self, state: WalkState) -> None:
        tally = state.tally
        frozen = Persisted(
            parts=state.frozen, prefix_count=state.prefix_count,
            frozen_tokens=state.frozen_tokens, manifest=state.manifest, env_ref=state.env_ref,
            work_item_id=state.work_item_id, shown=sorted(state.shown),
            open_turn=state.open_turn,
            tally=None if tally is None else PersistedTally(
                tally.done, tally.failed, tally.pending, sorted(tally.run_keys), tally.files,
                tally.pending_calls, tally.answered),
            cover=state.cover, plan_budget=state.plan_budget, unresolved=dict(state.unresolved),
            whole=state.whole, low_water_tokens=state.low_water_tokens)
        self.epochs.save(EpochState(key=state.key, start=state.start,
                                    frozen=msgspec.json.encode(frozen)))

    def _load(self, budget: int, end: int, controls: ControlHistory) -> WalkState | None:
        """The persisted epoch that holds position ``end`` (re-planned again when it is an
        earlier epoch than the persisted one), or None when the walk must start over."""
        key = self.state_key(budget)
        saved = self.epochs.load(key)
        if saved is not None and saved.start.limit_pos <= end:
            try:
                frozen = _persisted_decoder.decode(saved.frozen)
            except msgspec.DecodeError:
                frozen = None  # derived data that no longer decodes is rebuilt, never trusted
            if frozen is not None:
                restored = self._restore(budget, saved.start, frozen)
                if restored is not None:
                    return restored
                # Saved beside another ledger: none of the key's epoch starts can be trusted
                # either, so the walk starts over from the beginning of this ledger.
                self.epochs.clear(key)
                return None
        earlier = [s for s in self.epochs.starts(key) if s.limit_pos <= end]
        if not earlier:
            return None
        start = earlier[-1]
        return self._replan(budget, start.limit_pos, controls.at(start.limit_pos),
                            reason=start.reason)

    def _restore(self, budget: int, start: EpochStart, frozen: Persisted) -> WalkState | None:
        """The saved epoch as a walk state; None when it names a turn the ledger does not hold
        there (state saved beside another ledger): derived data that does not match is rebuilt,
        never trusted."""
        limit = start.limit_pos
        current = self._unit(start.turn_id, limit)
        if current is None or current.turn.seq != start.turn_seq:
            return None
        anchor_id, _ = continuation_anchor(self.store, current, {}, limit, self.policy)
        t = frozen.tally
        return WalkState(
            key=self.state_key(budget), budget=budget, layout=self.layout, start=start,
            frozen=list(frozen.parts), prefix_count=frozen.prefix_count,
            frozen_tokens=frozen.frozen_tokens, manifest=frozen.manifest, env_ref=frozen.env_ref,
            work_item_id=frozen.work_item_id, shown=set(frozen.shown),
            open_turn=frozen.open_turn,
            tally=None if t is None else Tally(t.done, t.failed, t.pending,
                                               {tuple(k) for k in t.run_keys},  # type: ignore[misc]
                                               {k: list(v) for k, v in t.files.items()},
                                               dict(t.pending_calls), dict(t.answered)),
            cover=frozen.cover, pos=limit, current=current,
            anchor=self._unit(anchor_id, limit) if anchor_id else None,
            plan_budget=frozen.plan_budget, unresolved=dict(frozen.unresolved),
            whole=frozen.whole, low_water_tokens=frozen.low_water_tokens)

    # -- the request --------------------------------------------------------------------------------
    def _request(self, state: WalkState, end: int, control: object, replanned: bool,
                 reason: str | None) -> SessionRequest:
        tail = self._tail(state, end, control)
        # A whole epoch with nothing to state beyond its history sends no tail part at all.
        tail_parts = (text_part(tail.text, tail.tokens, tail.refs),) if tail.blocks else ()
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
                              limit_pos=end,
                              has_tail=bool(tail_parts), tail_blocks=tail.blocks,
                              make_manifest=lambda: session_manifest(
                                  snapshot, tail, text, used, request_tokens, cached,
                                  replanned, reason, layout=self.layout))

_persisted_decoder = msgspec.json.Decoder(Persisted)


def cur_id(state: WalkState) -> str | None:
    """The id of the walk's current turn (None before the first)."""
    return state.current.turn.id if state.current is not None else None


