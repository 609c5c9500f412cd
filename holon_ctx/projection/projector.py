"""The orchestrator: one call per model turn, from a store to a Projection. It never writes.

    view      = load_view(store, budget, at)            bounded, indexed reads
    relation  = current_relation(view.current)           why this turn exists
    chain     = ChainTracker(...)                        which turns continue with it
    priority  = classify(turn_facts(...)) + pinned       retention class with reason codes
    items     = sections → items with REF/COMPACT/FULL forms (runs of low turns fold into one)
    plan      = planner.plan(items, budget, more=pages)  prefix of a budget-independent order;
                                                         window pages are read as it asks
    text      = sections in order, items chronological   exact: the sum of additive blocks

This is the only module that composes the others.
"""

from __future__ import annotations

from collections import Counter

import attrs
import msgspec

from holon_ctx.errors import HolonCtxError
from holon_ctx.ledger.records import (
    Environment,
    Message,
    MessageRole,
    Pin,
    TaskResult,
    Tool,
    ToolStatus,
    Trust,
    Turn,
)
from holon_ctx.ledger.store import LedgerStore, StoredRecord
from holon_ctx.projection.chains import ChainTracker
from holon_ctx.projection.model import (
    SECTION_ORDER,
    ControlSource,
    ControlState,
    EpisodeManifest,
    EpisodeSource,
    FoldManifest,
    Form,
    Manifest,
    Omission,
    Priority,
    RecalledEpisode,
    RecallQuery,
    Relation,
    Section,
    SectionManifest,
    TurnUnit,
)
from holon_ctx.projection.planner import Block, Item, Plan, Rendered, plan
from holon_ctx.projection.relation import RELATION_TEXT, current_relation
from holon_ctx.projection.render import Renderer, one_line, tool_repeats
from holon_ctx.projection.retention import classify, turn_facts
from holon_ctx.projection.view import Page, View, WindowLimits, load_page, load_view
from holon_ctx.tokens import TokenCounter, default_counter

__all__ = ["SECTION_TITLES", "ItemDecision", "Projection", "Projector"]

SECTION_TITLES: dict[Section, str] = {
    Section.ENVIRONMENT: "## Environment",
    Section.WORK_ITEM: "## Current work item",
    Section.WORK_REFS: "## Work refs",
    Section.EPISODES: "## Episode memory",
    Section.RECENT_TURNS: "## Recent turns",
    Section.CURRENT_INPUT: "## Continuation anchor and current input",
}


@attrs.frozen
class ItemDecision:
    """What happened to one item, for the manifest, the preview and ``explain``."""

    key: str
    section: Section
    priority: Priority
    reasons: tuple[str, ...]
    chain: str | None
    refs: tuple[str, ...]
    form: Form | None
    clipped: bool
    tokens: int
    full_tokens: int
    #: The smallest budget at which the item (or its next richer form) would enter, if known.
    next_budget: int | None
    kind: str


@attrs.frozen
class Projection:
    text: str
    budget_tokens: int
    used_tokens: int
    counter: str
    current_turn: str
    relation: Relation
    anchor_turn: str | None
    decisions: tuple[ItemDecision, ...]
    folds: tuple[FoldManifest, ...]
    manifest: Manifest
    section_text: dict[Section, str]
    #: Chosen items per section in render order, with their blocks: for the preview, which styles
    #: each block by origin and trust instead of re-parsing the prompt text.
    section_items: dict[Section, tuple[tuple[str, Rendered], ...]] = attrs.field(factory=dict)

    def manifest_json(self) -> bytes:
        return msgspec.json.encode(self.manifest)

    @property
    def stable_prefix(self) -> str:
        """The environment section: content that stays the same across turns (cache prefix)."""
        return self.section_text.get(Section.ENVIRONMENT, "")


class Projector:
    """``Projector(store).project(budget_tokens=8192)`` — see the module docstring."""

    def __init__(self, store: LedgerStore, counter: TokenCounter | None = None,
                 *, limits: WindowLimits | None = None,
                 episodes: EpisodeSource | None = None,
                 control: ControlSource | None = None) -> None:
        self.store = store
        self.episodes = episodes
        self.control = control
        self.counter = counter or default_counter()
        self.limits = limits or WindowLimits()
        self.renderer = Renderer(self.counter, store.counter_identity)
        self._facts_cache: dict[tuple[str, int, str | None, int], list[str]] = {}

    def project(self, *, budget_tokens: int, at: str | None = None,
                verify: bool = False) -> Projection:
        if budget_tokens <= 0:
            raise HolonCtxError(f"budget must be a positive number of tokens, got {budget_tokens}")
        view = load_view(self.store, budget_tokens=budget_tokens, at=at, limits=self.limits,
                         extend=_in_fold_run)
        builder = _Builder(view, self.renderer, self.episodes, store=self.store,
                           limits=self.limits, facts_cache=self._facts_cache)
        # Control state is read per call: it changes outside the ledger (reconciliation).
        builder.control_state = self.control.control_state() if self.control else None
        items = builder.items()
        headers = {s: self.counter.count(SECTION_TITLES[s] + "\n") for s in Section}
        chosen = plan(items, budget_tokens=budget_tokens, header_tokens=headers,
                      fixed_tokens=0, clip=builder.clip, more=builder.page_items)
        projection = _assemble(view, builder, [*items, *builder.page_item_list], chosen,
                               budget_tokens, self.counter)
        if verify:
            actual = self.counter.count(projection.text)
            if actual != projection.used_tokens:
                raise HolonCtxError(
                    f"internal: planned {projection.used_tokens} tokens, text has {actual}")
        return projection


#: Turns whose retention facts a Projector remembers between calls (cleared when full).
_FACTS_CACHE = 16_384


def _in_fold_run(unit: TurnUnit, previous: TurnUnit | None) -> bool:
    """Whether a turn is low or diagnostic by its own facts (a page takes such runs whole)."""
    return classify(turn_facts(unit, previous)) >= Priority.LOW


