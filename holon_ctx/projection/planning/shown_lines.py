"""Lines a tool output repeats from an output shown above it in the same prompt: shown once.

The same banner, warning or traceback header is printed by every run of many different commands
(a test runner's session header, a settings warning, Django's "System check identified no
issues"). RFC 0016: once the plan has chosen every item's form, each tool output shown whole
replaces a run of lines that an output shown *above it in this prompt* printed, in the same
order, by one note naming where they are: ``[4 lines as in tool:x12]``.

Why after the plan, and only backwards (RFC 0016, "show once"). A fold is only faithful when the
lines it stands for are visible: the output it names must be in the prompt with those very lines.
Which outputs are shown whole is known only once the plan has chosen, so the pass runs then, and
names only outputs above the one it folds (the model has read them by then). A body cut to a
limit (an excerpt, a clipped form) neither folds nor is named: its lines next to the cut are
partial. The pass only takes text out, so the prompt still fits; the tokens it frees go to the
newest steps when one of them was cut (as the planner gives them the room a clip leaves), never
to older text.

A session's history is append-only between re-plans (RFC 0010): records appended then keep their
own form (runs of identical lines inside one output folded, :func:`~.folding.fold_repeated_lines`)
and are folded against the rest at the next re-plan, which lays the whole history out again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import attrs

from holon_ctx.projection.base.formats import same_lines_mark
from holon_ctx.projection.base.items import Block, BlockKind, Item, Note, NoteKind, Rendered
from holon_ctx.projection.base.model import SECTION_ORDER, Form, Section
from holon_ctx.projection.planning.planner import Plan
from holon_ctx.tokens import TokenCounter

__all__ = ["MIN_FOLD_CHARS", "fold_shown_lines"]

#: Characters (newlines included) a run of lines must hold to fold: about twice what its note
#: costs, so a fold always saves more than it adds and short lines (``    try:``) stay.
MIN_FOLD_CHARS: Final = 80
#: Earlier places a line is looked up in (the latest first): a line printed by every run (a
#: blank-ish ``}``) would otherwise make the scan quadratic.
_CANDIDATES: Final = 8


def _tool_output(block: Block) -> bool:
    """A whole tool output's fenced body (not an excerpt, not a changed run's lines)."""
    return (block.kind is BlockKind.FENCED and not block.excerpt and bool(block.body)
            and (block.ref or "").startswith("tool:"))


def fold_shown_lines(chosen: Plan, items: Sequence[Item], counter: TokenCounter,
                     budget_tokens: int, verbatim: frozenset[str] = frozenset()) -> Plan:
    """``chosen`` with repeated output lines folded (see the module docstring).

    The newest evidence keeps every line (RFC 0023): nothing in the current input section, nor
    in an item whose key is in ``verbatim`` (the newest two steps' turns), is folded. Their
    lines are still shown lines an older output below could be folded against — none is below
    them but the current input itself, which folds nothing."""
    by_section: dict[Section, list[Item]] = {s: [] for s in SECTION_ORDER}
    for item in items:
        by_section[item.section].append(item)
    ordered = [item for section in SECTION_ORDER
               for item in sorted(by_section[section], key=lambda it: it.position)
               if item.key in chosen.chosen]
    # Shown lines so far: each output's lines, and where each line is (output, index).
    outputs: list[tuple[str, list[str]]] = []
    where: dict[str, list[tuple[int, int]]] = {}
    picks = dict(chosen.chosen)
    used = chosen.used_tokens
    for item in ordered:
        form, rendered = picks[item.key]
        if rendered.clipped:
            continue
        keep = item.section is Section.CURRENT_INPUT or item.key in verbatim
        new = _fold_rendered(rendered, keep, outputs, where, counter)
        if new is not None:
            used += new.tokens - rendered.tokens
            picks[item.key] = (form, new)
    if used == chosen.used_tokens:
        return chosen
    used = _grow_newest(ordered, picks, used, budget_tokens)
    return attrs.evolve(chosen, chosen=picks, used_tokens=used)


def _fold_rendered(rendered: Rendered, keep: bool, outputs: list[tuple[str, list[str]]],
                   where: dict[str, list[tuple[int, int]]],
                   counter: TokenCounter) -> Rendered | None:
    """``rendered`` with its tool outputs' lines folded against the outputs shown above it (None
    when nothing folds); its outputs join the shown ones either way (``keep``: folded or not)."""
    blocks: list[Block] = []
    changed = False
    for block in rendered.blocks:
        if not _tool_output(block):
            blocks.append(block)
            continue
        lines = block.body.split("\n")[:-1]  # block-safe: ends with one newline
        marks = _line_notes(lines, block.notes)
        kept, kept_marks = (lines, marks) if keep else _fold(lines, marks, outputs, where)
        if kept != lines:
            body = "\n".join(kept) + "\n"
            tokens = block.tokens - counter.count(block.body) + counter.count(body)
            block = attrs.evolve(block, body=body, tokens=tokens,
                                 notes=_placed(kept, kept_marks))
            changed = True
        blocks.append(block)
        index = len(outputs)
        outputs.append((block.ref or "", kept))
        for i, line in enumerate(kept):
            if line.strip() and kept_marks[i] is None:
                where.setdefault(line, []).append((index, i))
    if not changed:
        return None
    return Rendered(blocks=tuple(blocks), tokens=sum(b.tokens for b in blocks),
                    refs=rendered.refs)


def _grow_newest(ordered: list[Item], picks: dict[str, tuple[Form, Rendered]], used: int,
                 budget_tokens: int) -> int:
    """The room the folds freed goes to a newest step cut to fit (its fields raised as far as
    the room allows), as the planner gives it the room a clip leaves (RFC 0015); the tokens
    used after."""
    for item in ordered:
        form, rendered = picks[item.key]
        if (item.section is not Section.CURRENT_INPUT or form is not Form.FULL
                or item.grow is None or not any(b.excerpt for b in rendered.blocks)):
            continue
        grown = item.grow(rendered.tokens + budget_tokens - used)
        if (grown is not None and rendered.tokens < grown.tokens <= rendered.tokens
                + budget_tokens - used and set(rendered.refs) <= set(grown.refs)):
            used += grown.tokens - rendered.tokens
            picks[item.key] = (form, grown)
    return used


def _line_notes(lines: list[str], notes: tuple[Note, ...]) -> list[Note | None]:
    """For each of a body's ``lines``, the runtime's note it is (the block's data), or None."""
    if not notes:
        return [None] * len(lines)  # most outputs: nothing folded in them
    by_start = {n.start: n for n in notes}
    marks: list[Note | None] = []
    at = 0
    for line in lines:
        marks.append(by_start.get(at))
        at += len(line) + 1
    return marks


def _placed(lines: list[str], marks: list[Note | None]) -> tuple[Note, ...]:
    """The notes among ``lines`` (``marks``), each placed where its line is in their text."""
    notes: list[Note] = []
    at = 0
    for line, mark in zip(lines, marks, strict=True):
        if mark is not None:
            notes.append(attrs.evolve(mark, start=at, end=at + len(line) + 1))
        at += len(line) + 1
    return tuple(notes)


def _fold(lines: list[str], marks: list[Note | None], outputs: list[tuple[str, list[str]]],
          where: dict[str, list[tuple[int, int]]]) -> tuple[list[str], list[Note | None]]:
    """``lines`` with each run of lines an earlier output shows in the same order replaced by a
    note naming it (runs of at least :data:`MIN_FOLD_CHARS` characters), and which of the lines
    left are notes (``marks``: the runtime's notes among ``lines``; the new ones unplaced)."""
    out: list[str] = []
    out_marks: list[Note | None] = []
    j = 0
    while j < len(lines):
        best = (0, 0, -1)  # (characters, lines, output index)
        for index, start in reversed(where.get(lines[j], [])[-_CANDIDATES:]):
            theirs = outputs[index][1]
            n = 0
            # A run never takes in a note (``[line above ×12]``): "N lines as in REF" counts
            # lines the run printed, each shown in REF as it is.
            while (j + n < len(lines) and start + n < len(theirs)
                   and lines[j + n] == theirs[start + n] and marks[j + n] is None):
                n += 1
            chars = sum(len(line) + 1 for line in lines[j:j + n])
            if chars > best[0]:
                best = (chars, n, index)
        chars, n, index = best
        if chars >= MIN_FOLD_CHARS:
            out.append(same_lines_mark(n, outputs[index][0]))
            out_marks.append(Note(NoteKind.SAME, 0, 0, lines=n, as_in=outputs[index][0]))
            j += n
        else:
            out.append(lines[j])
            out_marks.append(marks[j])
            j += 1
    return out, out_marks
