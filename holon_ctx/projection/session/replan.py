"""A session projection's re-plan: the stateless planner's choice, laid out to be appended to.

At a re-plan (RFC 0010, decision 2) the planner of RFC 0002 chooses, at the low-water budget,
among the same items as a stateless projection — the environment, recalled episodes, the turns of
the window (folded and ranked as ever) — except those the tail states instead (work item, work
refs, governed notices), and with the current input's turns (the continuation anchor, an agent
loop's previous step, the current turn, the exchange a short reply answers) placed among the
recent turns in ledger order rather than in a section of their own. Assembled as usual, that is
the *frozen* part of every request until the next re-plan:

    stable prefix   ## Environment, ## Episode memory   (a system part, when the environment may
                                                         sit in the system role; user parts)
    history         ## Recent turns, items in ledger order, as parts (native.py)

The parts keep the planner's forms byte for byte: the frozen text is the assembled projection's
text, and its token count the plan's.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from holon_ctx.errors import BudgetTooSmallError
from holon_ctx.ledger.store import LedgerStore, StoredRecord
from holon_ctx.projection.base.items import BlockKind, Item, Rendered, operator_chars
from holon_ctx.projection.base.model import (
    ControlState,
    EpisodeSource,
    Form,
    Priority,
    RecalledEpisode,
    Section,
    TurnUnit,
)
from holon_ctx.projection.base.policy import Policy
from holon_ctx.projection.base.spans import spans_of, title_span
from holon_ctx.projection.planning import sections
from holon_ctx.projection.planning.context import Context, analyse
from holon_ctx.projection.planning.frontier import Tally
from holon_ctx.projection.planning.history import History, episode_spans, stored_turn_seq
from holon_ctx.projection.planning.manifest import SECTION_TITLES, Projection
from holon_ctx.projection.planning.pins import SLOTS
from holon_ctx.projection.planning.planner import Plan
from holon_ctx.projection.planning.projector import plan_and_assemble
from holon_ctx.projection.planning.retention import FactsCache, Retention, extends_fold_run
from holon_ctx.projection.planning.turns import ChainOf, Tier, TurnItems
from holon_ctx.projection.planning.view import View, load_view
from holon_ctx.projection.provider_formats.native import (
    Part,
    call_ids,
    parts_of_blocks,
    system_part,
    text_part,
)
from holon_ctx.projection.rendering.clipping import Clipper
from holon_ctx.projection.rendering.effects import track_effects
from holon_ctx.projection.rendering.render import Renderer
from holon_ctx.tokens import TokenCounter

__all__ = ["Frozen", "Prepared", "prepare", "replan"]


@attrs.frozen
class Frozen:
    """What a re-plan freezes, and what the walk after it starts from."""

    projection: Projection
    parts: tuple[Part, ...]
    #: How many of ``parts`` are the stable prefix (the rest is the history).
    prefix_count: int
    view: View
    ctx: Context
    #: Turn ids the history shows (in any form but a fold line).
    shown: frozenset[str]
    #: The turn the history ends with in its full form, if any (a later record of it continues
    #: that turn without a new heading).
    open_turn: str | None
    #: The execution frontier's counts for the current work item, as of the re-plan.
    tally: Tally | None
    frontier_cover: str
    #: The smallest plan budget at which the next form of every pinned turn not yet in its full
    #: form would enter (None: all are full). A re-plan raises its budget toward it: the current
    #: input, its anchor and the previous step are what the next turns continue from.
    pinned_need: int | None = None
    #: The smallest plan budget at which every pinned turn shows the operator's words as fully
    #: as its richest form does (None: all do). A re-plan raises its budget to it before any
    #: growth room is kept (RFC 0010, decision 7).
    words_need: int | None = None
    #: Unresolved side effects among the turns the re-plan read (key → the run's ref).
    unresolved: dict[str, str] = attrs.Factory(dict)
    #: Keys of the open items the episodes shown state ``STILL OPEN`` (in any form but left out):
    #: a record that resolves one re-plans the epoch (``episode_item_resolved``, RFC 0023).
    still_open: frozenset[str] = frozenset()


def _current_items(ctx: Context, turns: TurnItems, chain_of: ChainOf, r: Renderer, *,
                   anchor_cap: int | None = None) -> list[Item]:
    """The current input's turns as recent turns, in ledger order (each keeps its pinned slot
    order, so the planner upgrades them in the usual precedence). ``anchor_cap``: a continuation
    anchor whose full form takes more tokens is offered in its compact form only (see
    :func:`replan`)."""
    view = ctx.view
    items: list[Item] = []
    wanted: list[tuple[TurnUnit, str]] = []
    if view.anchor_id and view.anchor_id != view.current.turn.id:
        anchor = view.unit(view.anchor_id)
        if anchor is not None:
            wanted.append((anchor, "continuation_anchor"))
    if ctx.previous_step is not None:
        wanted.append((ctx.previous_step, "previous_step"))
    wanted.append((view.current, "current_turn"))
    for unit, slot_name in wanted:
        item = turns.item(unit, Section.RECENT_TURNS, SLOTS[slot_name].order,
                          (unit.turn.seq,), chain_of(unit.turn.id))
        if slot_name == "continuation_anchor" and anchor_cap is not None \
                and Form.FULL in item.forms and Form.COMPACT in item.forms \
                and item.forms[Form.FULL].tokens > anchor_cap:
            item = _words_only(item, r)
        items.append(item)
    if ctx.exchange is not None:
        exchange = sections.exchange_item(ctx, r)
        items.append(attrs.evolve(exchange, section=Section.RECENT_TURNS,
                                  position=(ctx.exchange.unit.turn.seq, 1)))
    return items


def _words_only(item: Item, r: Renderer) -> Item:
    """A capped anchor (see :func:`replan`): its full form cut right after the operator's words,
    with the ref of its full text — the same first bytes as the full form, so a prompt that
    showed the anchor whole (a whole epoch, RFC 0025) keeps the words in its cached prefix.
    When no shorter cut keeps every word: its compact form (the words verbatim, its records a
    line each) if that is shorter, else the item as it is (its full form is the words)."""
    full = item.forms[Form.FULL]
    # Remembered by the form it cuts: a loop's re-plans (and each plan budget a re-plan tries)
    # cut the same anchor again and again, ~11 clips a search.
    (best,) = r.memo(("anchor_words_cut", full.text, full.tokens), lambda: (_cut(full, r),))
    lower = [v for f, v in item.forms.items() if f < Form.COMPACT]
    if best is not None and best.tokens < full.tokens \
            and all(set(v.refs) <= set(best.refs) for v in lower):
        # In place of the compact form too: a larger budget never loses a ref (the compact
        # form's lines name each record; the cut names the turn's full text instead).
        forms = {f: v for f, v in item.forms.items() if f < Form.COMPACT}
        forms[Form.FULL] = best
    elif item.forms[Form.COMPACT].tokens < full.tokens:
        forms = {f: v for f, v in item.forms.items() if f is not Form.FULL}
    else:
        return item  # its full form is the words (nothing else to give way)
    return attrs.evolve(item, forms=forms, grow=None, shrink=None)


def _cut(full: Rendered, r: Renderer) -> Rendered | None:
    """The shortest cut of ``full`` that keeps every block of the operator's words as it is
    (None: none does)."""
    words = [b for b in full.blocks if b.kind is BlockKind.OPERATOR]
    clip = Clipper(r).clip
    lo, hi = 1, full.tokens
    best: Rendered | None = None
    while lo <= hi:  # a longer cut keeps more of the blocks: the least that keeps the words
        mid = (lo + hi) // 2
        cut = clip(full, mid)
        if cut is not None and all(b in cut.blocks for b in words):
            best, hi = cut, mid - 1
        else:
            lo = mid + 1
    return best


@attrs.frozen
class Prepared:
    """What a re-plan at a position reads before it plans, the same at every plan budget: the
    view, its analysis, the recalled episodes and the environment's items. A re-plan tries
    several plan budgets at one position, and a refusal's need search walks the same positions
    at several budgets (need.py): read once, planned each time (RFC 0010, 2026-12-06)."""

    view: View
    ctx: Context
    episode_items: tuple[Item, ...]
    recalled: tuple[RecalledEpisode, ...]
    environment: tuple[Item, ...]
    #: The turn ranges the recalled episodes cover (a window turn in one is shown by it).
    spans: tuple[tuple[int, int], ...]
    #: The planner's refusal here, by the environment form asked for: it refuses every budget
    #: below its pinned minimum (a sum of the items' least forms, the same items at every budget),
    #: so a lower plan budget is refused again without being planned.
    refusals: dict[Form | None, BudgetTooSmallError] = attrs.Factory(dict)
    #: Tier 0's turn items and folds, once the first plan here made them (``History.tier0``).
    tier0: list[Tier] = attrs.Factory(list)


def prepare(store: LedgerStore, r: Renderer, policy: Policy, episodes: EpisodeSource | None,
            control: ControlState | None, *, limit_pos: int) -> Prepared:
    """Read what a re-plan as of ``limit_pos`` plans from (see :class:`Prepared`)."""
    view = load_view(store, limit_pos=limit_pos, extend=extends_fold_run, policy=policy)
    ctx = analyse(view, store, policy, control)
    episode_items, recalled = sections.episodes(ctx, r, episodes)
    # A turn's sequence number never changes once written (a ledger only grows), and every
    # re-plan asks it of the two ends of each episode it recalls — mostly the same episodes,
    # a store read each (~0.4 ms a re-plan at 100k): kept in the renderer's memo, which, like
    # its records' memo, serves one ledger. A turn not found is asked again next time.
    spans = episode_spans(store, recalled, lambda turn_id: r.memo(
        ("turn_seq", turn_id), lambda: stored_turn_seq(store, turn_id)))
    return Prepared(view=view, ctx=ctx, episode_items=tuple(episode_items),
                    recalled=tuple(recalled), environment=tuple(sections.environment(ctx, r)),
                    spans=tuple(spans))


def replan(store: LedgerStore, r: Renderer, policy: Policy, facts: FactsCache,
           episodes: EpisodeSource | None, control: ControlState | None, *, limit_pos: int,
           budget_tokens: int, headers: dict[Section, int],
           environment_form: Form | None = None, prepared: Prepared | None = None,
           anchor_cap: int | None = None) -> Frozen:
    """Plan the ledger as of ``limit_pos`` under ``budget_tokens`` and lay it out (see above).

    ``environment_form``: the environment's one form, decided by the caller (None: the planner
    chooses, as a stateless projection does). A session fixes it for its budget, so that the
    stable prefix reads the same at every re-plan whatever the plan budget (RFC 0025).
    ``prepared``: what :func:`prepare` read at this position with this ``control`` and
    ``episodes`` (None: read now).

    ``anchor_cap``: a continuation anchor whose full form takes more tokens is offered only as
    its operator's words — the full form cut right after them, with the ref of its full text
    (:func:`_words_only`) — so that the turns pinned whole leave room for an agent loop to go
    on (RFC 0010, decision 7). The anchor
    of a loop is the operator's turn, whose full form holds the loop's first reply and output;
    left to the planner, a re-plan at a small budget raised its plan to the brim for it and the
    last two steps, the next step did not fit, and the loop re-planned at almost every step. A
    session passes what leaves room for three steps (session_epochs); fixed by the budget, not by
    the room at each re-plan, so every epoch shows the anchor in the same form and its cached
    prefix survives the re-plans (as the environment's, RFC 0025)."""
    if prepared is None:
        prepared = prepare(store, r, policy, episodes, control, limit_pos=limit_pos)
    refused = prepared.refusals.get(environment_form)
    if refused is not None and budget_tokens < refused.required_tokens:
        raise BudgetTooSmallError(refused.required_tokens, budget_tokens, refused.what)
    view, ctx = prepared.view, prepared.ctx
    retention = Retention(ctx.pinned, facts)
    turns = TurnItems(ctx, r, retention)
    history = History(ctx, store, retention, turns, episodes, spans=prepared.spans)
    episode_items, recalled = list(prepared.episode_items), list(prepared.recalled)
    environment = list(prepared.environment)
    if environment_form is not None:
        environment = [attrs.evolve(it, forms={environment_form: it.forms[environment_form]})
                       for it in environment]
    items = [*environment, *episode_items, *_tier0(history, prepared).items,
             *_current_items(ctx, turns, history.chain_of, r, anchor_cap=anchor_cap)]
    try:
        projection, chosen = plan_and_assemble(ctx, history, items, recalled, r,
                                               budget_tokens=budget_tokens, headers=headers)
    except BudgetTooSmallError as exc:
        prepared.refusals[environment_form] = exc
        raise
    records = _records(history.units, view)
    parts, prefix_count = _parts(projection, items, records, r)
    tally = ctx.frontier.tally() if ctx.work_item_id else None
    unresolved: dict[str, str] = {}
    track_effects(unresolved, sorted(records.values(), key=lambda s: s.pos))
    cover = "" if ctx.frontier.complete else (
        f"; counts cover {ctx.frontier.since or 'the turns in view'} onward")
    shown = _shown_turns(projection)
    open_turn = _open_turn(projection, chosen)
    pinned_need = _pinned_need(ctx, items, chosen)
    words_need = _words_need(items, chosen)
    # The keys the listed episodes say STILL OPEN: a record resolving one re-plans (RFC 0023).
    listed = {e.ref for e in projection.manifest.episodes if e.representation != "omitted"}
    still_open = frozenset(key for ep in recalled if ep.ref in listed
                           for key in ep.open_keys or ())
    return Frozen(projection=projection, parts=tuple(parts), prefix_count=prefix_count,
                  view=view, ctx=ctx, shown=shown, open_turn=open_turn, tally=tally,
                  frontier_cover=cover, pinned_need=pinned_need, words_need=words_need,
                  unresolved=unresolved,
                  still_open=still_open)


def _tier0(history: History, prepared: Prepared) -> Tier:
    """Tier 0 of ``history``: made by the first plan at this position, reused by the others."""
    known = prepared.tier0[0] if prepared.tier0 else None
    tier = history.tier0(list(prepared.recalled), known)
    if known is None:
        prepared.tier0.append(tier)
    return tier


def _shown_turns(projection: Projection) -> frozenset[str]:
    """A turn counts as shown when the model can read what it said: its full form (clipped to
    the token at most, the operator's words first), or a pinned turn's compact form (which
    keeps the operator's words verbatim). A one-line digest does not: a pin or an anchor on
    such a turn makes the next request re-plan, so that the planner shows it whole."""
    return frozenset(d.key.removeprefix("turn:") for d in projection.decisions
                     if d.kind == "turn" and (d.form is Form.FULL or (
                         d.form is Form.COMPACT and d.priority is Priority.PINNED)))


def _open_turn(projection: Projection, chosen: Plan) -> str | None:
    """The history's last turn when it is shown whole (later records of it may join it)."""
    last = projection.section_items.get(Section.RECENT_TURNS, ())
    if not last:
        return None
    key, form = last[-1]
    pick = chosen.chosen.get(key)
    if key.startswith("turn:") and pick is not None and pick[0] is Form.FULL \
            and not form.clipped:
        return key.removeprefix("turn:")
    return None


def _pinned_need(ctx: Context, items: Sequence[Item], chosen: Plan) -> int | None:
    """The budget at which the current input's pinned turns, exchange and required items would
    all be shown whole, when some is not (None: all are)."""
    current_keys = {it.key for it in items if (it.priority.value == 0 and it.kind in (
        "turn", "exchange") and it.key.removeprefix("turn:") in ctx.pinned) or it.kind == "exchange"
        # A decision the current input is about (RFC 0030) is what it continues from too.
        or it.required}
    needs = [chosen.upgrade_at.get(key, chosen.omitted.get(key)) for key in current_keys
             if key not in chosen.chosen or chosen.chosen[key][0] is not Form.FULL
             or chosen.chosen[key][1].clipped]
    return max((n for n in needs if n is not None), default=None)


def _words_need(items: Sequence[Item], chosen: Plan) -> int | None:
    """The plan budget at which every pinned turn shows the operator's words as its richest
    form does, when one does not (see :attr:`Frozen.words_need`)."""
    needs: list[int] = []
    for it in items:
        if it.kind != "turn" or it.priority is not Priority.PINNED:
            continue
        most = max(operator_chars(form) for form in it.forms.values())
        pick = chosen.chosen.get(it.key)
        if most and (pick is None or operator_chars(pick[1]) < most):
            need = chosen.upgrade_at.get(it.key, chosen.omitted.get(it.key))
            if need is not None:
                needs.append(need)
    return max(needs, default=None)


def _records(units: Sequence[TurnUnit], view: View) -> dict[str, StoredRecord]:
    out: dict[str, StoredRecord] = {}
    for unit in (*units, *view.extra.values(), view.current):
        out[unit.ref] = unit.stored
        for stored in unit.records:
            out[stored.ref] = stored
    return out


def _parts(projection: Projection, items: Sequence[Item], records: dict[str, StoredRecord],
           r: Renderer) -> tuple[list[Part], int]:
    """The frozen parts: the stable prefix, then the history (see the module docstring)."""
    prefix = [part for part in (_environment_part(projection, items, r.counter),
                                _episodes_part(projection, r.counter)) if part is not None]
    return [*prefix, *_history_parts(projection, records, r)], len(prefix)


def _environment_part(projection: Projection, items: Sequence[Item],
                      counter: TokenCounter) -> Part | None:
    """The environment section as one stable part: the system role when vouched for."""
    env = projection.section_items.get(Section.ENVIRONMENT, ())
    if not env:
        return None
    title = SECTION_TITLES[Section.ENVIRONMENT] + "\n"
    text = title + "".join(form.text for _, form in env)
    tokens = counter.count(title) + sum(form.tokens for _, form in env)
    refs = tuple(ref for _, form in env for ref in form.refs)
    env_item = next((it for it in items if it.section is Section.ENVIRONMENT), None)
    # Only vouched runtime configuration may sit in the system role (docs/providers.md).
    vouched = env_item is not None and "untrusted" not in env_item.reasons \
        and not any(b.kind is BlockKind.FENCED for _, form in env for b in form.blocks)
    spans = (title_span(title), *spans_of(b for _, form in env for b in form.blocks))
    return system_part(text, tokens, refs, spans) if vouched \
        else text_part(text, tokens, refs, stable_end=True, spans=spans)


def _episodes_part(projection: Projection, counter: TokenCounter) -> Part | None:
    """The episodes section as one stable part (the stable prefix's end)."""
    eps = projection.section_items.get(Section.EPISODES, ())
    if not eps:
        return None
    title = SECTION_TITLES[Section.EPISODES] + "\n"
    text = title + "".join(form.text for _, form in eps)
    tokens = counter.count(title) + sum(form.tokens for _, form in eps)
    return text_part(text, tokens, tuple(ref for _, f in eps for ref in f.refs),
                     stable_end=True, spans=(title_span(title), *spans_of(
                         b for _, form in eps for b in form.blocks)))


def _history_parts(projection: Projection, records: dict[str, StoredRecord],
                   r: Renderer) -> list[Part]:
    """The recent turns' title, then each turn's form as parts (a part may join the one before)."""
    recent = projection.section_items.get(Section.RECENT_TURNS, ())
    if not recent:
        return []
    title = SECTION_TITLES[Section.RECENT_TURNS] + "\n"
    parts = [text_part(title, r.counter.count(title), spans=(title_span(title),))]
    used: set[str] = set()  # the native call ids of the turns so far (each id once a request)
    for _, form in recent:
        made = parts_of_form(form, records, r, previous=parts[-1], used=used)
        used |= call_ids(made)
        parts.extend(made)
    return parts


def parts_of_form(form: Rendered, records: dict[str, StoredRecord], r: Renderer, *,
                  previous: Part | None, used: set[str]) -> list[Part]:
    """A rendered form as parts (:func:`~holon_ctx.projection.provider_formats.native.parts_of_blocks`)."""
    return parts_of_blocks(form.blocks, records, r.framing, previous=previous, used=used)
