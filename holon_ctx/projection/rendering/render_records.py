"""A record's blocks: what each kind of record shows in a turn, at the policy's caps.

Untrusted text never appears in a label line except sanitised single-line previews, and neither
do runtime ids; every runtime-supplied value in a label line (tool names, ids, paths, conditions,
objectives) goes through :func:`~holon_ctx.projection.base.formats.label_value`, which quotes it unless
it is plain words, so it cannot read as the prompt's structure (RFC 0027). The markup itself
is defined in :mod:`holon_ctx.projection.base.formats`; every limit comes from the
:class:`~holon_ctx.projection.base.policy.Policy`.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import re
from collections.abc import Callable
from typing import Final

import attrs

from holon_ctx.ledger.answers import closed_before
from holon_ctx.ledger.body import block_safe, record_body
from holon_ctx.ledger.records import (
    Brief,
    Environment,
    ExternalEvent,
    Message,
    MessageRole,
    Pin,
    Record,
    TaskResult,
    Tool,
    Trust,
    Wait,
    WorkItem,
)
from holon_ctx.ledger.state import WorkItemState
from holon_ctx.ledger.store import StoredRecord
from holon_ctx.projection.base.formats import (
    ALERT,
    FENCE_CLOSE,
    code_span,
    fence_open,
    label_value,
    neutralise_repeat_marks,
    operator_label,
    run_status,
)
from holon_ctx.projection.base.items import Block, BlockKind, Mark
from holon_ctx.projection.base.model import TurnUnit
from holon_ctx.projection.base.policy import TextLimits, TokenCaps
from holon_ctx.projection.rendering.digest import work_item_delta
from holon_ctx.projection.rendering.render_base import BlockRenderer, Extra

__all__ = ["RecordRenderer", "changed_lines"]

#: A line of tool output that says what went wrong or right: kept first when a changed run's
#: differing lines must be cut (the failure a later run fixed is what the model must see).
_KEY_WORDS: Final = (r"error|fail|exception|traceback|assert|expected|mismatch|not ok|warning|"
                     r"success|passed|\bok\b|✗|✘|✓")
_KEY_LINE: Final = re.compile(_KEY_WORDS, re.IGNORECASE)
#: :data:`_KEY_LINE`'s words as plain substrings of lowercased ASCII text, beside its one word
#: with word boundaries, "ok" (ASCII lowercases one character to one, so positions stay; the
#: marks ✗ ✘ ✓ cannot occur there).
_KEY_SUBSTRINGS: Final = ("error", "fail", "exception", "traceback", "assert", "expected",
                          "mismatch", "not ok", "warning", "success", "passed")
#: Characters of one differing line of a changed run (the rest is in its full text).
_CHANGED_LINE_CHARS: Final = 240


class RecordRenderer(BlockRenderer):
    """A record's blocks (label lines, fenced or trusted bodies), a tool run's call and status."""

    def record_blocks(self, stored: StoredRecord, repeats: dict[str, list[str]],
                      above: str = "", floor: int = 0, extra: Extra = (0, 0), *,
                      sole_call: bool = False, verbatim: bool = False) -> list[Block]:
        """``above``: the text shown before this record in its turn (a tool line does not repeat
        a command the model's message already shows); ``floor``: every token cap raised to at
        least this (the larger forms a turn offers when the budget has room, RFC 0012-densea);
        ``sole_call``: the record is its turn's only tool run (see :meth:`call_shown`);
        ``verbatim``: newest evidence, a tool output shown with no repeated-lines note
        (:meth:`_text`)."""
        rec: Record = stored.record
        ref = stored.ref
        caps, chars = self.raised_caps(floor), self.chars
        if extra != (0, 0):
            # The grow search's last step: each excerpt a few characters longer (turn_full_within).
            fenced: Callable[..., Block] = functools.partial(self.fenced, extra=extra)
            trusted: Callable[..., Block] = functools.partial(self.trusted, extra=extra)
        else:
            fenced, trusted = self.fenced, self.trusted
        if isinstance(rec, Tool):
            return self.tool_blocks(stored, rec, repeats.get(ref, []), above, caps, extra,
                                    sole_call=sole_call, verbatim=verbatim)
        # One block for any other record: one case per kind of record.
        block: Block
        match rec:
            case Message(role=MessageRole.OPERATOR):
                block = trusted(stored, operator_label(ref), caps.operator)
            case Message(role=MessageRole.SYSTEM) if rec.trust is Trust.RUNTIME_FACT:
                block = trusted(stored, f"runtime note {ref}:", caps.system)
            case Message(role=MessageRole.SYSTEM):
                # Not vouched for by the runtime (an imported or guessed trust): fenced like any
                # untrusted text, and said to be a system message — a bare message fence reads
                # as the assistant's words.
                block = fenced(stored, f"system message {ref} (not a runtime fact):",
                               caps.system)
            case Message():
                # The fence names the ref, the origin and the trust: no label line above it.
                block = fenced(stored, None, caps.assistant)
            case Brief():
                block = fenced(stored, f"brief {ref} ({rec.kind.value}, model-written):",
                               caps.brief)
            case TaskResult():
                label = _task_label(rec, ref, chars, self.named_wait(stored, rec.wait_id,
                                                                     "resolves"))
                block = (fenced(stored, label, caps.task) if rec.summary.strip()
                         else self.line(label, [ref]))
            case ExternalEvent():
                named = self.named_wait(stored, rec.wait_id, "matches")
                wait = f", {named}" if named else ""
                block = fenced(
                    stored, f"{ref} from {label_value(rec.source, chars.source)} (untrusted, not "
                    f"operator input{wait}):", caps.external)
            case WorkItem():
                block = self.work_item_change(stored, rec)
            case Wait():
                cond = f": {label_value(rec.condition, chars.wait_condition)}" if rec.condition else ""
                by = f" by {rec.resolved_by}" if rec.resolved_by else ""
                block = self.line(f"wait {label_value(rec.wait_id, chars.ident)} {rec.status.value}"
                                  f"{by}{cond} ({ref})", [ref])
            case Pin():
                block = self.line(f"operator pinned {rec.target} ({ref})", [ref])
            case Environment():
                block = self.line(f"environment updated ({ref})", [ref])
            case _:
                block = self.line(f"{ref}", [ref])
        return [block]

    def named_wait(self, stored: StoredRecord, wait_id: str | None, verb: str) -> str:
        """``matches wait W`` (``verb``) for a record naming a wait that was open; ``names wait W,
        already answered by REF`` or ``already closed`` when it was not (a late or repeated
        answer must not read as the one that resolved it); "" when it names none."""
        if wait_id is None:
            return ""
        ident = label_value(wait_id, self.chars.ident)
        store = self.store
        closed = "" if store is None else self.memo(
            ("closed_before", stored.ref),
            lambda: closed_before(store, stored.pos, wait_id) or "")
        return f"names wait {ident}, already {closed}" if closed else f"{verb} wait {ident}"

    def work_item_change(self, stored: StoredRecord, rec: WorkItem, *,
                         current_objective: bool = False,
                         current: WorkItemState | None = None) -> Block:
        """A work-item record's line: the fields it changed (see work_item_delta); one that set
        the ``current`` state's objective and status and nothing else says so in a few words
        (the work item section states them)."""
        if (current is not None and current_objective and rec.status is current.status
                and all(f is None for f in (rec.todos, rec.plan, rec.waits, rec.blocker,
                                            rec.completion_report))):
            return self.line(f"work item {label_value(rec.work_item_id, self.chars.ident)} set as "
                             f"it stands ({stored.ref})", [stored.ref])
        return self.line(f"work item {label_value(rec.work_item_id, self.chars.ident)} changed "
                         f"({stored.ref}): "
                         + work_item_delta(rec, self.chars, current_objective=current_objective),
                         [stored.ref])

    def tool_blocks(self, stored: StoredRecord, rec: Tool, folded: list[str],
                    above: str = "", caps: TokenCaps | None = None,
                    extra: Extra = (0, 0), *, sole_call: bool = False,
                    verbatim: bool = False) -> list[Block]:
        caps = caps or self.caps
        call = self.call_shown(rec, above, sole=sole_call)
        # The run's blocks depend on ``above`` only through ``call``: remembered, a turn's
        # forms (its grow and shrink searches, each re-plan of a growing turn) render each run
        # once, not once per form (RFC 0010, decision 7).
        return list(self.memo(("tool_blocks", stored.ref, tuple(folded), call, caps, extra,
                               verbatim),
                              lambda: tuple(self._tool_blocks(stored, rec, folded, call, caps,
                                                              extra, verbatim))))

    def _tool_blocks(self, stored: StoredRecord, rec: Tool, folded: list[str], call: str,
                     caps: TokenCaps, extra: Extra, verbatim: bool) -> list[Block]:
        side = f"; side effect {rec.side_effect.value}" if rec.side_effect and \
            rec.side_effect.value != "none" else ""
        repeat = f"; ×{len(folded) + 1} identical calls (earlier: {', '.join(folded)})" \
            if folded else ""
        # Only a failure or an unresolved side effect is an alert; a completed one is a fact.
        alert = ALERT if rec.failed or rec.side_effect_unresolved else ""
        facts = (f"{call + ' ' if call else ''}→ {run_status(rec.status.value, rec.exit_code)}"
                 f"{side}{self.files_written(rec)}{repeat}")
        if not rec.output.strip():
            return [self.line(f"{alert}{stored.ref} {facts}", [stored.ref], _mark(alert))]
        # The fence right below names the run's ref: the label does not repeat it (RFC 0015).
        block = self.fenced(stored, alert + facts, caps.tool_failed if rec.failed else caps.tool,
                            extra=extra, verbatim=verbatim)
        return [attrs.evolve(block, mark=Mark.ALERT) if alert else block]

    def tool_changed(self, stored: StoredRecord, nxt: StoredRecord,
                     above: str = "") -> tuple[Block, ...]:
        """An earlier run of a command whose next run printed something else: its status and
        exit code beside the next run's, and the lines of its output the next run did not print
        (at most :attr:`Policy.changed_lines`, key lines first), fenced, with its full text's ref."""
        assert isinstance(stored.record, Tool)
        call = self.call_shown(stored.record, above)
        return self.memo(("tool_changed", stored.ref, nxt.ref, call),
                         lambda: self._tool_changed(stored, nxt, call))

    def _tool_changed(self, stored: StoredRecord, nxt: StoredRecord,
                      call: str) -> tuple[Block, ...]:
        rec, later = stored.record, nxt.record
        assert isinstance(rec, Tool)
        assert isinstance(later, Tool)
        alert = ALERT if rec.failed or rec.side_effect_unresolved else ""
        facts = (f"{call} → {run_status(rec.status.value, rec.exit_code)}"
                 f"{self.files_written(rec)}; next run {nxt.ref} → "
                 f"{run_status(later.status.value, later.exit_code)}")
        # Quoted repeat notes neutralised as in the run's full form: a note in a fence is the
        # runtime's (RFC 0016).
        lines, total = changed_lines(neutralise_repeat_marks(record_body(rec)), record_body(later),
                                     self.policy.changed_lines)
        if not lines:
            # Every line it printed recurs in the next run (which printed more or fewer lines).
            return (self.line(f"{alert}{stored.ref} {facts}; output folded: each of its lines "
                              f"recurs in {nxt.ref}", [stored.ref], _mark(alert)),)
        # The fence below names the run's ref (where its full text is); the count says when
        # lines were left out.
        kept = f" ({len(lines)} of {total})" if len(lines) < total else ""
        head, head_tokens, quoted_tokens = self.label_head(
            f"{alert}{facts}; lines only in this run{kept}:",
            fence_open(stored.ref, rec.origin.value if rec.origin else "unknown",
                       rec.trust.value if rec.trust else "unknown"))
        body = block_safe("\n".join(lines))
        trust = rec.trust.value if rec.trust else "unknown"
        return (Block(head=head, body=body, tail=FENCE_CLOSE,
                      tokens=(head_tokens + self.counter.count(body)
                              + self.counter.count(FENCE_CLOSE)),
                      refs=(stored.ref,), clippable=True, kind=BlockKind.FENCED, trust=trust,
                      excerpt=True, quoted=quoted_tokens, mark=_mark(alert)),)

    def call_shown(self, rec: Tool, above: str, *, sole: bool = False) -> str:
        """:meth:`tool_call`, or the bare tool name when ``above`` (the text shown before it in
        its turn) holds the exact command: a command is said once (RFC 0012), and the bare name
        says it in one word (RFC 0015; a call with no arguments reads ``name ```` so the two
        never look alike) — or nothing at all when the run is its turn's ``sole`` one: the
        status line then reads ``→ ok``, the one command shown just above (RFC 0015, "the sole
        call")."""
        command = rec.args_preview.strip()
        if command and _shows_command(above, command):
            return "" if sole else label_value(rec.tool_name, self.chars.tool_name, line_start=True)
        return self.tool_call(rec)

    def shown_above(self, unit: TurnUnit, ref: str) -> str:
        """The message text shown before record ``ref`` in its turn at the policy's caps (what a
        stub standing for that record can point back to)."""
        above = []
        for stored in unit.records:
            if stored.ref == ref:
                break
            if isinstance(stored.record, Message) and not stored.record.by_operator:
                above.append(self._body(stored, self.caps.assistant)[0])
        return "".join(above)

    def tool_call(self, rec: Tool) -> str:
        """``name `args``` on one line."""
        # The name may start its line (a tool line opens with its call): RFC 0027.
        return (f"{label_value(rec.tool_name, self.chars.tool_name, line_start=True)} "
                f"{code_span(rec.args_preview, self.chars.args, marked=True)}")

    def files_written(self, rec: Tool) -> str:
        """``; wrote a, b`` (the first few files, then how many more), or ""."""
        if not rec.files_written:
            return ""
        limit = self.chars.files_on_line
        names = ", ".join(label_value(f, self.chars.path) for f in rec.files_written[:limit])
        more = len(rec.files_written) - limit
        # Never silently short: the count, and the work-refs list names every file written.
        return f"; wrote {names}" + (f" and {more} more (all in the files list of the work "
                                     "refs)" if more > 0 else "")


def _shows_command(above: str, command: str) -> bool:
    """``above`` holds ``command`` whole: not as the start of a longer one (``pytest -q`` in
    ``pytest -q tests/a.py``), nor glued to a word before it. A bare tool name, or none, says
    the command shown is the one that ran."""
    start = above.find(command)
    while start >= 0:
        end = start + len(command)
        if ((start == 0 or above[start - 1] in _COMMAND_BEFORE)
                and (end == len(above) or above[end] in _COMMAND_AFTER)):
            return True
        start = above.find(command, start + 1)
    return False


#: What may come right before a command quoted in a message (a line break, a code mark, a
#: prompt, a space: "run: make") and right after it (the end of its line or of its code span).
_COMMAND_BEFORE: Final = frozenset("\n`$ \t")
_COMMAND_AFTER: Final = frozenset("\n`")


def _task_label(rec: TaskResult, ref: str, chars: TextLimits, named_wait: str) -> str:
    """A task result's label line: the task, its status and what it says it did."""
    facts = [f"task {label_value(rec.task_id, chars.ident)} {rec.status.value}"]
    if rec.verification:
        facts.append("verification")
    if rec.spawned_by_turn_id:
        facts.append(f"spawned by turn:{rec.spawned_by_turn_id}")
    if named_wait:
        facts.append(named_wait)
    if rec.output_ref:
        facts.append(f"output {label_value(rec.output_ref, chars.output_ref)}")
    return f"{ref}: " + "; ".join(facts)


def changed_lines(earlier: str, later: str, limit: int) -> tuple[list[str], int]:
    """The distinct lines of ``earlier`` that ``later`` does not print (spaces at the ends
    aside), in order, at most ``limit`` of them, and how many there are in all.

    When they must be cut, key lines (errors, failures, assertions, verdicts) are kept first,
    then the earliest of the others: what a fix changed is in those lines. Each is cut to
    ``_CHANGED_LINE_CHARS`` characters.
    """
    theirs = {line.strip() for line in later.splitlines()}
    mine = list(dict.fromkeys(line.rstrip() for line in earlier.splitlines()
                              if line.strip() and line.strip() not in theirs))
    if len(mine) > limit:
        picked = set(_key_lines(mine, limit))
        picked.update([i for i in range(len(mine)) if i not in picked][:limit - len(picked)])
        shown = [mine[i] for i in sorted(picked)]
    else:
        shown = mine
    return ([line if len(line) <= _CHANGED_LINE_CHARS else line[:_CHANGED_LINE_CHARS - 1] + "…"
             for line in shown], len(mine))


def _key_lines(lines: list[str], limit: int) -> list[int]:
    """The first ``limit`` indices of ``lines`` that :data:`_KEY_LINE` matches. One search of
    the joined text per key line found, each from the next line's start: a changed run of a
    long output has thousands of lines, and a search per line was most of a re-plan's regex
    time (no pattern crosses a newline, which matches a line's ends as ``\\b`` does)."""
    text = "\n".join(lines)
    ends = list(itertools.accumulate(len(line) + 1 for line in lines))
    if text.isascii():
        return _key_lines_ascii(text.lower(), ends, limit)
    found: list[int] = []
    pos = 0
    while len(found) < limit and (match := _KEY_LINE.search(text, pos)) is not None:
        i = bisect.bisect_right(ends, match.start())
        found.append(i)
        pos = ends[i]
    return found


def _key_lines_ascii(low: str, ends: list[int], limit: int) -> list[int]:
    """:func:`_key_lines` of lowercased ASCII text: the same leftmost match from each line start
    (the smallest next occurrence of any word), found by substring search in C, each word
    searched again only once the line after its last occurrence is passed — a case-folding
    regex of fifteen alternatives tried at every character was ~1 ms an 8 KB output."""
    after: dict[str, int] = {word: low.find(word) for word in _KEY_SUBSTRINGS}
    after["ok"] = _ok_word(low, 0)
    found: list[int] = []
    while len(found) < limit:
        starts = [at for at in after.values() if at >= 0]
        if not starts:
            break
        i = bisect.bisect_right(ends, min(starts))
        found.append(i)
        pos = ends[i]
        for word, at in after.items():
            if 0 <= at < pos:
                after[word] = _ok_word(low, pos) if word == "ok" else low.find(word, pos)
    return found


def _ok_word(low: str, pos: int) -> int:
    """Where ``\\bok\\b`` first matches lowercased ASCII ``low`` from ``pos`` (-1: nowhere): a
    substring search with the boundaries checked by hand (a pattern that opens with ``\\b`` is
    tried at every character, ~200x slower)."""
    at = low.find("ok", pos)
    while at >= 0:
        end = at + 2
        if ((at == 0 or not _word_char(low[at - 1]))
                and (end == len(low) or not _word_char(low[end]))):
            return at
        at = low.find("ok", at + 1)
    return -1


def _word_char(char: str) -> bool:
    """``\\w`` of an ASCII character."""
    return char.isalnum() or char == "_"


def _mark(alert: str) -> Mark | None:
    """An alert's label says so in words (``ALERT``) and in its block's mark."""
    return Mark.ALERT if alert else None
