"""The analysis behind ``holon-ctx explain``: why one ref is in, shrunk, folded, archived or out.

How it works. ``_status`` places the ref in a Projection by asking a table of steps in order
(``_STEPS``): the manifest's selected list, the items' decisions, the folds, the recent window
and the recalled or archived episodes; ``explain`` turns that into an :class:`Explanation` with
the record's facts, and ``_entry_budget`` projects again at larger budgets (doubling, then
bisecting) to find the smallest budget that shows the ref. Where a record's text sits and what
was defused in it come from the structured fields of the projection's blocks (kind, trust,
excerpt, and the record an episode's quote shows: ``_in_episode_text``), never from the
prompt's text.

The commands live in :mod:`holon_ctx.cli.preview_cmds`; :mod:`holon_ctx.cli.preview` draws the result.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import msgspec

from holon_ctx import LedgerStore
from holon_ctx.cli._api import BY_TRIGGER, BlockKind, Turn, forgeries, stored_turn_class
from holon_ctx.errors import UnknownRefError
from holon_ctx.lowlevel import Form, ItemDecision, Omission, Projection, Projector, Section, StoredRecord

__all__ = ["REASON_WORDS", "Explanation", "episode_lookup", "explain", "omission_reason"]


def episode_lookup(projector: Projector) -> Callable[[int], dict[str, Any] | None]:
    """The archived episode covering a turn sequence number, whether recalled or not."""
    source = projector.episodes
    store = getattr(source, "episodes", None)

    def covering(seq: int) -> dict[str, Any] | None:
        if store is None:
            return None
        num = store.max_num_before(seq) + 1
        ep = store.episodes([num]).get(num)
        if ep is None or not ep.span.first_seq <= seq <= ep.span.last_seq:
            return None
        return {"ref": ep.ref, "covers": list(ep.covers), "score": None,
                "representation": "not recalled for this turn"}
    return covering


class Explanation(msgspec.Struct, kw_only=True):
    """Why one ref is where it is in a projection (``explain --json`` prints this)."""

    ref: str
    #: in_full, excerpted, clipped, compacted, ref_only, omitted, folded, archived,
    #: outside_window, not_a_candidate or not_yet_appended.
    status: str
    summary: str
    budget_tokens: int
    current_turn: str
    record: dict[str, Any] | None = None
    item: dict[str, Any] | None = None
    fold: dict[str, Any] | None = None
    episode: dict[str, Any] | None = None
    #: The reason code the manifest gives the ref, when it lists it as omitted.
    reason: str | None = None
    window_first: str | None = None
    to_get_in: str = ""
    #: The smallest budget (checked by projecting) at which the ref is shown, when one exists.
    enters_at_budget: int | None = None
    #: How the prompt shows the record's own text: its fence or label, and what was neutralised.
    shown_as: str | None = None
    #: The session projection at the same turn and budget: its epoch, and where the ref is in
    #: the request a runtime sends (stable_prefix, frozen_history, appended, current_state, or
    #: None: not in it).
    session: dict[str, Any] | None = None
    #: The provider's count of the call made for the projected turn, beside holon_ctx's
    #: estimate, when a session recorded it (``Session.observe_usage``, RFC 0022).
    usage: dict[str, Any] | None = None
    #: ``session``: the request a runtime gets at the turn (the default); ``stateless``: the
    #: turn planned afresh. ``enters_at_budget`` is the stateless plan's either way (a session
    #: re-plans at its own moments; docs/session.md).
    mode: str = "session"


_SHOWN = ("in_full", "excerpted", "clipped")
_SHRUNK = ("compacted", "ref_only", "clipped", "clipped_out")
_OUT = ("omitted", "outside_window", "archived")


@attrs.frozen
class _Asked:
    """One ref asked about in one projection: what every step of :func:`_status` reads."""

    p: Projection
    ref: str
    owner: str | None
    owner_seq: Callable[[str], int | None]
    archived_in: Callable[[int], dict[str, Any] | None] | None
    #: The items whose refs include the ref.
    holders: list[ItemDecision]

    @property
    def seq(self) -> int | None:
        """The sequence number of the turn the record belongs to."""
        return self.owner_seq(self.owner) if self.owner else None


#: ``(status, the item holding the ref, its fold or episode)``, or None: not this step's case.
_Placed = tuple[str, ItemDecision | None, Any] | None


def _selected(a: _Asked) -> _Placed:
    """A ref the manifest lists as selected: shown in full, excerpted, clipped or shrunk."""
    selected_in = next((s.name for s in a.p.manifest.sections if a.ref in s.selected), None)
    if selected_in is None:
        return None
    d = next((h for h in a.holders if h.section.value == selected_in and h.form is not None),
             a.holders[0] if a.holders else None)
    if d is None:
        return "in_full", None, None
    if d.clipped:
        return "clipped", d, None
    if a.ref == d.refs[0] and d.form is not None and d.tokens < d.full_tokens:
        return ("compacted" if d.form is Form.COMPACT else "ref_only"), d, None
    blocks = [b for _, r in a.p.section_items.get(d.section, ()) for b in r.blocks
              if a.ref in b.refs]
    return ("excerpted" if any(b.excerpt for b in blocks) else "in_full"), d, None


def _held(a: _Asked) -> _Placed:
    """A ref an item stands for without selecting it: its item shows less than the record (a
    digest, a ref, or a clip that ends before it), or is left out."""
    shown = [h for h in a.holders if h.form is not None]
    if shown:
        d = shown[0]
        return ("clipped_out" if d.clipped else "ref_only" if d.form is Form.REF
                else "compacted"), d, None
    return ("omitted", a.holders[0], None) if a.holders else None


def _folded(a: _Asked) -> _Placed:
    """A ref (or its turn) inside a fold run the prompt shows."""
    keys = {a.ref, a.owner}
    return next((("folded", None, f) for f in a.p.folds if keys & set(f.refs)), None)


def _in_window(a: _Asked) -> _Placed:
    """Not placed by the plan: no turn to place it by (not a candidate), or in the window yet
    neither an item nor in a shown fold (its fold line was left out)."""
    first = a.p.manifest.window.get("first")
    first_seq = a.owner_seq(str(first)) if first else None
    seq = a.seq
    if seq is None or first_seq is None:
        return "not_a_candidate", None, None
    if seq < first_seq:
        return None
    folds = [(a.owner_seq(d.key.removeprefix("fold:")) or -1, d) for d in a.p.decisions
             if d.kind == "fold"]
    before = [(s, d) for s, d in folds if s <= seq]
    return "folded", max(before, key=lambda sd: sd[0])[1] if before else None, None


def _archived(a: _Asked) -> _Placed:
    """Older than the window: in a recalled episode, or in one archived but not recalled."""
    seq = a.seq
    assert seq is not None  # _in_window placed every ref without one
    for e in a.p.manifest.episodes:
        lo, hi = (a.owner_seq(c) for c in e.covers)
        if lo is not None and hi is not None and lo <= seq <= hi:
            return "archived", next((d for d in a.p.decisions if d.key == e.ref), None), {
                "ref": e.ref, "covers": list(e.covers), "score": e.score,
                "representation": e.representation}
    found = a.archived_in(seq) if a.archived_in is not None else None
    return ("archived", None, found) if found is not None else None


#: Where a ref can stand, asked in this order: the first step that places it decides; a ref
#: none places is outside the window.
_STEPS: tuple[Callable[[_Asked], _Placed], ...] = (_selected, _held, _folded, _in_window,
                                                   _archived)


def _status(p: Projection, ref: str, owner: str | None, owner_seq: Callable[[str], int | None],
            archived_in: Callable[[int], dict[str, Any] | None] | None = None,
            ) -> tuple[str, ItemDecision | None, Any]:
    """Where ``ref`` stands in ``p``: ``(status, the item holding it, fold or episode)``."""
    asked = _Asked(p=p, ref=ref, owner=owner, owner_seq=owner_seq, archived_in=archived_in,
                   holders=[d for d in p.decisions if ref in d.refs])
    for step in _STEPS:
        placed = step(asked)
        if placed is not None:
            return placed
    return "outside_window", None, None


def _record_facts(stored: StoredRecord, ref: str) -> tuple[str | None, dict[str, Any]]:
    """The turn a record belongs to and its facts for the explanation."""
    rec = stored.record
    owner = ref if isinstance(rec, Turn) else (
        f"turn:{rec.turn_id}" if getattr(rec, "turn_id", None) else None)
    record: dict[str, Any] = {
        "kind": ref.partition(":")[0], "origin": rec.origin.value if rec.origin else None,
        "trust": rec.trust.value if rec.trust else None, "tokens": stored.tokens, "turn": owner}
    if isinstance(rec, Turn):
        record["trigger"] = rec.trigger
    return owner, record


def explain(store: LedgerStore, projector: Projector, p: Projection, ref_arg: str) -> Explanation:
    ref = ref_arg if ":" in ref_arg else f"turn:{ref_arg}"
    base: dict[str, Any] = {"ref": ref, "budget_tokens": p.budget_tokens, "current_turn": p.current_turn,
            "window_first": p.manifest.window.get("first")}
    if ref.startswith("episode:"):
        return _explain_episode(projector, p, ref, base)
    stored = store.get(ref)
    if stored is None:
        raise UnknownRefError(ref, hint="no such record in the ledger")
    owner, record = _record_facts(stored, ref)
    limit_pos = p.manifest.window.get("limit_pos")
    if isinstance(limit_pos, int) and stored.pos >= limit_pos:
        return Explanation(**base, status="not_yet_appended", record=record,
                           summary=f"appended after {p.current_turn}, the turn projected",
                           to_get_in=f"project a later turn (--at) than {p.current_turn}")

    seqs: dict[str, int | None] = {}

    def owner_seq(turn_ref: str) -> int | None:
        if turn_ref not in seqs:
            found = store.get(turn_ref)
            seqs[turn_ref] = found.turn_seq if found is not None else None
        return seqs[turn_ref]

    status, d, extra = _status(p, ref, owner, owner_seq, episode_lookup(projector))
    reason = next((o["reason"] for s in p.manifest.sections for o in s.omitted
                   if o["ref"] == ref), None)
    if reason is None and d is not None and status in _LEFT_OUT_OR_SHRUNK:
        # The item's reason, as the preview's table gives it (its refs may all be shown).
        reason = omission_reason(d)
    item = None if d is None else _item_dict(d)
    if reason == Omission.EARLIER_IN_TURN.value:
        # Counted on its own turn's fold line, whichever step placed it (a session's fold list
        # says "folded", a plan's turn item "compacted"): neither low-value turns nor a digest.
        return Explanation(**base, status="folded", record=record, item=item, reason=reason,
                           summary=_EARLIER_IN_TURN, fold=_fold_dict(extra),
                           to_get_in=_EARLIER_TO_GET_IN + (
                               f"; the turn is shown whole at a budget of ≥ {d.next_budget} "
                               "tokens by the plan's order" if d is not None and d.next_budget
                               else ""))
    result = Explanation(**base, status=status, record=record, item=item, reason=reason,
                         summary=_summary(status, ref, record, item))
    if status == "folded":
        _explain_fold(result, store, p, stored, owner, d, extra)
        return result
    if status == "archived":
        result.episode = extra
    if status in _SHOWN and owner != ref:
        result.shown_as = _shown_as(p, ref)
    if status in _SETTLED:
        result.to_get_in = _SETTLED[status]
        return result
    if status == "archived":
        result.shown_as = _in_episode_text(p, ref)
    result.enters_at_budget = _entry_budget(projector, p, ref, owner, status, owner_seq)
    result.to_get_in = _how_to_get_in(p, ref, owner, status, d, item, result.enters_at_budget)
    return result


#: What gets a ref in, for the statuses no budget changes.
_SETTLED = {
    "in_full": "nothing: it is in the prompt",
    "excerpted": ("nothing: it is in the prompt; long text shows head and tail, the whole of it "
                  "stays in the ledger"),
    "not_a_candidate": ("records of this kind enter through the state they fold into (the "
                        "current work item, open waits, the latest environment, the newest "
                        "pins); this one is superseded or no longer current"),
}


def _explain_fold(result: Explanation, store: LedgerStore, p: Projection, stored: StoredRecord,
                  owner: str | None, d: ItemDecision | None, fold: Any) -> None:
    """A folded ref: the run it is folded into (shown, or its fold line left out) and why."""
    limit_pos = p.manifest.window.get("limit_pos")
    record = result.record
    assert record is not None
    if owner is not None and stored.turn_seq is not None:
        record["priority"], record["facts"] = _turn_class(store, stored.turn_seq, limit_pos)
    if fold is not None:
        result.fold = _fold_dict(fold)
    elif d is not None:
        result.fold = {**_fold_run(store, p, d.key.removeprefix("fold:"), limit_pos),
                       "shown": False}
    result.to_get_in = (
        "nothing about the budget: runs of low-value turns (ticks, retries, polls) always fold "
        "to one counted line; it would show on its own if it carried operator input or a state "
        "change, became the current turn or continuation anchor, or were pinned by the "
        "operator (a pin record targeting it)")
    if fold is None and d is not None and d.next_budget:
        result.to_get_in += f"; the fold line itself enters at a budget of ≥ {d.next_budget}"


def _fold_dict(fold: Any) -> dict[str, Any] | None:
    """A fold the prompt shows (a FoldManifest), as the explanation gives it; None for none."""
    if fold is None:
        return None
    return {"first": fold.first, "last": fold.last, "count": fold.count, "kinds": fold.kinds}


_EARLIER_IN_TURN = "counted on its turn's fold line: an earlier record of a huge turn"
_EARLIER_TO_GET_IN = (
    "nothing about this record alone: a turn larger than the budget shows the operator's words "
    "and its newest records, and counts the earlier ones on one fold line (RFC 0010, decision 7)")

#: Every reason code a manifest gives a ref it leaves out or shrinks, in words (explain prints
#: both). tests/test_explain_reasons.py fails on a reason the engine can give without words here.
REASON_WORDS: dict[str, str] = {
    Omission.BUDGET.value: "left out: the budget was spent on items of higher priority",
    Omission.FOLDED.value: "part of a run of low-value turns shown as one counted line",
    Omission.REPEATED_TOOL_CALL.value: ("a repeat of a tool call: the newest run is shown and the "
                                        "earlier ones counted on its line"),
    Omission.COMPACTED.value: "its turn is shown as a one-line digest to fit the budget",
    Omission.REF_ONLY.value: "named by its ref without its content, to fit the budget",
    Omission.CLIPPED.value: "its item is cut to fit the last tokens of the budget",
    Omission.SUPERSEDED.value: "a later state record (environment, work item) replaces it",
    Omission.OTHER_WORK_ITEM.value: ("its turn belongs to another work item: shown short, as "
                                     "context rather than evidence for the current one"),
    Omission.OUTSIDE_WINDOW.value: "older than the recent window of turns",
    Omission.EARLIER_IN_TURN.value: (
        "an earlier record of a huge turn: the turn shows its newest records that fit and counts "
        "the earlier ones on one fold line"),
}


def _how_to_get_in(p: Projection, ref: str, owner: str | None, status: str,
                   d: ItemDecision | None, item: dict[str, Any] | None,
                   found: int | None) -> str:
    """What would bring a shrunk, left-out or older ref (fully) into the prompt."""
    window_note = (f"older than the recent window (first turn in window: "
                   f"{p.manifest.window.get('first')}); an operator pin on it or a continuation "
                   "anchor to it brings it in at any budget"
                   if status in ("outside_window", "archived") else "")
    goal = ("shown in full" if status in _SHRUNK or owner not in (None, ref)
            else "in the prompt")
    if found is not None:
        hint = f"would be {goal} at a budget of ≥ {found} tokens (checked by projecting)"
    elif d is not None and d.next_budget and d.kind != "episode":
        hint = f"would be {goal} at a budget of ≥ {d.next_budget} tokens by the plan's order"
    elif status == "archived":
        hint = (f"a larger budget does not bring it back (checked up to "
                f"{p.budget_tokens << _DOUBLINGS} tokens): archived turns are represented by "
                "their episode")
    else:
        hint = f"not {goal} at any budget up to {p.budget_tokens << _DOUBLINGS} tokens"
    if status == "archived" and d is not None and d.kind == "episode":
        hint += (f"; meanwhile its episode {d.key} is recalled as {item['form']}"
                 if d.form is not None and item is not None else
                 f"; its episode {d.key} was recalled but left out for budget")
        if d.next_budget:
            hint += f" (its next form enters at a budget of ≥ {d.next_budget} tokens)"
    return f"{window_note}; {hint}" if window_note else hint


def omission_reason(d: ItemDecision) -> str | None:
    """The reason code of an item left out or shrunk, None for one in full: the manifest's own
    rule for the refs an item leaves out (projection/planning/manifest.py), so the preview, ``explain``
    and ``project --json`` give one item one reason (issue 27)."""
    if d.form is None:
        return Omission.BUDGET.value
    if not d.clipped and (d.form is Form.FULL or d.tokens >= d.full_tokens):
        return None
    if Omission.OTHER_WORK_ITEM.value in d.reasons:
        return Omission.OTHER_WORK_ITEM.value
    if d.clipped:
        return Omission.CLIPPED.value
    return (Omission.COMPACTED if d.form is Form.COMPACT else Omission.REF_ONLY).value



_DOUBLINGS = 5
#: Statuses of a ref whose item is left out or shrunk: they carry the item's reason code.
_LEFT_OUT_OR_SHRUNK = frozenset({"omitted", "clipped", "clipped_out", "compacted", "ref_only"})


def _item_dict(d: ItemDecision) -> dict[str, Any]:
    return {"key": d.key, "section": d.section.value, "priority": d.priority.label,
            "reasons": list(d.reasons), "chain": d.chain, "kind": d.kind,
            "form": "omitted" if d.form is None else "clipped" if d.clipped else d.form.label,
            "tokens": d.tokens, "full_tokens": d.full_tokens, "next_budget": d.next_budget}


def _in_episode_text(p: Projection, ref: str) -> str | None:
    """Where a recalled episode quotes the record: the fence its quote's block opens (the
    block says which record it quotes: projection/rendering/episode_forms.py), or the line naming it."""
    for key, rendered in p.section_items.get(Section.EPISODES, ()):
        quote = next((b for block in rendered.blocks for b in (block.parts or (block,))
                      if b.quote == ref and b.fenced), None)
        if quote is not None:
            # The quote's head is its claim line (if any), then the fence it opens.
            fence = quote.head.splitlines()[-1]
            return (f"quoted by {key} inside {fence} … </data>: its text cannot close the fence "
                    "or pose as operator input")
        text = rendered.text
        if f"({ref}" in text or f" {ref})" in text or f", {ref}" in text:
            return f"named by {key} (its text is not quoted there)"
    return None


def _shown_as(p: Projection, ref: str) -> str | None:
    """The label or fence the record's text sits under, and how much forgery was defused."""
    for _, rendered in (pair for items in p.section_items.values() for pair in items):
        for block in rendered.blocks:
            if ref not in block.refs or not block.body:
                continue
            head = block.head.rstrip("\n").split("\n")[-1]
            fences, claims = forgeries(block.body)
            notes = [f"{fences} fence-like tag(s) in the text neutralised (‹data)"] if fences else []
            if claims:
                notes.append(f"{claims} fake 'operator (trusted)' label(s) shown as "
                             "'operator (claimed)'")
            where = ("inside " + head + " … </data>: its text cannot close the fence or pose as "
                     "operator input") if block.kind is BlockKind.FENCED else f"under '{head}'"
            return "; ".join([where, *notes])
    return None