class _Builder:
    """Turns a view into items. Holds the per-turn classification for explain and the manifest."""

    def __init__(self, view: View, renderer: Renderer,
                 episodes: EpisodeSource | None = None, *, store: LedgerStore | None = None,
                 limits: WindowLimits | None = None,
                 facts_cache: dict[tuple[str, int, str | None, int], list[str]] | None = None,
                 ) -> None:
        self.view = view
        self.r = renderer
        self.store = store
        self.limits = limits or WindowLimits()
        self.episode_source = episodes
        self.recalled: list[RecalledEpisode] = []
        self.control_state: ControlState | None = None
        cur = view.current
        self.relation = current_relation(cur)
        self.work_item_id = view.work_item.work_item_id if view.work_item else (
            cur.turn.work_item_id)
        extras = sorted(view.extra.values(), key=lambda u: u.turn.seq)
        # Tier 0: the current turn, page 0 of the window and the turns fetched by point query.
        # Everything derived from these (work refs, chain labels of the extras, the exchange) is
        # the same at every budget; deeper pages come through page_items().
        self.all_units = sorted([*view.window, *extras, cur], key=lambda u: u.turn.seq)
        self.tracker = ChainTracker(cur, self.work_item_id)
        for unit in reversed(view.window):
            self.tracker.feed(unit)
        for unit in reversed(extras):
            self.tracker.feed(unit)
        self.chain = self.tracker.chain
        #: Every window unit loaded so far (all pages), for repeated-tool folds in the manifest.
        self.loaded_units: list[TurnUnit] = [*self.all_units]
        self.pages: list[Page] = [view.first_page]
        self.page_item_list: list[Item] = []
        self._spans: list[tuple[int, int]] | None = None
        self.pinned: dict[str, list[str]] = {}
        self._pin(cur.turn.id, "current_turn")
        if view.anchor_id:
            self._pin(view.anchor_id, "continuation_anchor")
        if view.latest_intent_id:
            self._pin(view.latest_intent_id, "latest_operator_intent")
        if view.work_item is not None:
            owner = self._owner_of(view.work_item.ref)
            if owner:
                self._pin(owner, "current_work_item_transition")
        for pin, target in view.pins:
            owner = self._owner_of(target.ref)
            if owner:
                self._pin(owner, "operator_pin")
            del pin
        self.folds: list[FoldManifest] = []
        self.facts: dict[str, list[str]] = {}
        self._priorities: dict[str, tuple[Priority, tuple[str, ...]]] = {}
        self.facts_cache: dict[tuple[str, int, str | None, int], list[str]] = (
            {} if facts_cache is None else facts_cache)
        self._classify_page(view.first_page)
        self.exchange = self._find_exchange()
        # An agent loop's previous step (same trigger, same anchor) is what the current step
        # answers: keep it whole, as the last exchange is kept for a short operator reply.
        prev = self.all_units[-2] if len(self.all_units) > 1 else None
        if (prev is not None and cur.turn.anchor_turn_id is not None
                and prev.turn.anchor_turn_id == cur.turn.anchor_turn_id
                and prev.turn.trigger == cur.turn.trigger):
            self._pin(prev.turn.id, "previous_step")
            self.previous_step: TurnUnit | None = prev
        else:
            self.previous_step = None
        self.frontier = _frontier(store, view, self.all_units, self.work_item_id)
        self._priorities.clear()  # pins are complete only now

    def _classify_page(self, page: Page) -> None:
        # Facts depend on the turn and its neighbour only (records never change; a turn can only
        # gain records, hence the counts in the key), so a Projector keeps them across calls.
        cache = self.facts_cache
        prev = page.before
        for unit in page.units:
            key = (unit.ref, len(unit.records), prev.ref if prev else None,
                   len(prev.records) if prev else 0)
            facts = cache.get(key)
            if facts is None:
                if len(cache) >= _FACTS_CACHE:
                    cache.clear()
                facts = cache[key] = turn_facts(unit, prev)
            self.facts[unit.turn.id] = facts
            prev = unit

    def _pin(self, turn_id: str, reason: str) -> None:
        self.pinned.setdefault(turn_id, []).append(reason)

    def _owner_of(self, ref: str) -> str | None:
        for unit in self.all_units:
            if unit.ref == ref or any(r.ref == ref for r in unit.records):
                return unit.turn.id
        return None

    def priority_of(self, unit: TurnUnit) -> tuple[Priority, tuple[str, ...]]:
        tid = unit.turn.id
        known = self._priorities.get(tid)
        if known is not None:
            return known
        if tid in self.pinned:
            found = Priority.PINNED, tuple(self.pinned[tid])
        else:
            facts = self.facts.get(tid) or turn_facts(unit)
            found = classify(facts), tuple(facts)
        if tid in self.facts or tid in self.pinned:
            self._priorities[tid] = found
        return found

    # -- items ---------------------------------------------------------------------------
    def items(self) -> list[Item]:
        items: list[Item] = []
        items.extend(self._environment())
        items.extend(self._control())
        items.extend(self._work_item())
        items.extend(self._work_refs())
        items.extend(self._episodes())
        items.extend(self._recent_turns())
        items.extend(self._current_input())
        return items

    def _environment(self) -> list[Item]:
        env = self.view.environment
        if env is None:
            return []
        rec = env.record
        assert isinstance(rec, Environment)
        caps = ", ".join(one_line(c, 40) for c in rec.capabilities) or "none stated"
        compact = [self.r.line(f"workspace: {one_line(rec.workspace, 200)} ({env.ref})", [env.ref]),
                   self.r.line(f"capabilities: {caps}")]
        full = list(compact)
        # Guidance is configuration only when the runtime (or operator) vouches for it; an
        # environment record that claims less is data, fenced, and kept out of a system role.
        vouched = rec.trust in (Trust.RUNTIME_FACT, Trust.TRUSTED_OPERATOR)
        if rec.guidance.strip():
            full.append(self.r.trusted(env, "guidance (runtime configuration):", 1500) if vouched
                        else self.r.fenced(env, "guidance (untrusted, not configuration):", 1500))
        forms = {Form.COMPACT: self.r.rendered(compact), Form.FULL: self.r.rendered(full)}
        reasons = ("environment",) if vouched else ("environment", "untrusted")
        # The stable prefix must not move with the rest of the prompt, or a provider's cache of
        # it misses (docs/providers.md). It is pinned: its compact form is part of the pinned
        # minimum and its full form is among the first upgrades, so at any budget that holds the
        # pinned minimum and the guidance it is whole, whatever the other content. Choosing its
        # form from the budget alone (a share of it) was tried and broke budget monotonicity:
        # where the share admits the guidance, everything after it shrinks by its size, and a
        # budget one token larger lost turns a smaller one had (RFC 0002, "environment").
        return [Item(key=env.ref, section=Section.ENVIRONMENT, priority=Priority.PINNED,
                     reasons=(*reasons, "stable_prefix"), order=0, position=(0,), forms=forms,
                     refs=(env.ref,), kind="environment")]

    def _control(self) -> list[Item]:
        """Governed control state, pinned ahead of the work item (RFC 0004)."""
        state = self.control_state
        if state is None:
            return []
        source = f"governed store, envelope {state.envelope_id}" if state.envelope_id \
            else "governed store"
        items: list[Item] = []
        if state.blocking:
            lines = [self.r.line(f"BLOCKED ON RECONCILIATION ({source}): an external side effect "
                                 "may already have happened. Reconcile it before any further "
                                 "action; never retry the call.")]
            lines += [self.r.line(f"- idempotency key {one_line(key, 160)}: {status}")
                      for key, status in state.blocking]
            items.append(self._control_item("control:blocking", lines, 0, ("blocked_on_reconciliation",)))
        if state.obligations:
            lines = [self.r.line(f"pending obligations ({source}):")]
            lines += [self.r.line(f"- {one_line(o, 300)}") for o in state.obligations]
            items.append(self._control_item("control:obligations", lines, 1, ("pending_obligation",)))
        if state.constraints:
            lines = [self.r.line(f"exact operator constraints ({source}; still in force):")]
            lines += [self.r.line(f"- {ref}: {one_line(text, 400)}") for ref, text in state.constraints]
            items.append(self._control_item("control:constraints", lines, 2, ("exact_constraint",)))
        return items

    def _control_item(self, key: str, lines: list[Block], order: int,
                      reasons: tuple[str, ...]) -> Item:
        head = self.r.rendered(lines[:1])
        return Item(key=key, section=Section.WORK_ITEM, priority=Priority.PINNED, reasons=reasons,
                    order=-30 + order, position=(-3 + order,),
                    forms={Form.REF: head, Form.FULL: self.r.rendered(lines)},
                    refs=(), kind="control")

    def _work_item(self) -> list[Item]:
        state = self.view.work_item
        if state is None:
            return []
        waits = [w for w in self.view.open_waits
                 if w.work_item_id in (None, state.work_item_id)]
        forms = self.r.work_item(state, waits)
        return [Item(key=f"work_item_state:{state.work_item_id}", section=Section.WORK_ITEM,
                     priority=Priority.PINNED, reasons=("current_work_item",), order=-10,
                     position=(0,), forms={Form(k): v for k, v in forms.items()},
                     refs=(state.ref,), kind="work_item")]

    def _work_refs(self) -> list[Item]:
        items: list[Item] = []
        wid = self.work_item_id
        files: dict[str, str] = {}
        tools: Counter[str] = Counter()
        failed: Counter[str] = Counter()
        tasks: dict[str, str] = {}
        for unit in self.all_units:
            if wid and unit.turn.work_item_id not in (wid, None):
                continue
            for stored in unit.records:
                rec = stored.record
                if isinstance(rec, Tool):
                    tools[rec.tool_name] += 1
                    if rec.status.value in ("error", "timeout") or rec.exit_code not in (None, 0):
                        failed[rec.tool_name] += 1
                    for f in rec.files_written:
                        files[f] = stored.ref
                elif isinstance(rec, TaskResult):
                    tasks[rec.task_id] = f"{rec.status.value} ({stored.ref})"
        scope = f" for {wid}" if wid else ""
        frontier = self.frontier.item(self.r, wid) if wid else None
        if frontier is not None:
            items.append(frontier)
            files = {}  # the frontier names every file of the work item, not only the window's
        if files:
            lines = [f"- {one_line(f, 160)} (written by {ref})" for f, ref in files.items()]
            items.append(self._list_item("work_refs:files", f"files touched{scope}:", lines, 0))
        if tasks:
            lines = [f"- task {one_line(t, 60)}: {s}" for t, s in tasks.items()]
            items.append(self._list_item("work_refs:tasks", f"tasks{scope}:", lines, 1))
        if tools:
            lines = [f"- {one_line(name, 40)} ×{n}" + (f", {failed[name]} failed" if failed[name] else "")
                     for name, n in sorted(tools.items())]
            items.append(self._list_item("work_refs:tools", f"tools used{scope}:", lines, 2))
        waits = list(self.view.open_waits)
        if waits:
            lines = [f"- {w.wait_id} ({w.opened_ref}"
                     + (f", work item {w.work_item_id}" if w.work_item_id else "")
                     + f"): {one_line(w.condition, 200)}" for w in waits]
            items.append(self._list_item("work_refs:waits", "open waits:", lines, 3,
                                         priority=Priority.HIGH))
        for i, (pin, target) in enumerate(self.view.pins):
            items.append(self._pin_item(pin, target, 4 + i))
        return items

    def _list_item(self, key: str, title: str, lines: list[str], order: int,
                   priority: Priority = Priority.NORMAL) -> Item:
        full = [self.r.line(title), *(self.r.line(ln) for ln in lines)]
        compact = [self.r.line(title), *(self.r.line(ln) for ln in lines[:5])]
        if len(lines) > 5:
            compact.append(self.r.line(f"- … and {len(lines) - 5} more"))
        forms = {Form.COMPACT: self.r.rendered(compact), Form.FULL: self.r.rendered(full)}
        if len(lines) <= 5:
            forms = {Form.FULL: forms[Form.FULL]}
        return Item(key=key, section=Section.WORK_REFS, priority=priority,
                    reasons=(key.split(":", 1)[1],), order=order, position=(order,),
                    forms=forms, refs=(), kind="work_refs")

    def _pin_item(self, pin: StoredRecord, target: StoredRecord, order: int) -> Item:
        rec = pin.record
        assert isinstance(rec, Pin)
        note = f" — {one_line(rec.note, 200)}" if rec.note else ""
        head = self.r.line(f"operator pin ({pin.ref}) on {target.ref}{note}", [pin.ref])
        trec = target.record
        # A target that a turn owns is shown with that turn, which the pin pins; only a record
        # no turn shows (and no other section shows) is shown here, and selected here.
        shown_elsewhere = {self.view.environment.ref if self.view.environment else None,
                           self.view.work_item.ref if self.view.work_item else None}
        if (isinstance(trec, Turn) or target.turn_seq is not None
                or target.ref in shown_elsewhere):
            return Item(key=pin.ref, section=Section.WORK_REFS, priority=Priority.PINNED,
                        reasons=("operator_pin",), order=order, position=(order,),
                        forms={Form.REF: self.r.rendered([head])}, refs=(pin.ref,), kind="pin")
        if isinstance(trec, Message) and trec.role is MessageRole.OPERATOR:
            body = self.r.trusted(target, "pinned operator words:", 800)
        elif trec.trust is Trust.TRUSTED_OPERATOR or trec.trust is Trust.RUNTIME_FACT:
            body = self.r.trusted(target, "pinned record:", 800)
        else:
            body = self.r.fenced(target, "pinned record (untrusted):", 800)
        return Item(key=pin.ref, section=Section.WORK_REFS, priority=Priority.PINNED,
                    reasons=("operator_pin",), order=order, position=(order,),
                    forms={Form.REF: self.r.rendered([head]),
                           Form.FULL: self.r.rendered([head, body])},
                    refs=(pin.ref,), kind="pin")

    def _episodes(self) -> list[Item]:
        """Recalled episodes, all older than the recent window, ranked by recall score."""
        if self.episode_source is None:
            return []
        view = self.view
        first_seq = view.window[0].turn.seq if view.window else view.current.turn.seq
        texts = [r.record.text for u in (view.current, view.unit(view.anchor_id or ""))
                 if u is not None for r in u.records
                 if isinstance(r.record, Message) and r.record.role is MessageRole.OPERATOR]
        for u in (view.current,):
            texts.extend(r.record.summary for r in u.records if isinstance(r.record, TaskResult))
        refs: set[str] = set()
        for u in self.all_units:
            for r in u.records:
                refs.add(r.ref)
                if isinstance(r.record, Tool):
                    refs.update(r.record.files_written)
        query = RecallQuery(current=view.current, window_first_seq=first_seq,
                            work_item_id=self.work_item_id, limit_pos=view.limit_pos,
                            query_text="\n".join(texts), refs=frozenset(refs))
        self.recalled = self.episode_source.recall(query, 12)
        items = []
        for rank, ep in enumerate(self.recalled):
            forms = {Form.REF: self.r.rendered([self.r.line(ep.ref_text, [ep.ref])])}
            if ep.compact_text:
                forms[Form.COMPACT] = self.r.rendered([self._text_block(ep.compact_text, ep.ref)])
            if ep.full_text:
                forms[Form.FULL] = self.r.rendered([self._text_block(ep.full_text, ep.ref)])
            items.append(Item(key=ep.ref, section=Section.EPISODES, priority=ep.priority,
                              reasons=ep.reasons, order=rank, position=(rank,), forms=forms,
                              refs=(ep.ref,), kind="episode"))
        return items

    def _text_block(self, text: str, ref: str) -> Block:
        body = text if text.endswith("\n") else text + "\n"
        # Keyed by the text itself: an episode recalled turn after turn is counted once.
        return self.r.memo(("text_block", ref, body),
                           lambda: Block(head=body, tokens=self.r.counter.count(body),
                                         refs=(ref,)))

    def _turn_item(self, unit: TurnUnit, section: Section, order: int,
                   position: tuple[int, ...], tier: int = 0) -> Item:
        priority, reasons = self.priority_of(unit)
        wid = unit.turn.work_item_id
        other = bool(self.work_item_id and wid and wid != self.work_item_id)
        chain = self.chain.get(unit.turn.id)
        # The previous exchange's assistant message is shown once, in the current-input section.
        elsewhere = ({self.exchange[1].ref: "shown below as the previous exchange"}
                     if self.exchange is not None and self.exchange[0] is unit else {})
        if unit.turn.id not in self.pinned:
            elsewhere.update(self.frontier.stubs(unit))
        # Forms and refs follow from these inputs alone (records never change; a turn can only
        # gain records), so the renderer's memo keeps them across the projections of a turn's
        # neighbours: most of a window is the same from one turn to the next.
        memo_key = ("turn_item", unit.ref, len(unit.records), priority, reasons, other, chain,
                    tuple(elsewhere.items()) if elsewhere else ())
        forms, refs = self.r.memo(memo_key, lambda: self._turn_forms(
            unit, priority, reasons, other, chain, elsewhere))
        return Item(key=unit.ref, section=section, priority=priority, reasons=reasons,
                    order=order, position=position, forms=forms, refs=refs,
                    chain=chain, kind="turn", tier=tier)

    def _turn_forms(self, unit: TurnUnit, priority: Priority, reasons: tuple[str, ...],
                    other: bool, chain: str | None, elsewhere: dict[str, str],
                    ) -> tuple[dict[Form, Rendered], tuple[str, ...]]:
        head = self.r.turn_head(unit, priority=priority, reasons=reasons,
                                other_work_item=other, chain=chain)
        forms = {Form.COMPACT: self.r.turn_compact(unit, head),
                 Form.FULL: self.r.turn_full(unit, head, elsewhere=elsewhere)}
        if priority is Priority.PINNED:
            forms[Form.REF] = self.r.turn_ref(unit)
            # A pinned turn's compact form keeps the operator's words verbatim: they are why
            # the turn is pinned, and a one-line excerpt can cut the constraint that matters.
            forms[Form.COMPACT] = self.r.turn_compact_verbatim(unit, head)
        refs = tuple(dict.fromkeys([unit.ref, *(r.ref for r in unit.records
                                                if r.ref not in elsewhere)]))
        return forms, refs

    def _recent_turns(self) -> list[Item]:
        """Tier 0 of the recent turns: window page 0 and the pinned turns fetched by point query."""
        return self._turn_items([*self.view.window, *self.view.extra.values()], tier=0)

    def page_items(self, index: int) -> list[Item] | None:
        """Items of window page ``index`` (tier ``index``), or None when there is no such page."""
        last = self.pages[-1]
        if last.last or self.store is None or len(self.pages) != index:
            return None
        oldest = last.units[0].turn.seq if last.units else self.view.current.turn.seq
        page = load_page(self.store, before_seq=oldest, index=index,
                         limit_pos=self.view.limit_pos, limits=self.limits, extend=_in_fold_run)
        self.pages.append(page)
        if not page.units:
            return None
        self._classify_page(page)
        for unit in reversed(page.units):
            self.tracker.feed(unit)
        fetched = self.view.extra
        self.loaded_units.extend(u for u in page.units if u.turn.id not in fetched)
        items = self._turn_items(list(page.units), tier=index)
        self.page_item_list.extend(items)
        return items

    def _turn_items(self, units: list[TurnUnit], tier: int) -> list[Item]:
        """Turn items of one tier, runs of low-value turns folded into one counted line each.

        A run never spans a turn shown elsewhere (the current turn, the anchor, a pinned turn) nor
        a page boundary, so the same run folds the same way whatever the budget.
        """
        view = self.view
        skip = {view.current.turn.id, view.anchor_id}
        if self.previous_step is not None:
            skip.add(self.previous_step.turn.id)  # shown with the current input
        if tier > 0:
            skip |= set(view.extra)
            # Page k > 0 is read only once every tier-0 item, recalled episodes included, is in
            # its full form: a turn an episode covers is shown by that episode, not twice.
            covered = self._episode_spans()
            skip |= {u.turn.id for u in units
                     if any(lo <= u.turn.seq <= hi for lo, hi in covered)}
        units = sorted(units, key=lambda u: u.turn.seq)
        # Rank: pinned first, then current-chain turns newest first, then the rest newest first.
        def rank(u: TurnUnit) -> tuple[int, int, int]:
            pinned = 0 if u.turn.id in self.pinned else 1
            in_chain = 0 if u.turn.id in self.chain else 1
            return (pinned, in_chain, -u.turn.seq)
        shown = [u for u in units if u.turn.id not in skip]
        ranks = {u.turn.id: i for i, u in enumerate(sorted(shown, key=rank))}
        items: list[Item] = []
        run: list[TurnUnit] = []

        def flush() -> None:
            if run:
                items.append(self._fold_item(run, ranks[run[-1].turn.id], tier))
                run.clear()

        for unit in units:
            if unit.turn.id in skip:
                flush()
                continue
            priority, _ = self.priority_of(unit)
            if priority >= Priority.LOW:
                run.append(unit)
                continue
            flush()
            items.append(self._turn_item(unit, Section.RECENT_TURNS, ranks[unit.turn.id],
                                         (unit.turn.seq,), tier))
        flush()
        return items

    def _episode_spans(self) -> list[tuple[int, int]]:
        """Turn sequence ranges (closed) of the recalled episodes."""
        if self._spans is None:
            self._spans = []
            for ep in self.recalled:
                ends = [self.store.turn(ref.removeprefix("turn:")) if self.store else None
                        for ref in ep.covers]
                if ends[0] is not None and ends[1] is not None:
                    self._spans.append((ends[0].turn_seq or 0, ends[1].turn_seq or 0))
        return self._spans

    def _fold_item(self, run: list[TurnUnit], order: int, tier: int) -> Item:
        kinds: Counter[str] = Counter()
        for unit in run:
            facts = self.facts.get(unit.turn.id) or turn_facts(unit)
            fact = facts[0] if facts else unit.turn.trigger
            kinds[unit.turn.trigger if fact in ("noop_tick", "provider_retry",
                                                "provider_fallback", "transport_recovery")
                  else fact] += 1
        first, last = run[0].ref, run[-1].ref
        span = first if first == last else f"{first}–{last}"
        summary = ", ".join(f"{k}×{n}" for k, n in sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0])))
        line = self.r.line(f"- folded {span}: {summary} ({len(run)} low-value turns)")
        fold = FoldManifest(first=first, last=last, count=len(run), kinds=dict(kinds),
                            refs=[u.ref for u in run])
        self.folds.append(fold)
        # A fold line is HIGH: one line of a few tokens says what a whole run was ("61 retries
        # and ticks between the request and now") and is all the model ever sees of it, so it
        # takes its place beside the other high turns' compact forms.
        return Item(key=f"fold:{first}", section=Section.RECENT_TURNS, priority=Priority.HIGH,
                    reasons=("folded_low_value",), order=order, position=(run[0].turn.seq,),
                    forms={Form.COMPACT: self.r.rendered([line])}, refs=(), kind="fold",
                    tier=tier)

    def _current_input(self) -> list[Item]:
        view = self.view
        cur = view.current
        items: list[Item] = []
        anchor_note = f" (continuation anchor: turn:{view.anchor_id})" if view.anchor_id else ""
        relation_line = self.r.line(
            f"relation: {self.relation.value} — {RELATION_TEXT[self.relation]}{anchor_note}")
        if view.anchor_id and view.anchor_id != cur.turn.id:
            anchor = view.unit(view.anchor_id)
            if anchor is not None:
                item = self._turn_item(anchor, Section.CURRENT_INPUT, -18, (0,))
                items.append(attrs.evolve(item, reasons=(*item.reasons,)))
        exchange = self._last_exchange()
        if exchange is not None:
            items.append(exchange)
        if self.previous_step is not None:
            # An agent loop's previous step is the exchange the current step continues: shown
            # here, in order, and upgraded with the current input (order -17, after the anchor).
            items.append(self._turn_item(self.previous_step, Section.CURRENT_INPUT, -17, (1, 1)))
        # Pinned upgrade order (planner rounds 0-1): governed control notices (-30), the current
        # turn (-20), the question it answers (-19), the anchor (-18), the work item (-10), then
        # pinned recent turns and pins (their section ranks).
        cur_item = self._turn_item(cur, Section.CURRENT_INPUT, -20, (2,))
        forms = {f: Rendered(blocks=(relation_line, *r.blocks), tokens=r.tokens + relation_line.tokens,
                             refs=r.refs)
                 for f, r in cur_item.forms.items()}
        items.append(attrs.evolve(cur_item, forms=forms))
        return items

    def _find_exchange(self) -> tuple[TurnUnit, StoredRecord] | None:
        """When the operator speaks, the assistant message just before it (newest 3 turns)."""
        cur = self.view.current
        if not any(isinstance(r.record, Message) and r.record.role is MessageRole.OPERATOR
                   for r in cur.records):
            return None
        prev = [u for u in self.view.window if u.turn.id != self.view.anchor_id]
        for unit in reversed(prev[-3:]):
            for stored in reversed(unit.records):
                rec = stored.record
                if isinstance(rec, Message) and rec.role is MessageRole.ASSISTANT:
                    return unit, stored
        return None

    def _last_exchange(self) -> Item | None:
        """The exchange keeps role and order, so a short reply keeps the question it answers."""
        if self.exchange is None:
            return None
        unit, stored = self.exchange
        block = self.r.fenced(stored, f"previous exchange — the assistant asked "
                              f"(turn:{unit.turn.id}):", 600)
        ref_form = self.r.line(f"previous exchange: {stored.ref} (turn:{unit.turn.id})",
                               [stored.ref])
        return Item(key=f"exchange:{stored.ref}", section=Section.CURRENT_INPUT,
                    priority=Priority.PINNED, reasons=("last_exchange",), order=-19,
                    position=(1,),
                    forms={Form.REF: self.r.rendered([ref_form]),
                           Form.FULL: self.r.rendered([block])},
                    refs=(stored.ref,), kind="exchange")

    # -- clipping --------------------------------------------------------------------------
    def clip(self, rendered: Rendered, limit: int) -> Rendered | None:
        """The longest prefix of the blocks that fits ``limit``, the first misfit block clipped.

        A misfit fenced or trusted block keeps its label and fence and loses the end of its body
        (marked "…"); when even that does not fit, its label line alone is cut short with "…" (a
        fence is never opened without being closed). A note naming the full text's ref follows,
        in the longest wording that fits. Of these candidates the one that uses the most tokens
        wins. Refs of a block count as shown when any of it is, so every candidate shows the same
        refs and a larger ``limit`` never shows fewer.
        """
        out: list[Block] = []
        used = 0
        first_ref = rendered.refs[0] if rendered.refs else "the ledger"
        notes = [self.r.line(text) for text in (
            f"[clipped to fit the budget; full text: {first_ref}]",
            f"[clipped; full text: {first_ref}]", "[clipped]")]
        for block in rendered.blocks:
            if used + block.tokens <= limit:
                out.append(block)
                used += block.tokens
                continue
            best: tuple[Block, ...] = ()
            best_tokens = 0
            room = limit - used
            for note in (*notes, None):
                cost = note.tokens if note is not None else 0
                for part in self._clip_block(block, room - cost):
                    total = part.tokens + cost
                    if best_tokens < total <= room:
                        best = (part,) if note is None else (part, note)
                        best_tokens = total
            if not best and out and notes[0].tokens <= room:
                best, best_tokens = (notes[0],), notes[0].tokens
            out.extend(best)
            used += best_tokens
            break
        if not out or used > limit:
            return None
        result = self.r.rendered(out)
        return attrs.evolve(result, clipped=True)

    def _clip_block(self, block: Block, room: int) -> list[Block]:
        """Ways to cut ``block`` to at most ``room`` tokens: body clipped, label cut short."""
        counter = self.r.counter
        if room < 3:
            return []
        parts: list[Block] = []
        if block.clippable and block.body:
            fixed = counter.count(block.head) + counter.count(block.tail)
            body = _clip_text(counter, block.body, room - fixed)
            if body:
                parts.append(attrs.evolve(block, body=body, tokens=fixed + counter.count(body)))
        label = block.head.split("\n", 1)[0]
        line = _clip_line(counter, label, room)
        if line is not None:
            parts.append(Block(head=line, tokens=counter.count(line), refs=block.refs))
        return parts


