"""The orchestrator: one call per model turn, from a store to a Projection. It never writes.

    view      = load_view(store, budget, at)            bounded, indexed reads
    relation  = current_relation(view.current)           why this turn exists
    chain     = current_chain(...)                       which turns continue with it
    priority  = classify(turn_facts(...)) + pinned       retention class with reason codes
    items     = sections → items with REF/COMPACT/FULL forms (runs of low turns fold into one)
    plan      = planner.plan(items, budget)              prefix of a budget-independent order
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
    Trust,
)
from holon_ctx.ledger.store import LedgerStore, StoredRecord
from holon_ctx.projection.chains import current_chain
from holon_ctx.projection.model import (
    SECTION_ORDER,
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
from holon_ctx.projection.view import View, WindowLimits, load_view
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
                 episodes: EpisodeSource | None = None) -> None:
        self.store = store
        self.episodes = episodes
        self.counter = counter or default_counter()
        self.limits = limits or WindowLimits()
        self.renderer = Renderer(self.counter, store.counter_identity)

    def project(self, *, budget_tokens: int, at: str | None = None,
                verify: bool = False) -> Projection:
        if budget_tokens <= 0:
            raise HolonCtxError(f"budget must be a positive number of tokens, got {budget_tokens}")
        view = load_view(self.store, budget_tokens=budget_tokens, at=at, limits=self.limits)
        builder = _Builder(view, self.renderer, self.episodes)
        items = builder.items()
        headers = {s: self.counter.count(SECTION_TITLES[s] + "\n") for s in Section}
        chosen = plan(items, budget_tokens=budget_tokens, header_tokens=headers,
                      fixed_tokens=0, clip=builder.clip)
        projection = _assemble(view, builder, items, chosen, budget_tokens, self.counter)
        if verify:
            actual = self.counter.count(projection.text)
            if actual != projection.used_tokens:
                raise HolonCtxError(
                    f"internal: planned {projection.used_tokens} tokens, text has {actual}")
        return projection


class _Builder:
    """Turns a view into items. Holds the per-turn classification for explain and the manifest."""

    def __init__(self, view: View, renderer: Renderer,
                 episodes: EpisodeSource | None = None) -> None:
        self.view = view
        self.r = renderer
        self.episode_source = episodes
        self.recalled: list[RecalledEpisode] = []
        cur = view.current
        self.relation = current_relation(cur)
        self.work_item_id = view.work_item.work_item_id if view.work_item else (
            cur.turn.work_item_id)
        extras = sorted(view.extra.values(), key=lambda u: u.turn.seq)
        self.all_units = sorted([*view.window, *extras, cur], key=lambda u: u.turn.seq)
        self.chain = current_chain(cur, self.all_units, self.work_item_id)
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
        prev: TurnUnit | None = None
        for unit in view.window:
            self.facts[unit.turn.id] = turn_facts(unit, prev)
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
        if tid in self.pinned:
            return Priority.PINNED, tuple(self.pinned[tid])
        facts = self.facts.get(tid) or turn_facts(unit)
        return classify(facts), tuple(facts)

    # -- items ---------------------------------------------------------------------------
    def items(self) -> list[Item]:
        items: list[Item] = []
        items.extend(self._environment())
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
        if rec.guidance.strip():
            full.append(self.r.trusted(env, "guidance (runtime configuration):", 1500))
        return [Item(key=env.ref, section=Section.ENVIRONMENT, priority=Priority.HIGH,
                     reasons=("environment",), order=0, position=(0,),
                     forms={Form.COMPACT: self.r.rendered(compact),
                            Form.FULL: self.r.rendered(full)},
                     refs=(env.ref,), kind="environment")]

    def _work_item(self) -> list[Item]:
        state = self.view.work_item
        if state is None:
            return []
        waits = [w for w in self.view.open_waits
                 if w.work_item_id in (None, state.work_item_id)]
        forms = self.r.work_item(state, waits)
        return [Item(key=f"work_item_state:{state.work_item_id}", section=Section.WORK_ITEM,
                     priority=Priority.PINNED, reasons=("current_work_item",), order=0,
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
        if isinstance(trec, Message) and trec.role is MessageRole.OPERATOR:
            body = self.r.trusted(target, "pinned operator words:", 800)
        elif trec.trust is Trust.TRUSTED_OPERATOR or trec.trust is Trust.RUNTIME_FACT:
            body = self.r.trusted(target, "pinned record:", 800)
        else:
            body = self.r.fenced(target, "pinned record (untrusted):", 800)
        body = attrs.evolve(body, refs=())  # the target is mentioned, not selected, here
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
        return Block(head=body, tokens=self.r.counter.count(body), refs=(ref,))

    def _turn_item(self, unit: TurnUnit, section: Section, order: int,
                   position: tuple[int, ...]) -> Item:
        priority, reasons = self.priority_of(unit)
        wid = unit.turn.work_item_id
        other = bool(self.work_item_id and wid and wid != self.work_item_id)
        chain = self.chain.get(unit.turn.id)
        head = self.r.turn_head(unit, priority=priority, reasons=reasons,
                                other_work_item=other, chain=chain)
        forms = {Form.COMPACT: self.r.turn_compact(unit, head),
                 Form.FULL: self.r.turn_full(unit, head)}
        if priority is Priority.PINNED:
            forms[Form.REF] = self.r.turn_ref(unit)
        refs = tuple(dict.fromkeys([unit.ref, *(r.ref for r in unit.records)]))
        return Item(key=unit.ref, section=section, priority=priority, reasons=reasons,
                    order=order, position=position, forms=forms, refs=refs,
                    chain=chain, kind="turn")

    def _recent_turns(self) -> list[Item]:
        view = self.view
        skip = {view.current.turn.id, view.anchor_id}
        units = [u for u in self.all_units if u.turn.id not in skip]
        # Rank: pinned first, then current-chain turns newest first, then the rest newest first.
        def rank(u: TurnUnit) -> tuple[int, int, int]:
            pinned = 0 if u.turn.id in self.pinned else 1
            in_chain = 0 if u.turn.id in self.chain else 1
            return (pinned, in_chain, -u.turn.seq)
        ranks = {u.turn.id: i for i, u in enumerate(sorted(units, key=rank))}
        items: list[Item] = []
        run: list[TurnUnit] = []

        def flush() -> None:
            if run:
                items.append(self._fold_item(run, ranks[run[-1].turn.id]))
                run.clear()

        for unit in units:
            priority, _ = self.priority_of(unit)
            if priority >= Priority.LOW:
                run.append(unit)
                continue
            flush()
            items.append(self._turn_item(unit, Section.RECENT_TURNS, ranks[unit.turn.id],
                                         (unit.turn.seq,)))
        flush()
        return items

    def _fold_item(self, run: list[TurnUnit], order: int) -> Item:
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
        return Item(key=f"fold:{first}", section=Section.RECENT_TURNS, priority=Priority.NORMAL,
                    reasons=("folded_low_value",), order=order, position=(run[0].turn.seq,),
                    forms={Form.COMPACT: self.r.rendered([line])}, refs=(), kind="fold")

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
                item = self._turn_item(anchor, Section.CURRENT_INPUT, 0, (0,))
                items.append(attrs.evolve(item, reasons=(*item.reasons,)))
        exchange = self._last_exchange()
        if exchange is not None:
            items.append(exchange)
        cur_item = self._turn_item(cur, Section.CURRENT_INPUT, 0, (2,))
        forms = {f: Rendered(blocks=(relation_line, *r.blocks), tokens=r.tokens + relation_line.tokens,
                             refs=r.refs)
                 for f, r in cur_item.forms.items()}
        items.append(attrs.evolve(cur_item, forms=forms))
        return items

    def _last_exchange(self) -> Item | None:
        """When the operator speaks, the assistant message just before keeps its place."""
        cur = self.view.current
        if not any(isinstance(r.record, Message) and r.record.role is MessageRole.OPERATOR
                   for r in cur.records):
            return None
        prev = [u for u in self.view.window if u.turn.id != self.view.anchor_id]
        for unit in reversed(prev[-3:]):
            for stored in reversed(unit.records):
                rec = stored.record
                if isinstance(rec, Message) and rec.role is MessageRole.ASSISTANT:
                    block = self.r.fenced(stored, f"previous exchange — the assistant asked "
                                          f"(turn:{unit.turn.id}):", 600)
                    ref_form = self.r.line(f"previous exchange: {stored.ref} (turn:{unit.turn.id})",
                                           [stored.ref])
                    return Item(key=f"exchange:{stored.ref}", section=Section.CURRENT_INPUT,
                                priority=Priority.PINNED, reasons=("last_exchange",), order=1,
                                position=(1,),
                                forms={Form.REF: self.r.rendered([ref_form]),
                                       Form.FULL: self.r.rendered([block])},
                                refs=(stored.ref,), kind="exchange")
        return None

    # -- clipping --------------------------------------------------------------------------
    def clip(self, rendered: Rendered, limit: int) -> Rendered | None:
        """The longest prefix of the blocks that fits ``limit``, the first misfit body clipped."""
        out: list[Block] = []
        used = 0
        counter = self.r.counter
        first_ref = rendered.refs[0] if rendered.refs else "the ledger"
        for block in rendered.blocks:
            if used + block.tokens <= limit:
                out.append(block)
                used += block.tokens
                continue
            note = self.r.line(f"[clipped to fit the budget; full text: {first_ref}]")
            room = limit - used - note.tokens
            if block.clippable and block.body:
                fixed = counter.count(block.head) + counter.count(block.tail)
                body_room = room - fixed
                if body_room >= 8:
                    body = _clip_text(counter, block.body, body_room)
                    if body:
                        tokens = fixed + counter.count(body)
                        if tokens <= room:
                            out.append(attrs.evolve(block, body=body, tokens=tokens))
                            used += tokens
            if room >= 0 and out:
                out.append(note)
                used += note.tokens
            break
        if not out or used > limit:
            return None
        result = self.r.rendered(out)
        return attrs.evolve(result, clipped=True)


def _clip_text(counter: TokenCounter, body: str, max_tokens: int) -> str:
    from holon_ctx.ledger.body import block_safe, neutralise_fences  # noqa: PLC0415

    tokens = counter.encode(body)
    keep = max_tokens
    while keep > 0:
        text = counter.decode(tokens[:keep])
        if "\ufffd" not in text[-2:]:
            clipped = block_safe(neutralise_fences(text))
            if clipped and counter.count(clipped) <= max_tokens:
                return clipped
        keep -= 1 if keep < 8 else keep // 8
    return ""


def _assemble(view: View, builder: _Builder, items: list[Item], chosen: Plan,
              budget_tokens: int, counter: TokenCounter) -> Projection:
    by_section: dict[Section, list[Item]] = {s: [] for s in Section}
    for item in items:
        by_section[item.section].append(item)
    parts: list[str] = []
    section_text: dict[Section, str] = {}
    section_items: dict[Section, tuple[tuple[str, Rendered], ...]] = {}
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
                omitted.extend({"ref": ref, "reason": Omission.BUDGET.value}
                               for ref in item.refs[:1])
                decisions.append(_decision(item, None, None, chosen.omitted.get(item.key)))
                manifest_items.append({"key": item.key, "form": "omitted",
                                       "priority": item.priority.label, "tokens": 0})
                continue
            form, rendered = pick
            section_items[section] = (*section_items.get(section, ()), (item.key, rendered))
            forms_used.add("clipped" if rendered.clipped else form.label)
            body.append(rendered.text)
            used += rendered.tokens
            for ref in rendered.refs:
                if ref not in seen:
                    seen.add(ref)
                    selected.append(ref)
            dropped_reason = (Omission.CLIPPED if rendered.clipped else
                              Omission.COMPACTED if form is Form.COMPACT else Omission.REF_ONLY)
            omitted.extend({"ref": ref, "reason": dropped_reason.value}
                           for ref in item.refs if ref not in rendered.refs)
            decisions.append(_decision(item, form, rendered, chosen.upgrade_at.get(item.key)))
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
    for unit in builder.all_units:
        for last, earlier in tool_repeats(unit.records).items():
            if last in seen:
                folds.append(FoldManifest(first=earlier[0], last=last, count=len(earlier) + 1,
                                          kinds={"repeated_tool_call": len(earlier) + 1},
                                          refs=[*earlier, last]))
    shown_folds = [f for f in folds if f"fold:{f.first}" in chosen.chosen
                   or "repeated_tool_call" in f.kinds]
    text = "".join(parts)
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
        window={"turns": len(view.window), "reached_start": view.reached_start,
                "first": view.window[0].ref if view.window else view.current.ref,
                "limit_pos": view.limit_pos},
    )
    return Projection(text=text, budget_tokens=budget_tokens, used_tokens=chosen.used_tokens,
                      counter=counter.identity, current_turn=f"turn:{cur.id}",
                      relation=builder.relation, anchor_turn=manifest.anchor_turn,
                      decisions=tuple(decisions), folds=tuple(shown_folds), manifest=manifest,
                      section_text=section_text, section_items=section_items)


def _decision(item: Item, form: Form | None, rendered: Rendered | None,
              next_budget: int | None) -> ItemDecision:
    full = item.forms[max(item.forms)]
    return ItemDecision(key=item.key, section=item.section, priority=item.priority,
                        reasons=item.reasons, chain=item.chain, refs=item.refs, form=form,
                        clipped=bool(rendered and rendered.clipped),
                        tokens=rendered.tokens if rendered else 0, full_tokens=full.tokens,
                        next_budget=next_budget, kind=item.kind)