def _fold_run(store: LedgerStore, p: Projection, first: str, limit_pos: Any) -> dict[str, Any]:
    """The run of a fold whose line was left out (the projection reports shown folds only): the
    window turns from ``first`` up to the next turn that is an item of its own."""
    limit = limit_pos if isinstance(limit_pos, int) else store.end_pos()
    start = store.get(first)
    if start is None or start.turn_seq is None:
        return {"first": first}
    starts = [d.key.removeprefix("fold:") if d.kind == "fold" else d.key for d in p.decisions
              if d.kind in ("turn", "fold")]
    later = [seq for ref in starts if (found := store.get(ref)) is not None
             and (seq := found.turn_seq) is not None and seq > start.turn_seq]
    end = min(later, default=start.turn_seq + 1)
    run = [t for t in store.turns_before(end, end - start.turn_seq, limit)
           if (t.turn_seq or 0) >= start.turn_seq][::-1]
    kinds: dict[str, int] = {}
    for t in run:
        facts = _turn_class(store, t.turn_seq or 0, limit)[1]
        trigger = t.record.trigger if isinstance(t.record, Turn) else "turn"
        kind = trigger if not facts or facts[0] in BY_TRIGGER else facts[0]
        kinds[kind] = kinds.get(kind, 0) + 1
    return {"first": first, "last": run[-1].ref if run else first, "count": len(run),
            "kinds": kinds}