def _clip_line(counter: TokenCounter, label: str, max_tokens: int) -> str | None:
    """``label`` cut short to a block-safe line ending in "…" within ``max_tokens`` tokens."""
    tokens = counter.encode(label)
    keep = min(len(tokens), max_tokens - 1)
    while keep > 0:
        text = counter.decode(tokens[:keep]).rstrip()
        if text and "\ufffd" not in text[-2:]:
            line = f"{text}…\n"
            if counter.count(line) <= max_tokens:
                return line
        keep -= 1
    return None


def _clip_text(counter: TokenCounter, body: str, max_tokens: int) -> str:
    """The longest block-safe prefix of ``body``, ending in "…", within ``max_tokens`` ("" if none).

    ``body`` is already fence-safe; a prefix of it is re-neutralised anyway, and the search
    steps down by the overshoot, so it ends within a token or two of the limit.
    """
    from holon_ctx.ledger.body import block_safe, neutralise_fences  # noqa: PLC0415

    if max_tokens < 2:
        return ""
    tokens = counter.encode(body)
    keep = min(len(tokens), max_tokens - 1)
    while keep > 0:
        text = counter.decode(tokens[:keep])
        if "\ufffd" not in text[-2:]:
            clipped = block_safe(neutralise_fences(text))
            if clipped:
                clipped = clipped[:-1] + "…\n"
                over = counter.count(clipped) - max_tokens
                if over <= 0:
                    return clipped
                keep -= over
                continue
        keep -= 1
    return ""


