"""Items of every section but the recent turns, in the order the prompt shows the sections.

    environment     the stable prefix: workspace, capabilities, runtime guidance (pinned)
    work item       governed control notices (pinned, RFC 0004), the current work item (pinned)
    work refs       execution frontier (pinned), files, tasks, tools, open waits, operator pins
    episodes        recalled episode memory, ranked by recall
    current input   the continuation anchor, the previous exchange, an agent loop's previous
                    step, and the current turn with its relation line (all pinned)

Each function takes the call's :class:`~holon_ctx.projection.planning.context.Context` and returns items;
fixed items take their order and position from :data:`~holon_ctx.projection.planning.pins.SLOTS`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Final

import attrs

from holon_ctx.ledger.records import Environment, Message, Pin, TaskResult, Tool, Trust, Turn
from holon_ctx.ledger.store import StoredRecord
from holon_ctx.projection.base.formats import RELATION_PREFIX, label_value
from holon_ctx.projection.base.items import Block, Item, Mark, Rendered
from holon_ctx.projection.base.model import (
    ControlState,
    EpisodeSource,
    Form,
    Priority,
    RecalledEpisode,
    RecallQuery,
    Section,
)
from holon_ctx.projection.base.questions import asks_question
from holon_ctx.projection.base.relation import RELATION_TEXT
from holon_ctx.projection.planning.context import Context
from holon_ctx.projection.planning.pins import SLOTS
from holon_ctx.projection.planning.turns import ChainOf, TurnItems
from holon_ctx.projection.rendering.episode_forms import episode_forms
from holon_ctx.projection.rendering.render import Renderer

__all__ = ["control", "control_blocks", "control_notices", "current_input", "environment",
           "episodes", "exchange_item", "held_words", "work_item", "work_refs"]


def environment_blocks(env: StoredRecord, r: Renderer) -> tuple[list[Block], list[Block], bool]:
    """An environment record's compact and full blocks, and whether the runtime vouches for its
    guidance (the replay's baselines send the same environment: docs/session.md)."""
    rec = env.record
    assert isinstance(rec, Environment)
    chars = r.policy.text
    caps = ", ".join(label_value(c, chars.tool_name, marked=True) for c in rec.capabilities) or "none stated"
    compact = [r.line(f"workspace: {label_value(rec.workspace, chars.workspace, marked=True)} ({env.ref})",
                      [env.ref]),
               r.line(f"capabilities: {caps}")]
    full = list(compact)
    # Guidance is configuration only when the runtime (or operator) vouches for it; an
    # environment record that claims less is data, fenced, and kept out of a system role.
    vouched = rec.trust in (Trust.RUNTIME_FACT, Trust.TRUSTED_OPERATOR)
    cap = r.policy.caps.guidance
    if rec.guidance.strip():
        full.append(r.trusted(env, "guidance (runtime configuration):", cap) if vouched
                    else r.fenced(env, "guidance (untrusted, not configuration):", cap))
    return compact, full, vouched


def environment(ctx: Context, r: Renderer) -> list[Item]:
    env = ctx.view.environment
    if env is None:
        return []
    compact, full, vouched = environment_blocks(env, r)
    forms = {Form.COMPACT: r.rendered(compact), Form.FULL: r.rendered(full)}
    reasons = ("environment",) if vouched else ("environment", "untrusted")
    # The stable prefix must not move with the rest of the prompt, or a provider's cache of
    # it misses (docs/providers.md). It is pinned: its compact form is part of the pinned
    # minimum and its full form is among the first upgrades, so at any budget that holds the
    # pinned minimum and the guidance it is whole, whatever the other content. Choosing its
    # form from the budget alone (a share of it) was tried and broke budget monotonicity:
    # where the share admits the guidance, everything after it shrinks by its size, and a
    # budget one token larger lost turns a smaller one had (RFC 0002, "environment").
    slot = SLOTS["environment"]
    return [Item(key=env.ref, section=Section.ENVIRONMENT, priority=Priority.PINNED,
                 reasons=(*reasons, "stable_prefix"), order=slot.order, position=slot.position,
                 forms=forms, refs=(env.ref,), kind="environment")]


def control(ctx: Context, r: Renderer) -> list[Item]:
    """Governed control state, pinned ahead of the work item (RFC 0004)."""
    state = ctx.control
    if state is None:
        return []
    keys = {"blocked_on_reconciliation": "control:blocking",
            "settled_side_effect": "control:blocking",
            "pending_obligation": "control:obligations",
            "settled_obligation": "control:obligations", "exact_constraint": "control:constraints"}
    return [_control_item(r, keys[reason], lines, (reason,))
            for reason, lines in control_notices(r, state, _held_whole(ctx, state))]


def _held_whole(ctx: Context, state: ControlState) -> dict[str, str]:
    """Constraint ref → the operator's words, for each constraint stating words a pinned turn
    of this prompt quotes whole in every form: an operator message of one line within the
    compact quote's length. The notice names them instead of repeating the words (no record's
    text twice, issue 12 item 10); a longer one is repeated, since a compact turn would cut it."""
    units = (ctx.view.unit(tid) for tid in ctx.pinned)
    return held_words(state, (s for u in units if u is not None for s in u.records),
                      ctx.policy.text.operator_excerpt)


def held_words(state: ControlState, shown: Iterable[StoredRecord], limit: int) -> dict[str, str]:
    """Constraint ref → the operator's words, for each record of ``shown`` (records of turns
    whose operator words the prompt shows) that a constraint states and that any form of its
    turn quotes whole: one line within ``limit`` characters (the compact quote)."""
    wanted = dict(state.constraints)
    held: dict[str, str] = {}
    for stored in shown:
        rec = stored.record
        text = wanted.get(stored.ref)
        if text is not None and isinstance(rec, Message) and rec.by_operator \
                and text.endswith(rec.text) and "\n" not in rec.text.strip() \
                and len(rec.text.strip()) <= limit:
            held[stored.ref] = rec.text
    return held


def _constraint_line(ref: str, text: str, held: Mapping[str, str], limit: int) -> str:
    """One constraint of the notice: its text, or, when a pinned turn shows its words, the pin's
    note (the text before ``" — "`` and the words, compaction's form) and where the words are."""
    words = held.get(ref)
    if words is None:
        return f"- {ref}: {label_value(text, limit)}"
    note = text.removesuffix(words).rstrip().removesuffix("—").rstrip()
    lead = f"{label_value(note, limit)} — " if note else ""
    return f"- {ref}: {lead}its words are shown with its turn in this prompt"


def control_blocks(r: Renderer, state: ControlState, held: Mapping[str, str] | None = None,
                   ) -> list[list[Block]]:
    """The governed control notices as lines, blocking side effects first (also the session
    projection's tail; ``held`` as in :func:`control_notices`)."""
    return [lines for _, lines in control_notices(r, state, held)]


#: Items a governed notice lists (obligations, blocking side effects, constraints); the rest are
#: counted on one line naming where they are all held. Each is stated in every request, so a
#: runtime with hundreds of open waits would otherwise spend its budget on this one notice.
GOVERNED_ITEMS: Final = 10


def _bounded(r: Renderer, lines: list[Block], total: int, what: str,
             source: str) -> list[Block]:
    """A notice's heading and item lines (at most :data:`GOVERNED_ITEMS` of ``total`` items),
    with one line counting the rest and naming where the governed store holds them all."""
    if total > GOVERNED_ITEMS:
        lines.append(r.line(f"- and {total - GOVERNED_ITEMS} more {what}: all are held in the "
                            f"{source}"))
    return lines


def control_notices(r: Renderer, state: ControlState, held: Mapping[str, str] | None = None,
                    ) -> list[tuple[str, list[Block]]]:
    """``(reason, lines)`` of each notice the governed state calls for, in their fixed order;
    a constraint whose ref is in ``held`` names where its words are (:func:`_held_whole`)."""
    chars = r.chars
    source = f"governed store, envelope {state.envelope_id}" if state.envelope_id \
        else "governed store"
    out: list[tuple[str, list[Block]]] = []
    n = GOVERNED_ITEMS
    # A side effect the store holds unresolved that a newer tool run resolved (RFC 0023): said
    # so, never stated as blocking.
    settled = [r.line(f"- side effect {label_value(key, chars.idempotency_key)} ({source}: "
                      f"unresolved) resolved by {ref}, a newer record")
               for key, ref in state.settled]
    if state.blocking:
        lines = [r.line(f"BLOCKED ON RECONCILIATION ({source}): an external side effect "
                        "may already have happened. Reconcile it before any further "
                        "action; never retry the call.")]
        lines += [r.line(f"- idempotency key {label_value(key, chars.idempotency_key)}: {status}")
                  for key, status in state.blocking[:n]]
        out.append(("blocked_on_reconciliation", _bounded(
            r, lines, len(state.blocking), "side effects to reconcile", source) + settled))
    elif settled:
        out.append(("settled_side_effect", settled))
    # An obligation the store holds pending that a newer record resolved (RFC 0023): named by
    # its key and the record, never listed as pending (the newest GOVERNED_ITEMS; the rest are
    # left to the store, which the next compaction brings up to date).
    done = [r.line(f"- obligation {label_value(key, chars.idempotency_key)} resolved by {ref}, "
                   "a newer record")
            for key, ref in state.settled_obligations[-n:]]
    if state.obligations:
        lines = [r.line(f"pending obligations ({source}):")]
        lines += [r.line(f"- {label_value(o, chars.obligation)}") for o in state.obligations[:n]]
        out.append(("pending_obligation", _bounded(
            r, lines, len(state.obligations), "obligations", source) + done))
    elif done:
        out.append(("settled_obligation",
                    [r.line(f"obligations ({source}), each resolved since:"), *done]))
    if state.constraints:
        lines = [r.line(f"exact operator constraints ({source}; still in force):")]
        lines += [r.line(_constraint_line(ref, text, held or {}, chars.constraint))
                  for ref, text in state.constraints[:n]]
        out.append(("exact_constraint", _bounded(
            r, lines, len(state.constraints), "constraints", source)))
    return out


def _control_item(r: Renderer, key: str, lines: list[Block], reasons: tuple[str, ...]) -> Item:
    slot = SLOTS[key]
    return Item(key=key, section=Section.WORK_ITEM, priority=Priority.PINNED, reasons=reasons,
                order=slot.order, position=slot.position,
                forms={Form.REF: r.rendered(lines[:1]), Form.FULL: r.rendered(lines)},
                refs=(), kind="control")


def work_item(ctx: Context, r: Renderer) -> list[Item]:
    state = ctx.view.work_item
    if state is None:
        return []
    waits = [w for w in ctx.view.open_waits if w.work_item_id in (None, state.work_item_id)]
    settled = [s for s in ctx.view.settled_waits
               if s.wait.work_item_id in (None, state.work_item_id)]
    slot = SLOTS["work_item"]
    forms = r.work_item(state, waits, spoken_in=objective_spoken_in(ctx, r), settled=settled)
    return [Item(key=f"work_item_state:{state.work_item_id}", section=Section.WORK_ITEM,
                 priority=Priority.PINNED, reasons=("current_work_item",), order=slot.order,
                 position=slot.position, forms=forms, refs=(state.ref,), kind="work_item")]


def objective_spoken_in(ctx: Context, r: Renderer) -> str | None:
    """The ref of an operator message of the continuation anchor (or the current turn) whose
    text as every form of that pinned turn shows it (whole, or its excerpt past the operator's
    cap) holds the current work item's objective word for word, if any: the objective is then said once, in
    the operator's own words (an importer or a runtime that takes a task's opening paragraph as
    its objective otherwise repeats up to a thousand characters of it)."""
    state = ctx.view.work_item
    if state is None:
        return None
    objective = " ".join(state.objective.split())
    if len(objective) <= ctx.policy.text.objective_spoken:
        return None
    view = ctx.view
    units = [view.current] + ([u] if view.anchor_id and (u := view.unit(view.anchor_id))
                              else [])
    for unit in units:
        for stored in unit.records:
            rec = stored.record
            if not (isinstance(rec, Message) and rec.by_operator
                    and objective in " ".join(rec.text.split())):
                continue
            # What every form of the turn shows of the message (an excerpt past the operator's
            # cap): the objective must be in it word for word.
            shown, _, _ = r.body(stored, ctx.policy.caps.operator)
            if objective in " ".join(shown.split()):
                return stored.ref
    return None


#: Work-refs lists in their section order (operator pins follow them).
_REF_LISTS = ("files", "tasks", "tools", "waits")


def work_refs(ctx: Context, r: Renderer) -> list[Item]:
    """Lists of what the work item touched in view, open waits, and the operator's pins."""
    items: list[Item] = []
    wid = ctx.work_item_id
    chars = ctx.policy.text
    files, tasks, tools, failed = _touched(ctx, wid)
    scope = f" for {label_value(wid, chars.ident)}" if wid else ""
    frontier = ctx.frontier.item(r, wid, ctx.policy) if wid else None
    if frontier is not None:
        items.append(frontier)
        files = {}  # the frontier names every file of the work item, not only the window's
    if files:
        lines = [f"- {label_value(f, chars.path_in_list)} (written by {ref})"
                 for f, ref in reversed(files.items())]
        items.append(_list_item(ctx, r, "files", f"files touched{scope}:", lines, newest=True))
    if tasks:
        lines = [f"- task {label_value(t, chars.ident)}: {s}" for t, s in reversed(tasks.items())]
        items.append(_list_item(ctx, r, "tasks", f"tasks{scope}:", lines, newest=True))
    if tools and not _frontier_says_it(frontier, ctx, wid, tools, failed):
        lines = [f"- {label_value(name, chars.tool_name)} ×{n}"
                 + (f", {failed[name]} failed" if failed[name] else "")
                 for name, n in sorted(tools.items())]
        items.append(_list_item(ctx, r, "tools", f"tools used{scope}:", lines))
    if ctx.view.open_waits:
        items.append(_waits_item(ctx, r))
    for i, (pin, target) in enumerate(ctx.view.pins):
        items.append(_pin_item(ctx, r, pin, target, len(_REF_LISTS) + i))
    return items


def _touched(ctx: Context, wid: str | None) -> tuple[dict[str, str], dict[str, str],
                                                     Counter[str], Counter[str]]:
    """What the work item's turns in view touched: the files written (the run that wrote each
    last), the tasks (their last result), the tools run and the failed runs per tool."""
    files: dict[str, str] = {}
    tools: Counter[str] = Counter()
    failed: Counter[str] = Counter()
    tasks: dict[str, str] = {}
    for unit in ctx.units:
        if wid and unit.turn.work_item_id not in (wid, None):
            continue
        for stored in unit.records:
            rec = stored.record
            if isinstance(rec, Tool):
                tools[rec.tool_name] += 1
                if rec.failed:
                    failed[rec.tool_name] += 1
                for f in rec.files_written:
                    # Re-inserted on every write: listed newest first (reversed below), the
                    # file written last (the current edit target) leads the list, and a cut
                    # or clipped list drops the files written longest ago (issue 12, item 4).
                    files.pop(f, None)
                    files[f] = stored.ref
            elif isinstance(rec, TaskResult):
                tasks.pop(rec.task_id, None)
                tasks[rec.task_id] = f"{rec.status.value} ({stored.ref})"
    return files, tasks, tools, failed


def _waits_item(ctx: Context, r: Renderer) -> Item:
    chars = ctx.policy.text
    lines = [f"- {label_value(w.wait_id, chars.ident)} ({w.opened_ref}"
             + (f", work item {label_value(w.work_item_id, chars.ident)}" if w.work_item_id
                else "")
             + f"): {label_value(w.condition, chars.wait_condition_in_refs)}"
             for w in ctx.view.open_waits]
    return _list_item(ctx, r, "waits", "open waits:", lines, priority=Priority.HIGH)


def _frontier_says_it(frontier: Item | None, ctx: Context, wid: str | None,
                      tools: Counter[str], failed: Counter[str]) -> bool:
    """The execution frontier's line already counts what a tools list would say: one tool, its
    runs and failures the frontier's (each tool line names the tool). A list that repeats it
    cost ~14 tokens a prompt on every agent loop with one tool (RFC 0015)."""
    if frontier is None or wid is None or len(tools) != 1:
        return False
    tally = ctx.frontier.tally()
    ((name, runs),) = tools.items()
    return tally.done + tally.pending + len(tally.answered) == runs and tally.failed == failed[name]


def _list_item(ctx: Context, r: Renderer, name: str, title: str, lines: list[str],
               priority: Priority = Priority.NORMAL, *, newest: bool = False) -> Item:
    """A work-refs list; its compact form names the first ``list_compact_lines`` entries and
    says how many more there are and where. ``newest``: the lines run newest first (the file
    being edited now, the task that just ended), so what a cut drops is the oldest, and the
    note says so (issue 12, item 4)."""
    shown = ctx.policy.list_compact_lines
    order = _REF_LISTS.index(name)
    full = r.rendered([r.line(title), *(r.line(ln) for ln in lines)])
    forms = {Form.FULL: full}
    if len(lines) > shown:
        more = "older" if newest else "more"
        compact = [r.line(title), *(r.line(ln) for ln in lines[:shown]),
                   r.line(f"- … and {len(lines) - shown} {more} not listed here (each in the "
                          "history under its ref)")]
        forms[Form.COMPACT] = r.rendered(compact)
    return Item(key=f"work_refs:{name}", section=Section.WORK_REFS, priority=priority,
                reasons=(name,), order=order, position=(order,), forms=forms, refs=(),
                kind="work_refs")


def _pin_item(ctx: Context, r: Renderer, pin: StoredRecord, target: StoredRecord,
              order: int) -> Item:
    rec = pin.record
    assert isinstance(rec, Pin)
    note = f" — {label_value(rec.note, ctx.policy.text.pin_note)}" if rec.note else ""
    head = r.line(f"operator pin ({pin.ref}) on {target.ref}{note}", [pin.ref])
    trec = target.record
    view = ctx.view
    # A target that a turn owns is shown with that turn, which the pin pins; only a record
    # no turn shows (and no other section shows) is shown here, and selected here.
    shown_elsewhere = {view.environment.ref if view.environment else None,
                       view.work_item.ref if view.work_item else None}
    forms = {Form.REF: r.rendered([head])}
    if not (isinstance(trec, Turn) or target.turn_seq is not None
            or target.ref in shown_elsewhere):
        cap = ctx.policy.caps.pinned
        if isinstance(trec, Message) and trec.by_operator:
            body = r.trusted(target, "pinned operator words:", cap)
        elif trec.trust in (Trust.TRUSTED_OPERATOR, Trust.RUNTIME_FACT):
            body = r.trusted(target, "pinned record:", cap)
        else:
            body = r.fenced(target, "pinned record (untrusted):", cap)
        forms[Form.FULL] = r.rendered([head, body])
    return Item(key=pin.ref, section=Section.WORK_REFS, priority=Priority.PINNED,
                reasons=("operator_pin",), order=order, position=(order,), forms=forms,
                refs=(pin.ref,), kind="pin")


def episodes(ctx: Context, r: Renderer,
             source: EpisodeSource | None) -> tuple[list[Item], list[RecalledEpisode]]:
    """Recalled episodes, ranked by recall score: any archived range before the current turn.

    A recalled episode stands for the turns it covers, in the window too (the history skips
    them): an early decision in a conversation of a few dozen turns then competes as one
    episode, not as one turn among many (RFC 0013). Pinned turns are shown on their own, and
    an episode that holds their records names them instead of quoting them again.
    """
    if source is None:
        return [], []
    view = ctx.view
    texts = [s.record.text for u in (view.current, view.unit(view.anchor_id or ""))
             if u is not None for s in u.records
             if isinstance(s.record, Message) and s.record.by_operator]
    texts.extend(s.record.summary for s in view.current.records if isinstance(s.record, TaskResult))
    # Shared links are counted with the live part of the history: a turn an episode archived
    # would otherwise recall its own episode.
    archived = source.archived_through(view.current.turn.seq, view.limit_pos)
    refs: set[str] = set()
    for u in ctx.units:
        if archived is not None and u.turn.seq <= archived:
            continue
        for s in u.records:
            refs.add(s.ref)
            if isinstance(s.record, Tool):
                refs.update(s.record.files_written)
    shown: set[str] = set()
    for tid in ctx.pinned:
        unit = view.unit(tid)
        if unit is not None:
            shown.add(unit.ref)
            shown.update(s.ref for s in unit.records)
    if ctx.exchange is not None:
        shown.add(ctx.exchange.message.ref)
    query = RecallQuery(current=view.current, window_first_seq=view.current.turn.seq,
                        work_item_id=ctx.work_item_id, limit_pos=view.limit_pos,
                        query_text="\n".join(texts), refs=frozenset(refs),
                        shown=frozenset(shown))
    recalled = source.recall(query, ctx.policy.recall)
    items = []
    for rank, ep in enumerate(recalled):
        # In blocks the clipper can cut: an upgrade that does not fit whole is clipped like any
        # other step, so the budget is used also when episodes are recalled.
        forms = episode_forms(r, ep)
        items.append(Item(key=ep.ref, section=Section.EPISODES, priority=ep.priority,
                          reasons=ep.reasons, order=rank, position=(rank,), forms=forms,
                          refs=(ep.ref,), kind="episode"))
    return items, recalled


def current_input(ctx: Context, r: Renderer, turns: TurnItems, chain_of: ChainOf) -> list[Item]:
    """The continuation anchor, the previous exchange, an agent loop's previous step, and the
    current turn under its relation line."""
    view = ctx.view
    cur = view.current
    items: list[Item] = []
    anchor_note = f" (continuation anchor: turn:{view.anchor_id})" if view.anchor_id else ""
    relation_line = r.line(f"{RELATION_PREFIX}{ctx.relation.value} — "
                           f"{RELATION_TEXT[ctx.relation]}{anchor_note}", mark=Mark.RELATION)
    if view.anchor_id and view.anchor_id != cur.turn.id:
        anchor = view.unit(view.anchor_id)
        if anchor is not None:
            slot = SLOTS["continuation_anchor"]
            items.append(turns.item(anchor, Section.CURRENT_INPUT, slot.order, slot.position,
                                    chain_of(anchor.turn.id)))
    if ctx.exchange is not None:
        items.append(exchange_item(ctx, r))
    if ctx.previous_step is not None:
        # An agent loop's previous step is the exchange the current step continues: shown
        # here, in order, and upgraded with the current input (after the anchor).
        slot = SLOTS["previous_step"]
        items.append(turns.item(ctx.previous_step, Section.CURRENT_INPUT, slot.order,
                                slot.position, chain_of(ctx.previous_step.turn.id)))
    slot = SLOTS["current_turn"]
    cur_item = turns.item(cur, Section.CURRENT_INPUT, slot.order, slot.position,
                          chain_of(cur.turn.id))
    def under_relation(form: Rendered) -> Rendered:
        return Rendered(blocks=(relation_line, *form.blocks),
                        tokens=form.tokens + relation_line.tokens, refs=form.refs)

    forms = {f: under_relation(form) for f, form in cur_item.forms.items()}
    grow = None
    if cur_item.grow is not None:
        grow_turn = cur_item.grow

        def grow(limit: int | None) -> Rendered | None:
            form = grow_turn(None if limit is None else limit - relation_line.tokens)
            return None if form is None else under_relation(form)
    items.append(attrs.evolve(cur_item, forms=forms, grow=grow))
    return items


def exchange_item(ctx: Context, r: Renderer) -> Item:
    """The exchange keeps role and order, so a short reply keeps the question it answers."""
    assert ctx.exchange is not None
    unit, stored = ctx.exchange.unit, ctx.exchange.message
    # "asked" only for a question (any script): a statement is labelled as one (issue 16).
    verb = "asked" if asks_question(getattr(stored.record, "text", "")) else "said"
    block = r.fenced(stored, f"previous exchange — the assistant {verb} (turn:{unit.turn.id}):",
                     ctx.policy.caps.exchange)
    ref_form = r.line(f"previous exchange: {stored.ref} (turn:{unit.turn.id})", [stored.ref])
    slot = SLOTS["last_exchange"]
    return Item(key=f"exchange:{stored.ref}", section=Section.CURRENT_INPUT,
                priority=Priority.PINNED, reasons=("last_exchange",), order=slot.order,
                position=slot.position,
                forms={Form.REF: r.rendered([ref_form]), Form.FULL: r.rendered([block])},
                refs=(stored.ref,), kind="exchange")
