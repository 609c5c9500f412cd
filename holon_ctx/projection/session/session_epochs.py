"""The session projector's re-plans and their persistence (split from session.py, RFC 0010 and
RFC 0025): a new epoch planned at the low-water mark, whether a re-plan pays for itself, and the
epoch state saved at each re-plan and loaded (or rebuilt) by the next process. :mod:`.session`
has the theory of operation.
"""

from __future__ import annotations

import math
from typing import Final

import msgspec

from holon_ctx.errors import BudgetTooSmallError
from holon_ctx.ledger.epochs import EpochStart, EpochState
from holon_ctx.ledger.records import Environment, Turn
from holon_ctx.projection.base.model import ControlHistory, Form
from holon_ctx.projection.planning.frontier import Tally
from holon_ctx.projection.planning.sections import environment_blocks
from holon_ctx.projection.planning.view import continuation_anchor
from holon_ctx.projection.session.persisted import persisted_parts, restored_parts
from holon_ctx.projection.session.replan import Frozen, Prepared, prepare, replan
from holon_ctx.projection.session.session_base import _ProjectorBase
from holon_ctx.projection.session.session_state import (
    Layout,
    Persisted,
    PersistedTally,
    WalkState,
    parts_cost,
)
from holon_ctx.projection.session.work_state import say_work_state, work_key, work_reads

#: Turns whose records measure how fast the history grows, for the low-water mark.
GROWTH_TURNS: Final = 16
#: Tokens a record's label line and framing add to its body in the history (about).
RECORD_OVERHEAD: Final = 12
#: An over-budget re-plan of an epoch that started at most this many turns before is a walk that
#: re-plans at nearly every turn: it keeps room to grow (RFC 0010, decision 7). Three: an epoch
#: that kept ``1 - low_water`` of the budget lasts two or three turns of steps each about an
#: entry's share, and must still count, or the next re-plan fills the budget again.
THRASH_TURNS: Final = 3
#: Positions whose reads a request keeps (``_prepared_at``): about 0.1-0.3 MB each (a view of
#: page 0 with its records, the recalled episodes, tier 0's items). Every try of a need search
#: walks from the same checkpoint turn, so the first positions kept are the ones reused; past
#: the cap a re-plan still reads its position once for all the plan budgets it tries.
PREPARED_POSITIONS: Final = 1024
#: The lowest share of the budget a re-plan fills, however fast the history grows: below it a
#: re-plan keeps little beyond the pinned turns (which raise the plan's budget anyway).
MIN_LOW_WATER: Final = 0.1