def _assemble(view: View, builder: _Builder, items: list[Item], chosen: Plan,
              budget_tokens: int, counter: TokenCounter) -> Projection:
    by_section: dict[Section, list[Item]] = {s: [] for s in Section}
    for item in items:
        by_section[item.section].append(item)
    parts: list[str] = []
    section_text: dict[Section, str] = {}
    chosen_items: dict[Section, list[tuple[str, Rendered]]] = {s: [] for s in Section}
    sections: list[SectionManifest] = []
    decisions: list[ItemDecision] = []
    seen: set[str] = set()
    for section in SECTION_ORDER:
        sec_items = sorted(by_section[section], key=lambda it: it.position)
        selected: list[str] = []
        omitted: list[dict[str, str]] = []
        forms_used: set[str] = set()
        body: list[str] = []
        used = 0
        manifest_items: list[dict[str, object]] = []
        for item in sec_items:
            pick = chosen.chosen.get(item.key)
            full = item.forms[max(item.forms)]
            if pick is None:
                if item.refs:
                    omitted.append({"ref": item.refs[0], "reason": Omission.BUDGET.value})
                decisions.append(_decision(item, None, None, chosen.omitted.get(item.key),
                                           full.tokens))
                manifest_items.append({"key": item.key, "form": "omitted",
                                       "priority": item.priority.label, "tokens": 0})
                continue
            form, rendered = pick
            chosen_items[section].append((item.key, rendered))
            forms_used.add("clipped" if rendered.clipped else form.label)
            body.append(rendered.text)
            used += rendered.tokens
            for ref in rendered.refs:
                if ref not in seen:
                    seen.add(ref)
                    selected.append(ref)
            shown = set(rendered.refs)
            missing = [ref for ref in item.refs if ref not in shown]
            if missing:
                dropped_reason = (Omission.CLIPPED if rendered.clipped else
                                  Omission.COMPACTED if form is Form.COMPACT else Omission.REF_ONLY)
                omitted.extend({"ref": ref, "reason": dropped_reason.value} for ref in missing)
            decisions.append(_decision(item, form, rendered, chosen.upgrade_at.get(item.key),
                                       full.tokens))
            manifest_items.append({"key": item.key, "form": form.label if not rendered.clipped
                                   else "clipped", "priority": item.priority.label,
                                   "reasons": list(item.reasons), "tokens": rendered.tokens,
                                   "full_tokens": full.tokens})
            del full
        if body:
            title = SECTION_TITLES[section] + "\n"
            text = title + "".join(body)
            used += chosen.header_tokens[section]
            parts.append(text)
            section_text[section] = text
        representation = ("empty" if not forms_used else
                          next(iter(forms_used)) if len(forms_used) == 1 else "mixed")
        sections.append(SectionManifest(
            name=section.value, representation=representation,
            allocated_tokens=chosen.allocated.get(section, 0), used_tokens=used,
            selected=selected, omitted=omitted, items=manifest_items))
    # Folded refs and repeated tool calls are reported once, in `folded`.
    folds = list(builder.folds)
    memo = builder.r.memo
    for unit in builder.loaded_units:
        repeats = memo(("tool_repeats", unit.ref, len(unit.records)),
                       lambda u=unit: tool_repeats(u.records))  # type: ignore[misc]
        for last, earlier in repeats.items():
            if last in seen:
                folds.append(FoldManifest(first=earlier[0], last=last, count=len(earlier) + 1,
                                          kinds={"repeated_tool_call": len(earlier) + 1},
                                          refs=[*earlier, last]))
    # Earlier identical tool runs folded into a later run in another turn (_Frontier.superseded).
    for last, earlier in builder.frontier.reruns().items():
        if last in seen:
            folds.append(FoldManifest(first=earlier[0], last=last, count=len(earlier) + 1,
                                      kinds={"repeated_tool_call": len(earlier) + 1},
                                      refs=[*earlier, last]))
    # A fold is reported when its counted line is in the prompt whole (a clipped line is not).
    shown_folds = [f for f in folds if "repeated_tool_call" in f.kinds or (
        f"fold:{f.first}" in chosen.chosen and not chosen.chosen[f"fold:{f.first}"][1].clipped)]
    text = "".join(parts)
    section_items = {s: tuple(pairs) for s, pairs in chosen_items.items() if pairs}
    cur = view.current.turn
    manifest = Manifest(
        budget_tokens=budget_tokens, used_tokens=chosen.used_tokens, counter=counter.identity,
        current_turn=view.current.ref, relation=builder.relation.value,
        anchor_turn=f"turn:{view.anchor_id}" if view.anchor_id else None,
        sections=sections, folded=shown_folds,
        episodes=[EpisodeManifest(ref=ep.ref, covers=list(ep.covers), score=round(ep.score, 4),
                                  representation=(chosen.chosen[ep.ref][0].label
                                                  if ep.ref in chosen.chosen else "omitted"))
                  for ep in builder.recalled],
        text=text,
        window=_window_info(view, builder),
    )
    return Projection(text=text, budget_tokens=budget_tokens, used_tokens=chosen.used_tokens,
                      counter=counter.identity, current_turn=f"turn:{cur.id}",
                      relation=builder.relation, anchor_turn=manifest.anchor_turn,
                      decisions=tuple(decisions), folds=tuple(shown_folds), manifest=manifest,
                      section_text=section_text, section_items=section_items)


