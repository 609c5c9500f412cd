"""Folding: what the prompt shows as one counted line instead of many.

Four kinds of fold, each decided from runtime facts only:

* a **run** of consecutive low or diagnostic turns (ticks, retries, duplicate wakes, repeated
  polls) becomes one fold line with its refs (:func:`segment`, :func:`fold_item`). A run never
  spans a turn shown on its own (the caller's ``skip``: the current turn, the anchor, a pinned
  turn), and never holds a high turn — so a fold never hides operator input or a state change;
* **repeated identical tool calls inside one turn** (same command, same result) show as the
  last call with a count
  (:func:`tool_repeats`);
* an **identical command re-run in a later turn** of the work item with the same result
  supersedes the earlier run's output (the execution frontier, :mod:`.frontier`); a re-run that
  printed something else does not fold the earlier run, which keeps the lines that differ;
* **consecutive identical lines inside one tool output** (a warning printed 40 times, a block
  of lines repeated as a whole) show once, followed by the runtime's note ``[line above ×40]``
  (:func:`fold_repeated_lines`, RFC 0016).

"Identical" always means the same command *and* the same result (:func:`same_result`): a fold
never hides output that differs from the output shown for it (:func:`hidden_differences` counts
the folds that would).

Each function returns what it folded (a :class:`~holon_ctx.projection.base.model.FoldManifest`) to its
caller; nothing is collected on the side.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Final, Protocol

from holon_ctx.ledger.records import Tool
from holon_ctx.ledger.store import StoredRecord
from holon_ctx.projection.base.formats import fold_line, neutralise_repeat_marks, repeat_mark
from holon_ctx.projection.base.items import Block, Item, Mark, Note, NoteKind, Rendered
from holon_ctx.projection.base.model import FoldManifest, Form, Priority, Section, TurnUnit

__all__ = ["BY_TRIGGER", "LineWriter", "fold_item", "fold_kind", "fold_repeated_lines",
           "fold_repeated_lines_noted", "hidden_differences", "repeat_folds", "result_key",
           "same_result", "segment", "tool_output_shown", "tool_output_text", "tool_repeats"]

#: Facts a fold line counts under the turn's trigger instead: they say only "nothing happened"
#: (a tick, a retry), so the trigger is the more telling name ("scheduler_tick×40").
BY_TRIGGER: Final = frozenset({"noop_tick", "provider_retry", "provider_fallback",
                               "transport_recovery"})


#: The longest group of lines that folds as a whole (a warning and the source line under it, a
#: three-line progress block): longer periods are rare and cost a quadratic scan.
REPEAT_PERIOD: Final = 4


def fold_repeated_lines(text: str) -> str:
    """``text`` with each run of consecutive identical lines (or identical groups of up to
    :data:`REPEAT_PERIOD` lines) shown once and followed by :func:`~.formats.repeat_mark`.

    Only exact copies fold (the whole line, spaces included), and only where the copies left out
    hold more characters than the note that counts them: two copies of a short line stay as
    they are. Blank lines never fold on their own. A function of ``text`` alone, so a record's
    rendered form never depends on what else is in the prompt (a session's history stays
    append-only). ``text`` must hold no note of its own (:func:`tool_output_text` neutralises
    quoted ones first).
    """
    return fold_repeated_lines_noted(text)[0]


def fold_repeated_lines_noted(text: str) -> tuple[str, tuple[Note, ...]]:
    """:func:`fold_repeated_lines`, and the notes it wrote (where each is, what it counts)."""
    lines = text.split("\n")
    n = len(lines)
    if not any(a == b for period in range(1, REPEAT_PERIOD + 1)
               for a, b in zip(lines, lines[period:], strict=False)):
        return text, ()  # no line repeats within a group's reach (most outputs): one pass each
    out: list[str] = []
    notes: list[Note] = []
    at = 0  # where the next line of ``out`` starts in the folded text
    i = 0
    while i < n:
        best: tuple[int, int, int] | None = None  # (saved characters, period, copies)
        for period in range(1, REPEAT_PERIOD + 1):
            group = lines[i:i + period]
            if len(group) < period:
                break
            if not any(line.strip() for line in group):
                continue
            copies = 1
            while lines[i + copies * period:i + (copies + 1) * period] == group:
                copies += 1
            if copies < 2:
                continue
            saved = (copies - 1) * (sum(len(line) for line in group) + period)
            if saved > len(repeat_mark(copies, period)) and (best is None or saved > best[0]):
                best = (saved, period, copies)
        if best is None:
            out.append(lines[i])
            at += len(lines[i]) + 1
            i += 1
            continue
        _, period, copies = best
        out.extend(lines[i:i + period])
        at += sum(len(line) + 1 for line in lines[i:i + period])
        mark = repeat_mark(copies, period)
        out.append(mark)
        notes.append(Note(NoteKind.REPEAT, at, at + len(mark) + 1, lines=period, times=copies))
        at += len(mark) + 1
        i += period * copies
    return ("\n".join(out), tuple(notes)) if notes else (text, ())


def tool_output_text(body: str) -> str:
    """A tool output's body as the prompt shows it: quoted repeat notes neutralised, then runs of
    identical lines folded (:func:`fold_repeated_lines`)."""
    return tool_output_shown(body)[0]


def tool_output_shown(body: str) -> tuple[str, tuple[Note, ...]]:
    """:func:`tool_output_text`, and the notes the fold wrote in it."""
    return fold_repeated_lines_noted(neutralise_repeat_marks(body))


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


class LineWriter(Protocol):
    """What a fold line needs of the renderer (:class:`~.render.Renderer` is one). Named by its
    shape, not imported: the renderer folds tool output with this module's functions, and the
    two importing each other was a cycle (RFC 0028, "What is left")."""

    def line(self, text: str, refs: Iterable[str] = (), mark: Mark | None = None) -> Block: ...

    def rendered(self, blocks: Iterable[Block]) -> Rendered: ...


def fold_item(r: LineWriter, run: Sequence[TurnUnit], facts: Callable[[TurnUnit], Sequence[str]],
              *, order: int, tier: int) -> tuple[Item, FoldManifest]:
    """The fold line of ``run`` (a HIGH item) and its manifest entry."""
    kinds: Counter[str] = Counter(fold_kind(unit, facts(unit)) for unit in run)
    first, last = run[0].ref, run[-1].ref
    span = first if first == last else f"{first}–{last}"
    summary = ", ".join(f"{k}×{n}" for k, n in sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0])))
    line = r.line(fold_line(span, summary, len(run)), mark=Mark.FOLD)
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
