"""The session projector's groundwork (split from session.py): what a projector holds, the key
its persisted state is filed under, the renderers of the history's records, and the tail a
request ends with (:mod:`.tail`), kept in the walk's state until a record that may change it is
walked. :mod:`.session_epochs` adds the re-plans and their persistence, :mod:`.session` the walk
and the request; its docstring is the theory of operation.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Final

import attrs
import msgspec

from holon_ctx.ledger.epochs import EPOCH_FORMAT, EpochStore, MemoryEpochStore
from holon_ctx.ledger.records import Turn
from holon_ctx.ledger.store import LedgerStore
from holon_ctx.projection.base.framing import OPENAI, Framing, FramingRule
from holon_ctx.projection.base.model import (
    ControlSource,
    ControlState,
    EpisodeSource,
    Section,
    TurnUnit,
)
from holon_ctx.projection.base.policy import Policy, TokenCaps
from holon_ctx.projection.base.relation import current_relation
from holon_ctx.projection.planning.manifest import SECTION_TITLES
from holon_ctx.projection.planning.retention import FactsCache
from holon_ctx.projection.planning.sections import held_words
from holon_ctx.projection.planning.tail import Tail, tail_blocks
from holon_ctx.projection.provider_formats.native import Role, framing_between, text_part
from holon_ctx.projection.rendering.effects import effect_lines
from holon_ctx.projection.rendering.render import Renderer
from holon_ctx.projection.session.replan import Prepared
from holon_ctx.projection.session.session_state import (
    Layout,
    SessionPolicy,
    WalkState,
    pending_line,
)
from holon_ctx.projection.session.work_state import work_reads
from holon_ctx.tokens import TokenCounter, store_counter

#: Changes whenever what a walk renders changes: part of every state key, so a persisted state
#: made by other code is never continued (it is rebuilt instead).
ENGINE_VERSION: Final = "session/14"


class _ProjectorBase:
    """What a session projector holds, its state key, its renderers and the tail
    (``SessionProjector`` is the class to use; see :mod:`holon_ctx.projection.session.session`)."""

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
        self.renderer = Renderer(self.counter, store.counter_identity, self.policy, self.framing,
                                 store=store)
        self._entry_renderers: dict[int, Renderer] = {}
        self._facts = FactsCache()
        self._headers = {s: self.counter.count(SECTION_TITLES[s] + "\n") for s in Section}
        self._states: dict[int, WalkState] = {}
        #: What re-plans read at each position, for the request being made only (see
        #: ``_EpochPlanner._prepared_at``): emptied when the request returns or raises, so it
        #: never outlives the episodes and governed state it was read with.
        self._prepared: dict[int, tuple[object, Prepared]] = {}
        self._keeping_reads = False
        self._keys: dict[int, str] = {}
        self._keys_of: tuple[object, ...] | None = None

    # -- the key and the renderers -------------------------------------------------------------
    def state_key(self, budget_tokens: int) -> str:
        """What a walk depends on besides the ledger, digested (see :mod:`holon_ctx.ledger.epochs`).
        Kept per budget while the projector's settings are the same objects: every re-plan
        files its epoch under it, and a refusal's need search re-plans at nearly every record."""
        settings = (self.layout, self.counter, self.session, self.framing.rule,
                    self.policy)
        if self._keys_of is None or any(a is not b for a, b in zip(self._keys_of, settings,
                                                                   strict=True)):
            self._keys_of, self._keys = settings, {}
        key = self._keys.get(budget_tokens)
        if key is None:
            spec = msgspec.json.encode([ENGINE_VERSION, EPOCH_FORMAT, budget_tokens,
                                        self.layout.value, self.counter.identity,
                                        attrs.asdict(self.session),
                                        attrs.asdict(self.framing.rule),
                                        attrs.asdict(self.policy)])
            key = self._keys[budget_tokens] = hashlib.sha256(spec).hexdigest()[:32]
        return key

    def _entry_renderer(self, budget: int, *, whole: bool) -> Renderer:
        """The renderer of records joining the history: each body may take ``entry_share`` of the
        budget in a whole epoch, ``planned_entry_share`` in a planned one (RFC 0025, decision
        6), so the newest steps are not cut to the stateless caps while there is room. Decided
        by the budget, the policy and the epoch's kind alone: the appended form stays a function
        of the record (a rebuild renders the same bytes)."""
        share = self.session.entry_share if whole else self.session.planned_entry_share
        room = int(budget * share)
        found = self._entry_renderers.get(room)
        if found is None:
            caps = self.policy.caps
            scaled = TokenCaps(**{name: max(value, room) for name, value in
                                  attrs.asdict(caps).items()})
            found = Renderer(self.counter, self.store.counter_identity,
                             attrs.evolve(self.policy, caps=scaled), self.framing,
                             records_of=self.renderer)
            self._entry_renderers[room] = found
        return found

    # -- the tail --------------------------------------------------------------------------------
    def _fold_facts(self, state: WalkState) -> Callable[[TurnUnit], list[str]]:
        """Each pending turn's facts, judged beside the turn before it (as the planner does)."""
        before = {unit.turn.id: previous for unit, previous in state.pending}
        return lambda unit: self._facts.facts(unit, before.get(unit.turn.id))

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
        work_item, waits, settled = work_reads(self.store, state, limit)
        for ref in state.unresolved.values():
            if ref not in state.effect_runs:
                found = self.store.get(ref)
                if found is not None:
                    state.effect_runs[ref] = found
        held = self._held(state, control)
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
                                 ends_request=ends_request,
                                 work_in_history=not state.whole and not ends_request)
        return state.tail

    def _held(self, state: WalkState, control: object) -> dict[str, str] | None:
        """The constraints' words the history shows, for the tail to name (None: no constraint)."""
        held = None
        if isinstance(control, ControlState) and control.constraints:
            # Words of a constraint the history lets the model read (its turn is shown: full,
            # or pinned compact) are named, not repeated. state.shown only grows with a turn
            # record walked, which drops this cached tail, so the tail follows it.
            records = (self.store.get(ref) for ref, _ in control.constraints)
            held = held_words(control, (s for s in records if s is not None
                                        and getattr(s.record, "turn_id", None) in state.shown),
                              self.policy.text.operator_excerpt)
        return held

    def _tail_cost(self, state: WalkState, tail: Tail) -> int:
        if self.layout is Layout.TEXT:
            return tail.tokens
        rule = self.renderer.framing
        if not tail.blocks:
            return rule.reply  # no tail part: the reply's priming only
        framing = framing_between(rule, state.last_role(), text_part(tail.text, tail.tokens))
        return framing + tail.tokens + rule.reply


def cur_id(state: WalkState) -> str | None:
    """The id of the walk's current turn (None before the first)."""
    return state.current.turn.id if state.current is not None else None