def _window_info(view: View, builder: _Builder) -> dict[str, object]:
    """How deep the window was read: turns in the pages read, the oldest, whether it is the start."""
    pages = [p for p in builder.pages if p.units]
    return {"turns": sum(len(p.units) for p in pages),
            "reached_start": builder.pages[-1].reached_start,
            "first": pages[-1].units[0].ref if pages else view.current.ref,
            "limit_pos": view.limit_pos,
            "pages": len(pages)}


#: The execution frontier reads the current work item's turns older than page 0 in one bounded
#: query when the work item began at most this many turns before it; otherwise it covers the
#: turns in view and says from where (cost stays O(page + this), never O(history)).
FRONTIER_SCAN_TURNS = 128
#: File names the frontier's minimal (pinned) form lists; the full form lists every file.
FRONTIER_REF_FILES = 24
_RAN_FAILED = (ToolStatus.ERROR, ToolStatus.TIMEOUT)


def _run_key(rec: Tool) -> tuple[str, str]:
    return rec.tool_name, rec.args_digest or rec.args_preview


@attrs.frozen
class _Frontier:
    """Tool runs of the current work item (or of the turns in view), oldest first.

    Budget-independent by construction: it reads page 0, the point-query turns and at most one
    bounded query, never a page the planner loads on demand.
    """

    runs: tuple[StoredRecord, ...]
    complete: bool
    since: str | None
    #: Earlier run ref → the latest identical run (same tool and arguments) in another turn.
    superseded: dict[str, str]

    def reruns(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for ref, last in self.superseded.items():
            out.setdefault(last, []).append(ref)
        return out

    def stubs(self, unit: TurnUnit) -> dict[str, str]:
        """One line for each run of ``unit`` that a later identical run supersedes."""
        out: dict[str, str] = {}
        for stored in unit.records:
            rec = stored.record
            later = self.superseded.get(stored.ref)
            if later is None or not isinstance(rec, Tool):
                continue
            exit_part = f" exit {rec.exit_code}" if rec.exit_code is not None else ""
            files = (f"; wrote {', '.join(one_line(f, 80) for f in rec.files_written[:6])}"
                     if rec.files_written else "")
            out[stored.ref] = (f"{one_line(rec.tool_name, 40)} `{one_line(rec.args_preview, 100)}`"
                               f" → {rec.status.value}{exit_part}{files}; output folded: "
                               f"identical command re-run as {later}")
        return out

    def item(self, r: Renderer, wid: str) -> Item | None:
        """The pinned work-refs line: runs, failures, repeats, pending; every file written."""
        if not self.runs:
            return None
        done = [s.record for s in self.runs
                if isinstance(s.record, Tool) and s.record.status is not ToolStatus.PENDING]
        failed = sum(1 for t in done if t.status in _RAN_FAILED or t.exit_code not in (None, 0))
        repeated = len(done) - len({_run_key(t) for t in done})
        pending = len(self.runs) - len(done)
        files: dict[str, list[str]] = {}
        for stored in self.runs:
            assert isinstance(stored.record, Tool)
            for path in stored.record.files_written:
                files.setdefault(path, []).append(stored.ref)
        cover = "" if self.complete else (
            f"; counts cover {self.since or 'the turns in view'} onward (the work item began more "
            f"than {FRONTIER_SCAN_TURNS} turns before the recent window)")
        head = r.line(f"execution frontier for {wid}: {len(done)} tool runs ({failed} failed, "
                      f"{repeated} repeats of an earlier identical run, folded"
                      + (f", {pending} pending" if pending else "")
                      + f"); {len(files)} files modified{cover}")
        # The minimal form names the files too (the artifact trail is what a step must not lose);
        # the full form adds who wrote each last and how often.
        names = [one_line(path, 120) for path in files]
        named = [r.line("files modified: " + ", ".join(names[:FRONTIER_REF_FILES])
                        + (f", … {len(names) - FRONTIER_REF_FILES} more" if len(names)
                           > FRONTIER_REF_FILES else ""))] if names else []
        lines = [head]
        if files:
            lines.append(r.line("files modified:"))
            lines.extend(r.line(f"- {one_line(path, 160)} (last written by {refs[-1]}"
                                + (f", {len(refs)} writes)" if len(refs) > 1 else ")"))
                         for path, refs in files.items())
        forms = {Form.REF: r.rendered([head, *named]), Form.FULL: r.rendered(lines)}
        return Item(key="work_refs:frontier", section=Section.WORK_REFS,
                    priority=Priority.PINNED, reasons=("execution_frontier",), order=0,
                    position=(-1,), forms=forms, refs=(), kind="work_refs")


def _frontier(store: LedgerStore | None, view: View, units: list[TurnUnit],
              wid: str | None) -> _Frontier:
    """The tool runs of work item ``wid`` (see :data:`FRONTIER_SCAN_TURNS`)."""
    scope = [u for u in units if not wid or u.turn.work_item_id in (wid, None)]
    runs: dict[str, StoredRecord] = {r.ref: r for u in scope for r in u.records
                                     if isinstance(r.record, Tool)}
    complete = view.first_page.reached_start
    oldest = min((u.turn.seq for u in view.window), default=view.current.turn.seq)
    first = store.get(view.work_item.first_ref) if (
        store is not None and view.work_item is not None and not complete) else None
    if store is not None and first is not None and first.turn_seq is not None:
        if first.turn_seq >= oldest:
            complete = True
        else:
            turns = store.turns_before(oldest, FRONTIER_SCAN_TURNS + 1, view.limit_pos)
            if len(turns) <= FRONTIER_SCAN_TURNS or min(
                    t.turn_seq or 0 for t in turns) <= first.turn_seq:
                keep = {t.turn_seq for t in turns if (t.turn_seq or 0) >= first.turn_seq
                        and getattr(t.record, "work_item_id", None) in (wid, None)}
                for older in store.records_of_turns(first.turn_seq, oldest - 1, view.limit_pos):
                    if isinstance(older.record, Tool) and older.turn_seq in keep:
                        runs.setdefault(older.ref, older)
                complete = True
    ordered = tuple(sorted(runs.values(), key=lambda r: r.pos))
    latest: dict[tuple[str, str], StoredRecord] = {}
    for stored in ordered:
        if isinstance(stored.record, Tool) and stored.record.status is not ToolStatus.PENDING:
            latest[_run_key(stored.record)] = stored
    superseded: dict[str, str] = {}
    for stored in ordered:
        rec = stored.record
        if not isinstance(rec, Tool) or rec.status is ToolStatus.PENDING:
            continue
        last = latest[_run_key(rec)]
        if last.ref != stored.ref and getattr(last.record, "turn_id", None) != rec.turn_id:
            superseded[stored.ref] = last.ref
    since = None if complete else (scope[0].ref if scope else None)
    return _Frontier(runs=ordered, complete=complete, since=since, superseded=superseded)


def _decision(item: Item, form: Form | None, rendered: Rendered | None,
              next_budget: int | None, full_tokens: int) -> ItemDecision:
    return ItemDecision(key=item.key, section=item.section, priority=item.priority,
                        reasons=item.reasons, chain=item.chain, refs=item.refs, form=form,
                        clipped=bool(rendered and rendered.clipped),
                        tokens=rendered.tokens if rendered else 0, full_tokens=full_tokens,
                        next_budget=next_budget, kind=item.kind)