def _turn_class(store: LedgerStore, seq: int, limit_pos: Any) -> tuple[str, list[str]]:
    """The retention class and facts of one turn, judged beside the turn before it."""
    limit = limit_pos if isinstance(limit_pos, int) else store.end_pos()
    priority, facts = stored_turn_class(store, seq, limit)
    return priority.label, facts


def _entry_budget(projector: Projector, p: Projection, ref: str, owner: str | None, status: str,
                  owner_seq: Callable[[str], int | None]) -> int | None:
    """The smallest budget at which the ref gets (fully) in, found by projecting: doubling from
    the plan's own estimate, then bisecting. Budget monotonicity (a property the engine tests)
    is what makes the bisection valid."""
    # Shrunk, or a record inside a turn: only its whole text counts (a clipped turn may cut the
    # record off). An item of its own: any form in the prompt.
    want = (("in_full", "excerpted") if status in _SHRUNK or owner not in (None, ref) else
            (*_SHOWN, "compacted", "ref_only"))

    def reached(budget: int) -> bool:
        q = projector.project(budget_tokens=budget, at=p.current_turn)
        return _status(q, ref, owner, owner_seq)[0] in want

    decision = next((d for d in p.decisions if ref in d.refs), None)
    lo = p.budget_tokens
    hi = decision.next_budget if decision and decision.next_budget and \
        decision.next_budget > lo else lo * 2
    for _ in range(_DOUBLINGS):
        if reached(hi):
            break
        lo, hi = hi, hi * 2
    else:
        return None
    # The plan's estimate is exact whenever the larger window brings nothing ahead of the item:
    # one projection just below it settles that, instead of a whole bisection.
    if hi - lo > 1 and not reached(hi - 1):
        return hi
    hi -= 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if reached(mid) else (mid, hi)
    return hi