class _EpochPlanner(_ProjectorBase):
    """Re-plans and the persisted epochs of ``SessionProjector``."""

    # -- re-plans and persistence -------------------------------------------------------------------
    def _replan(self, budget: int, limit: int, control: object, *, reason: str,
                after: EpochStart | None = None) -> WalkState:
        """A new epoch at position ``limit``, planned at the low-water budget — raised until the
        pinned turns (the current input, its anchor, the previous step) are in their full forms,
        lowered until the frozen part and the tail fit (the tail is not planned: it is stated).
        ``after``: the epoch it replaces (None: none, or a checkpoint's)."""
        low_water = plan_budget = self._low_water(budget, limit)
        whole = self._opens_ledger(limit)
        # Every epoch sends the environment in the one form the budget fixes (_environment_form),
        # the whole epoch too: a whole epoch that sent a guidance larger than ``entry_share`` of
        # the budget whole (as the baselines do) had its first re-plan rewrite the request from
        # the system message on (RFC 0025, decision 8).
        env_form = self._environment_form(budget, limit)
        tried_full = shrinking = False
        over = step = 0
        prepared = self._prepared_at(limit, control)
        # The continuation anchor's full form only where it leaves room for three agent steps
        # of the largest size a step joins the history in (a reply and a result, the result at
        # most an entry's share): the previous step, the current one and the next (replan's
        # ``anchor_cap``; RFC 0010, decision 7). Fixed by the budget, so every epoch agrees.
        anchor_cap = budget - 3 * (int(budget * self.session.entry_share) + 2 * RECORD_OVERHEAD)
        for _ in range(16):
            try:
                frozen = replan(self.store, self.renderer, self.policy, self._facts,
                                self.episodes, control,  # type: ignore[arg-type]
                                limit_pos=limit, budget_tokens=plan_budget,
                                headers=self._headers, environment_form=env_form,
                                prepared=prepared, anchor_cap=anchor_cap)
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
            say_work_state(self.store, self.renderer, state, limit, replan=True)
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
            if self.renderer.huge(frozen.view.current) and _thrashing(reason, after, frozen) \
                    and frozen.pinned_need is not None \
                    and frozen.pinned_need > room - self._growth(budget, limit):
                # A huge current turn whose last epoch lasted a few turns at most, and raised to
                # the brim the request would leave less room than the history grows by in a
                # turn: the next record would re-plan again, and so on at every record, each
                # re-plan planning the turn again (RFC 0010, decision 7). Only a huge turn: a
                # loop of agent steps keeps its previous step whole at the brim (the last two
                # steps are what the next one continues from, tests/test_session_frontier.py).
                # The raise stops at the low-water ceiling instead, keeping ``1 - low_water`` of
                # the budget to grow into — save what the operator's words need: they come
                # first.
                kept = room - budget + int(budget * self.session.low_water)
                room = min(room, max(kept, frozen.words_need or 0))
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

    def _prepared_at(self, limit: int, control: object) -> Prepared:
        """What a re-plan at ``limit`` reads before it plans (:class:`.replan.Prepared`): kept
        for the request being made (``self._prepared``), so the plan budgets a re-plan tries and
        the budgets a refusal's need search walks (need.py) read each position once. Keyed by
        the position and the governed state's identity: a walk reads each position's own from
        the request's control history, the same object at every budget."""
        kept = self._prepared.get(limit)
        if kept is not None and kept[0] is control:
            return kept[1]
        prepared = prepare(self.store, self.renderer, self.policy, self.episodes,
                           control, limit_pos=limit)  # type: ignore[arg-type]
        if len(self._prepared) < PREPARED_POSITIONS:
            # The control object is kept with it: its identity is the key, and a kept object's
            # id is never reused by another.
            self._prepared[limit] = (control, prepared)
        return prepared

    def _environment_form(self, budget: int, limit: int) -> Form | None:
        """The environment's form in every epoch: whole when its full form takes at most
        ``entry_share`` of the budget (the most one record may take in the history), else its
        compact lines. Decided by the budget and the record alone, so every re-plan of a
        session at this budget sends the same stable prefix: left to the planner, the form
        followed the plan budget (whole, clipped at one point, clipped at another), and each
        re-plan rewrote the whole request from its system message on (RFC 0025, decisions 4
        and 8)."""
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
        # The records as a whole epoch caps them, not as a planned epoch now clips them
        # (planned_entry_share): read through the lower cap the mark rose, each re-plan kept
        # more, and the bill grew (twelve at 4,096: 445k → 478k; RFC 0025, decision 6).
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
            unresolved=dict(frozen.unresolved), still_open=frozen.still_open)
        state.last_request_end = 0
        return state

    def _persist(self, state: WalkState) -> None:
        tally = state.tally
        frozen = Persisted(
            parts=persisted_parts(state.frozen), prefix_count=state.prefix_count,
            frozen_tokens=state.frozen_tokens, manifest=state.manifest, env_ref=state.env_ref,
            work_item_id=state.work_item_id, shown=sorted(state.shown),
            open_turn=state.open_turn,
            tally=None if tally is None else PersistedTally(
                tally.done, tally.failed, tally.pending, sorted(tally.run_keys), tally.files,
                tally.pending_calls, tally.answered),
            cover=state.cover, plan_budget=state.plan_budget, unresolved=dict(state.unresolved),
            whole=state.whole, low_water_tokens=state.low_water_tokens,
            still_open=sorted(state.still_open))
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
                            reason=start.reason, after=earlier[-2] if len(earlier) > 1 else None)

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
        state = WalkState(
            key=self.state_key(budget), budget=budget, layout=self.layout, start=start,
            frozen=restored_parts(frozen.parts), prefix_count=frozen.prefix_count,
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
            whole=frozen.whole, low_water_tokens=frozen.low_water_tokens,
            still_open=frozenset(frozen.still_open))
        if not state.whole:  # the frozen part says the work state as of its re-plan
            state.work_stated = work_key(work_reads(self.store, state, limit))
        return state


def _thrashing(reason: str, after: EpochStart | None, frozen: Frozen) -> bool:
    """An over-budget re-plan of an epoch that started at most :data:`THRASH_TURNS` turns ago:
    a walk that re-plans at (nearly) every turn or record. Read from the epoch starts, so a process that
    re-plans at a saved start decides as the walk did."""
    return (reason == "over_budget" and after is not None
            and after.turn_seq >= frozen.view.current.turn.seq - THRASH_TURNS)


_persisted_decoder = msgspec.json.Decoder(Persisted)
