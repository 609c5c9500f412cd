"""Folding: what the prompt shows as one counted line instead of many.

Three kinds of fold, each decided from runtime facts only:

* a **run** of consecutive low or diagnostic turns (ticks, retries, duplicate wakes, repeated
  polls) becomes one fold line with its refs (:func:`segment`, :func:`fold_item`). A run never
  spans a turn shown on its own (the caller's ``skip``: the current turn, the anchor, a pinned
  turn), and never holds a high turn — so a fold never hides operator input or a state change;
* **repeated identical tool calls inside one turn** (same command, same result) show as the
  last call with a count
  (:func:`tool_repeats`);
* an **identical command re-run in a later turn** of the work item with the same result
  supersedes the earlier run's output (the execution frontier, :mod:`.frontier`); a re-run that
  printed something else does not fold the earlier run, which keeps the lines that differ.

"Identical" always means the same command *and* the same result (:func:`same_result`): a fold
never hides output that differs from the output shown for it (:func:`hidden_differences` counts
the folds that would).

Each function returns what it folded (a :class:`~holon_ctx.projection.model.FoldManifest`) to its
caller; nothing is collected on the side.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Final

from holon_ctx.ledger.records import Tool
from holon_ctx.ledger.store import StoredRecord
from holon_ctx.projection.formats import fold_line
from holon_ctx.projection.items import Item
from holon_ctx.projection.model import FoldManifest, Form, Priority, Section, TurnUnit

if TYPE_CHECKING:
    from holon_ctx.projection.render import Renderer

__all__ = ["BY_TRIGGER", "fold_item", "fold_kind", "hidden_differences", "repeat_folds", "result_key",
           "same_result",
           "segment", "tool_repeats"]

#: Facts a fold line counts under the turn's trigger instead: they say only "nothing happened"
#: (a tick, a retry), so the trigger is the more telling name ("scheduler_tick×40").
BY_TRIGGER: Final = frozenset({"noop_tick", "provider_retry", "provider_fallback",
                               "transport_recovery"})


def fold_kind(unit: TurnUnit, facts: Sequence[str]) -> str:
    """The name a fold line counts ``unit`` under: its first fact, or its trigger (BY_TRIGGER)."""
    fact = facts[0] if facts else unit.turn.trigger
    return unit.turn.trigger if fact in BY_TRIGGER else fact


def segment(units: Iterable[TurnUnit], *, skip: Callable[[TurnUnit], bool],
            folds: Callable[[TurnUnit], bool]) -> list[TurnUnit | list[TurnUnit]]:
    """``units`` (oldest first) as single turns and runs (lists) of turns that fold.

    A skipped turn is left out and ends the run before it; a turn that does not fold ends it too.
    """
    out: list[TurnUnit | list[TurnUnit]] = []
    run: list[TurnUnit] = []
    for unit in units:
        if skip(unit):
            if run:
                out.append(run)
                run = []
            continue
        if folds(unit):
            run.append(unit)
            continue
        if run:
            out.append(run)
            run = []
        out.append(unit)
    if run:
        out.append(run)
    return out


def fold_item(r: Renderer, run: Sequence[TurnUnit], facts: Callable[[TurnUnit], Sequence[str]],
              *, order: int, tier: int) -> tuple[Item, FoldManifest]:
    """The fold line of ``run`` (a HIGH item) and its manifest entry."""
    kinds: Counter[str] = Counter(fold_kind(unit, facts(unit)) for unit in run)
    first, last = run[0].ref, run[-1].ref
    span = first if first == last else f"{first}–{last}"
    summary = ", ".join(f"{k}×{n}" for k, n in sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0])))
    line = r.line(fold_line(span, summary, len(run)))
    fold = FoldManifest(first=first, last=last, count=len(run), kinds=dict(kinds),
                        refs=[u.ref for u in run])
    # A fold line is HIGH: one line of a few tokens says what a whole run was ("61 retries
    # and ticks between the request and now") and is all the model ever sees of it, so it
    # takes its place beside the other high turns' compact forms.
    item = Item(key=f"fold:{first}", section=Section.RECENT_TURNS, priority=Priority.HIGH,
                reasons=("folded_low_value",), order=order, position=(run[0].turn.seq,),
                forms={Form.COMPACT: r.rendered([line])}, refs=(), kind="fold", tier=tier)
    return item, fold


def tool_repeats(records: Iterable[StoredRecord]) -> dict[str, list[str]]:
    """Identical tool calls inside a turn: last call's ref → refs of the earlier identical calls.

    Identical means the same command with the same result (:func:`same_result`): a call that
    printed something else is shown, never folded into one that did not.
    """
    groups: dict[tuple[object, ...], list[str]] = {}
    for stored in records:
        rec = stored.record
        if isinstance(rec, Tool):
            groups.setdefault((*rec.run_key, *result_key(rec)), []).append(stored.ref)
    return {refs[-1]: refs[:-1] for refs in groups.values() if len(refs) > 1}


def repeat_folds(repeats: dict[str, list[str]]) -> list[FoldManifest]:
    """Manifest entries for ``last ref → earlier identical refs`` (in a turn or across turns)."""
    return [FoldManifest(first=earlier[0], last=last, count=len(earlier) + 1,
                         kinds={"repeated_tool_call": len(earlier) + 1}, refs=[*earlier, last])
            for last, earlier in repeats.items()]


def result_key(run: Tool) -> tuple[str, int | None, str, str | None]:
    """What a run's result is: status, exit code, printed output (and where its full text is)."""
    return run.status.value, run.exit_code, run.output, run.output_ref


def same_result(a: Tool, b: Tool) -> bool:
    """Whether two runs printed the same thing and ended the same way: only then may one stand
    for the other (the command alone says nothing of what it printed)."""
    return result_key(a) == result_key(b)


def hidden_differences(folds: Iterable[FoldManifest],
                       lookup: Callable[[str], StoredRecord | None]) -> list[tuple[str, str]]:
    """``(earlier, shown)`` for each tool run a repeated-call fold hides although its result
    differs from the run shown for it (the count issue 12 asks to bring to zero)."""
    out: list[tuple[str, str]] = []
    for fold in folds:
        if "repeated_tool_call" not in fold.kinds:
            continue
        shown = lookup(fold.last)
        if shown is None or not isinstance(shown.record, Tool):
            continue
        for ref in fold.refs[:-1]:
            earlier = lookup(ref)
            if earlier is not None and isinstance(earlier.record, Tool) \
                    and not same_result(earlier.record, shown.record):
                out.append((ref, fold.last))
    return out