def _explain_episode(projector: Projector, p: Projection, ref: str,
                     base: dict[str, Any]) -> Explanation:
    ep = next((e for e in p.manifest.episodes if e.ref == ref), None)
    if ep is None:
        # Archived but not recalled for this turn (recall ranks; the window excludes overlap).
        store = getattr(projector.episodes, "episodes", None)
        stored = store.get(ref.removeprefix("episode:")) if store is not None else None
        if stored is None:
            raise UnknownRefError(ref, hint="no such episode in this ledger")
        return Explanation(
            **base, status="omitted",
            summary=f"archived episode covering {stored.covers[0]}–{stored.covers[1]}, not "
                    "recalled for this turn",
            episode={"ref": ref, "covers": list(stored.covers), "score": None,
                     "representation": "not recalled"},
            to_get_in="recall ranks episodes by relevance to the current turn (BM25 over its "
                      "operator and task text, boosts for its work item, shared refs and open "
                      "items) among those ending before the recent window; a turn that shares "
                      "more of its terms or refs would recall it")
    shown = ep.representation != "omitted"
    d = next((x for x in p.decisions if x.key == ref), None)
    return Explanation(
        **base, reason=None if d is None else omission_reason(d),
        status="in_full" if ep.representation == "full" else (
            "omitted" if not shown else "clipped" if ep.representation == "clipped"
            else "compacted" if ep.representation == "compact" else "ref_only"),
        summary=f"recalled episode covering {ep.covers[0]}–{ep.covers[-1]}, score {ep.score}, "
                f"{ep.representation}",
        item=None if d is None else _item_dict(d),
        episode={"ref": ep.ref, "covers": list(ep.covers), "score": ep.score,
                 "representation": ep.representation},
        to_get_in=("nothing: it is in the prompt" if ep.representation == "full" else
                   f"its next form enters at a budget of ≥ {d.next_budget} tokens"
                   if d is not None and d.next_budget else "a higher recall score or budget"))


_STATUS_TEXT = {
    "in_full": "in the prompt",
    "excerpted": "in the prompt, long text excerpted (head and tail)",
    "clipped": "in the prompt, clipped to fit the budget",
    "clipped_out": "not shown: its item is clipped to fit the budget before it",
    "compacted": "compacted: its turn shows as a one-line digest",
    "ref_only": "reference only: the prompt names it without its content",
    "omitted": "left out for budget",
    "folded": "folded into a counted line with other low-value turns",
    "archived": "outside the recent window, archived in an episode",
    "outside_window": "outside the recent window: not a candidate",
    "not_a_candidate": "not a candidate for this projection",
}


def _summary(status: str, ref: str, record: dict[str, Any],
             item: dict[str, Any] | None) -> str:
    text = _STATUS_TEXT[status]
    if item is not None and status in ("compacted", "ref_only", "clipped_out") and \
            item["key"] != ref:
        text = f"not shown itself: its item {item['key']} is {item['form']}"
    if status in _SHOWN and record.get("trust") in ("untrusted_external", "model_output"):
        text += f", fenced as {record['trust'].replace('_', ' ')} text"
    elif status in _SHOWN and record.get("trust") == "trusted_operator":
        text += ", as the operator's own words"
    return text
