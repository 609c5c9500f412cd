"""Rendering: each item's forms as blocks of text with exact token costs.

Every block is additive (see :mod:`holon_ctx.tokens`): label lines never start blank and end with
``"\\n"``; bodies come from :func:`~holon_ctx.ledger.body.record_body` or are re-made block-safe.
So a form's cost is the sum of its blocks and the prompt's cost is the sum of its forms.

Trust is visible in the text itself. Operator words are labelled ``operator (trusted)`` and left
unfenced; runtime facts are plain label lines; everything written by tools, external parties,
tasks or models is fenced as ``<data ref=… origin=… trust=…>`` … ``</data>``, and
:func:`~holon_ctx.ledger.body.neutralise_fences` guarantees the text cannot close its fence.
Untrusted text never appears in a label line except sanitised single-line previews, and neither
do runtime ids; every runtime-supplied value in a label line (tool names, ids, paths, conditions,
objectives) goes through :func:`~holon_ctx.projection.formats.label_value`, which quotes it unless
it is plain words, so it cannot read as the prompt's structure (RFC 0027). The markup itself
is defined in :mod:`holon_ctx.projection.formats`; every limit comes from the
:class:`~holon_ctx.projection.policy.Policy`.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Final, TypeAlias, TypeVar

import attrs

from holon_ctx.ledger.body import block_safe, record_body, record_body_counted
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
from holon_ctx.ledger.state import WaitState, WorkItemState
from holon_ctx.ledger.store import StoredRecord
from holon_ctx.projection.digest import turn_digest, work_item_delta
from holon_ctx.projection.folding import tool_output_text, tool_repeats
from holon_ctx.projection.formats import (
    ALERT,
    FENCE_CLOSE,
    HEADING,
    code_span,
    excerpt_mark,
    fence_open,
    label_value,
    neutralise_repeat_marks,
    one_line,
    operator_label,
    run_status,
    split_quotes,
)
from holon_ctx.projection.framing import Framing, default_framing
from holon_ctx.projection.items import Block, BlockKind, Rendered
from holon_ctx.projection.model import Form, Priority, TurnUnit
from holon_ctx.projection.policy import Policy, TextLimits, TokenCaps
from holon_ctx.projection.text_blocks import text_blocks
from holon_ctx.projection.waits import Settled
from holon_ctx.tokens import TokenCounter, seam_tokens

__all__ = ["Instead", "Renderer", "changed_lines", "one_line"]

_T = TypeVar("_T")
#: What a turn's body shows in place of one of its records: a line (the record is elsewhere, or
#: folded), or blocks (a compact form of it, such as a changed re-run's differing lines).
Instead: TypeAlias = "str | tuple[Block, ...]"
#: Characters added to an excerpt's head and tail past what its cap gives (turn_full_within).
Extra: TypeAlias = tuple[int, int]
#: A line of tool output that says what went wrong or right: kept first when a changed run's
#: differing lines must be cut (the failure a later run fixed is what the model must see).
_KEY_LINE: Final = re.compile(
    r"error|fail|exception|traceback|assert|expected|mismatch|not ok|warning|success|passed|"
    r"\bok\b|✗|✘|✓", re.IGNORECASE)
#: Characters of one differing line of a changed run (the rest is in its full text).
_CHANGED_LINE_CHARS: Final = 240
#: Entries of a renderer's memo before it is dropped (a few thousand turns of forms).
_MEMO_ENTRIES = 16384
#: A cap floor no body reaches: every body whole.
_WHOLE = 1 << 62
#: Characters the grow search's last step adds to an excerpt's head or to its tail at most: more
#: than a token of cap adds to either.
_EXTRA_CHARS: Final = 6
#: The (head, tail) additions it tries, fewest characters first: one side at a time (both at once
#: used no room these do not, on the shared trajectories and the synthetic loops of the tests, and
#: cost a count of the excerpt each).
#: Characters the exact-fill search takes off an excerpt's head, one try each, and adds to its
#: tail at most (Renderer._fill).
_FILL_CUTS: Final = (0, 3, 7, 12, 18, 25, 33, 42)
_FILL_CHARS: Final = 160
_EXTRAS: Final = sorted([(h, 0) for h in range(1, _EXTRA_CHARS + 1)]
                        + [(0, t) for t in range(1, _EXTRA_CHARS + 1)],
                        key=lambda ht: (ht[0] + ht[1], ht))


class Renderer:
    def __init__(self, counter: TokenCounter, store_counter: str,
                 policy: Policy | None = None, framing: Framing | None = None) -> None:
        self.counter = counter
        #: How the provider frames a request of these blocks (RFC 0022; default OpenAI's).
        self.framing = framing if framing is not None else default_framing(counter)
        self.policy = policy or Policy()
        self.caps = self.policy.caps
        self.chars = self.policy.text
        # Cached counts are exact only when the store counted with this very counter.
        self.trust_cached = counter.identity == store_counter
        # Memo of bodies and turn forms across projections of one projector: records never
        # change and refs are unique, so a turn costs its rendering once, not once per turn
        # projected (per-step cost stays flat as an agent's history grows). Keys carry every
        # input of the result; the memo is dropped whole when it grows past _MEMO_ENTRIES.
        self._memo: dict[tuple[object, ...], object] = {}

    def memo(self, key: tuple[object, ...], make: Callable[[], _T]) -> _T:
        """``make()``, remembered under ``key`` (which must name every input of the result)."""
        hit = self._memo.get(key)
        if hit is not None:
            return hit  # type: ignore[return-value]
        if len(self._memo) >= _MEMO_ENTRIES:
            self._memo.clear()
        value = make()
        self._memo[key] = value
        return value

    # -- primitives --------------------------------------------------------------------
    def line(self, text: str, refs: Iterable[str] = ()) -> Block:
        """A label line (counted once per text: work refs, fold and relation lines recur every
        call)."""
        key = ("line", text, tuple(refs))
        hit = self._memo.get(key)
        if hit is not None:
            return hit  # type: ignore[return-value]
        return self.memo(key, lambda: self._line(text, key[2]))

    def _line(self, text: str, refs: tuple[str, ...]) -> Block:
        shown, frame = split_quotes(text if text.endswith("\n") else text + "\n")
        tokens = self.counter.count(shown)
        return Block(head=shown, tokens=tokens, refs=refs,
                     quoted=tokens - self.counter.count(frame) if frame != shown else 0)

    def label_head(self, label: str, fence: str) -> tuple[str, int, int]:
        """A label line above a fence's opening line: ``(head, tokens, quoted tokens)``."""
        shown, frame = split_quotes(f"{label}\n{fence}")
        tokens = self.counter.count(shown)
        return shown, tokens, (tokens - self.counter.count(frame) if frame != shown else 0)

    def _body(self, stored: StoredRecord, cap: int, extra: Extra = (0, 0),
              verbatim: bool = False) -> tuple[str, int, bool]:
        """The record body, or a head-and-tail excerpt when it exceeds ``cap`` tokens (``extra``:
        characters added to the excerpt's head and tail, finer than a token of cap; see
        turn_full_within; ``verbatim``: no repeated-lines note, see :meth:`_text`)."""
        return self.memo(("body", stored.ref, cap, extra, verbatim),
                         lambda: self._body_uncached(stored, cap, extra, verbatim))

    def body(self, stored: StoredRecord, cap: int) -> tuple[str, int, bool]:
        """The record's body as a form capped at ``cap`` tokens shows it: ``(text, tokens,
        excerpt)``."""
        return self._body(stored, cap)

    def _text(self, stored: StoredRecord, verbatim: bool = False) -> tuple[str, int]:
        """The record's body as the prompt shows it, and its token count: a tool output with
        its runs of identical lines folded (RFC 0016), any other body as it is.

        ``verbatim``: a tool output of the newest evidence (the current input, the newest two
        steps) keeps every line; only quoted notes are neutralised, so that a line the tool
        printed never reads as the runtime's note (RFC 0023)."""
        body, stale = record_body_counted(stored.record)
        if isinstance(stored.record, Tool):
            # Folded and counted once per record (the grow search asks for many caps).
            shown, tokens = self.memo(("tool_text", stored.ref, verbatim),
                                      lambda: _folded(body, self.counter, verbatim))
            if tokens >= 0:
                return shown, tokens
        return body, stored.tokens if self.trust_cached and not stale else self.counter.count(body)

    def _body_uncached(self, stored: StoredRecord, cap: int,
                       extra: Extra, verbatim: bool = False) -> tuple[str, int, bool]:
        body, tokens = self._text(stored, verbatim)
        if tokens <= cap:
            return body, tokens, False
        # Cut by characters first so a 275 KB output never goes through the tokenizer here;
        # the excerpt is then counted exactly.
        chars = max(80, int(len(body) * cap / tokens * 0.95))
        head_end = max(1, int(chars * 0.7) + extra[0])
        tail_start = len(body) - int(chars * 0.3) - extra[1]
        if tail_start <= head_end:
            # Head and tail meet (a long tail asked for by the exact-fill search): that is
            # the whole text, not an excerpt of it.
            return body, tokens, False
        head, tail = body[:head_end].rstrip(), body[tail_start:].lstrip()
        ref = getattr(stored.record, "output_ref", None) or stored.ref
        # "N+ omitted", measured: text cut in three never takes fewer tokens than it did whole,
        # so what is left out is at least the whole less the head and the tail shown (the cap
        # alone over-claimed by some 0.1% where the shown text is denser than the average). At
        # least one: head and tail do not meet.
        omitted = max(1, tokens - self.counter.count(head) - self.counter.count(tail))
        excerpt = block_safe(f"{head}\n{excerpt_mark(omitted, ref)}\n{tail}")
        excerpt_tokens = self.counter.count(excerpt)
        if excerpt_tokens >= tokens:
            # Just over the cap, the note costs what it would save: the body is shown whole.
            return body, tokens, False
        return excerpt, excerpt_tokens, True

    def fenced(self, stored: StoredRecord, label: str | None, cap: int, *,
               clippable: bool = True, extra: Extra = (0, 0), verbatim: bool = False) -> Block:
        """The record's body in a data fence, under ``label`` (None: the fence alone says what
        it is — its ref, origin and trust — and a label would repeat it)."""
        rec = stored.record
        body, body_tokens, excerpt = self._body(stored, cap, extra, verbatim)
        if not body:
            return self.line(f"{label or stored.ref + ':'} (empty)", [stored.ref])
        origin = rec.origin.value if rec.origin else "unknown"
        trust = rec.trust.value if rec.trust else "unknown"
        fence = fence_open(stored.ref, origin, trust)
        head, head_tokens, quoted_tokens = (self.label_head(label, fence) if label is not None
                                            else (fence, self.counter.count(fence), 0))
        # The body's cached count is its own; where the encoding joins the fence line to a body
        # starting with "/" (o200k), the seam corrects the sum to the block's exact count.
        return Block(head=head, body=body, tail=FENCE_CLOSE,
                     tokens=(head_tokens + body_tokens + self.counter.count(FENCE_CLOSE)
                             + seam_tokens(self.counter, head, body)),
                     refs=(stored.ref,), clippable=clippable, kind=BlockKind.FENCED, trust=trust,
                     excerpt=excerpt, quoted=quoted_tokens)

    def trusted(self, stored: StoredRecord, label: str, cap: int, extra: Extra = (0, 0)) -> Block:
        """Text the operator wrote or the runtime vouches for: labelled, not fenced."""
        body, body_tokens, excerpt = self._body(stored, cap, extra)
        head = label + "\n"
        trust = stored.record.trust
        return Block(head=head, body=body, tokens=(self.counter.count(head) + body_tokens
                                                   + seam_tokens(self.counter, head, body)),
                     refs=(stored.ref,), clippable=True,
                     kind=BlockKind.OPERATOR if trust is Trust.TRUSTED_OPERATOR else BlockKind.TRUSTED,
                     trust=trust.value if trust else None, excerpt=excerpt)

    def text_block(self, text: str, ref: str) -> Block:
        """Pre-rendered, block-safe text that carries its own labels and fences (episodes)."""
        body = text if text.endswith("\n") else text + "\n"
        # Keyed by the text itself: an episode recalled turn after turn is counted once.
        return self.memo(("text_block", ref, body), lambda: Block(
            head=body, tokens=self.counter.count(body), refs=(ref,), kind=BlockKind.TEXT))

    def text_blocks(self, text: str, ref: str) -> tuple[Block, ...]:
        """Pre-rendered text as blocks the clipper can cut (an episode's forms): each fenced
        excerpt one clippable block (its opening line, body and closing line), every other line
        a block of its own, so a form that does not fit whole keeps its first lines and a note
        naming its full text instead of dropping out. Lines that do not start with a visible
        character stay with the line before (token counts add only across such boundaries);
        should the counts not add up all the same, the text stays one block."""
        body = text if text.endswith("\n") else text + "\n"
        return self.memo(("text_blocks", ref, body), lambda: text_blocks(body, ref, self.counter))

    @staticmethod
    def rendered(blocks: Iterable[Block]) -> Rendered:
        blocks = tuple(blocks)
        refs: list[str] = []
        for b in blocks:
            refs.extend(r for r in b.refs if r not in refs)
        return Rendered(blocks=blocks, tokens=sum(b.tokens for b in blocks), refs=tuple(refs))

    # -- records -------------------------------------------------------------------------
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
        match rec:
            case Message(role=MessageRole.OPERATOR):
                return [trusted(stored, operator_label(ref) , caps.operator)]
            case Message(role=MessageRole.SYSTEM) if rec.trust is Trust.RUNTIME_FACT:
                return [trusted(stored, f"runtime note {ref}:", caps.system)]
            case Message(role=MessageRole.SYSTEM):
                # Not vouched for by the runtime (an imported or guessed trust): fenced like any
                # untrusted text, and said to be a system message — a bare message fence reads
                # as the assistant's words.
                return [fenced(stored, f"system message {ref} (not a runtime fact):",
                                    caps.system)]
            case Message():
                # The fence names the ref, the origin and the trust: no label line above it.
                return [fenced(stored, None, caps.assistant)]
            case Brief():
                return [fenced(stored, f"brief {ref} ({rec.kind.value}, model-written):",
                                    caps.brief)]
            case TaskResult():
                facts = [f"task {label_value(rec.task_id, chars.ident)} {rec.status.value}"]
                if rec.verification:
                    facts.append("verification")
                if rec.spawned_by_turn_id:
                    facts.append(f"spawned by turn:{rec.spawned_by_turn_id}")
                if rec.wait_id:
                    facts.append(f"resolves wait {label_value(rec.wait_id, chars.ident)}")
                if rec.output_ref:
                    facts.append(f"output {label_value(rec.output_ref, chars.output_ref)}")
                label = f"{ref}: " + "; ".join(facts)
                if not rec.summary.strip():
                    return [self.line(label, [ref])]
                return [fenced(stored, label, caps.task)]
            case Tool():
                return self.tool_blocks(stored, rec, repeats.get(ref, []), above, caps, extra,
                                        sole_call=sole_call, verbatim=verbatim)
            case ExternalEvent():
                wait = (f", matches wait {label_value(rec.wait_id, chars.ident)}" if rec.wait_id
                        else "")
                return [fenced(
                    stored, f"{ref} from {label_value(rec.source, chars.source)} (untrusted, not "
                    f"operator input{wait}):", caps.external)]
            case WorkItem():
                return [self.work_item_change(stored, rec)]
            case Wait():
                cond = f": {label_value(rec.condition, chars.wait_condition)}" if rec.condition else ""
                by = f" by {rec.resolved_by}" if rec.resolved_by else ""
                return [self.line(f"wait {label_value(rec.wait_id, chars.ident)} {rec.status.value}"
                                  f"{by}{cond} ({ref})", [ref])]
            case Pin():
                return [self.line(f"operator pinned {rec.target} ({ref})", [ref])]
            case Environment():
                return [self.line(f"environment updated ({ref})", [ref])]
            case _:
                return [self.line(f"{ref}", [ref])]

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
        side = f"; side effect {rec.side_effect.value}" if rec.side_effect and \
            rec.side_effect.value != "none" else ""
        repeat = f"; ×{len(folded) + 1} identical calls (earlier: {', '.join(folded)})" \
            if folded else ""
        # Only a failure or an unresolved side effect is an alert; a completed one is a fact.
        alert = ALERT if rec.failed or rec.side_effect_unresolved else ""
        call = self.call_shown(rec, above, sole=sole_call)
        facts = (f"{call + ' ' if call else ''}→ {run_status(rec.status.value, rec.exit_code)}"
                 f"{side}{self.files_written(rec)}{repeat}")
        if not rec.output.strip():
            return [self.line(f"{alert}{stored.ref} {facts}", [stored.ref])]
        # The fence right below names the run's ref: the label does not repeat it (RFC 0015).
        return [self.fenced(stored, alert + facts, caps.tool_failed if rec.failed else caps.tool,
                            extra=extra, verbatim=verbatim)]

    def raised_caps(self, floor: int) -> TokenCaps:
        """The policy's token caps, each raised to at least ``floor`` (0: the caps as they are)."""
        if floor <= 0:
            return self.caps
        return self.memo(("raised_caps", floor), lambda: TokenCaps(**{
            name: max(value, floor) for name, value in attrs.asdict(self.caps).items()}))

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
                              f"recurs in {nxt.ref}", [stored.ref]),)
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
                      excerpt=True, quoted=quoted_tokens),)

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

    # -- turns ---------------------------------------------------------------------------
    def turn_head(self, unit: TurnUnit, *, priority: Priority, reasons: tuple[str, ...],
                  other_work_item: bool, chain: str | None, loop_step: bool = False,
                  anchor_stated: bool = False) -> str:
        """The turn's ref, its trigger and what the model needs to place it (RFC 0012-densea).

        Why the turn is kept (its class, reasons and chain rule) is in the manifest, not here:
        repeated on every heading it cost more than the content it introduced. The heading says
        only what changes how the turn reads: its outcome, that it belongs to another work item
        (not current-chain evidence), and the turn it continues — unless it is a ``loop_step``,
        a step of the loop the current turn is in (same trigger, same anchor), whose trigger and
        anchor the current turn's heading and the relation line state once for all of them; the
        current turn's own anchor is left to the relation line right above it when that line
        names it (``anchor_stated``).
        """
        del priority, reasons, chain  # the manifest's, per item (see the docstring)
        t = unit.turn
        parts = [f"turn:{t.id}"] if loop_step else [f"turn:{t.id}", t.trigger]
        if t.anchor_turn_id and not loop_step and not anchor_stated:
            parts.append(f"continues turn:{t.anchor_turn_id}")
        if t.outcome:
            parts.append(f"outcome {t.outcome.value}")
        if other_work_item:
            if t.work_item_id:
                parts.append(f"work item {label_value(t.work_item_id, self.chars.ident)}")
            parts.append("other work item, not current-chain evidence")
        return " · ".join(parts)

    def turn_full(self, unit: TurnUnit, head: str,
                  elsewhere: Mapping[str, Instead] | None = None, floor: int = 0,
                  extra: Extra = (0, 0), *, verbatim: bool = False) -> Rendered:
        """The turn's heading, then its body (:meth:`turn_body`); an empty ``head``: the body
        alone (a loop step among the recent turns, whose first fence names it; see
        turns.TurnItems)."""
        key = ("full", unit.ref, head, tuple(r.ref for r in unit.records),
               tuple(sorted(elsewhere.items())) if elsewhere else (), floor, extra, verbatim)
        return self.memo(key, lambda: self.rendered(self._headed(unit, head, self.turn_body(
            unit, elsewhere, floor, extra, verbatim=verbatim))))

    def _headed(self, unit: TurnUnit, head: str, body: tuple[Block, ...]) -> list[Block]:
        if head:
            return [self.line(f"{HEADING}{head}", [unit.ref]), *body]
        if not body:
            return []
        # No heading: the first block opens the turn and shows its ref too (a clipped form, and
        # every larger one, still shows the turn its compact line named).
        first = attrs.evolve(body[0], refs=(*body[0].refs, unit.ref))
        return [first, *body[1:]]

    def turn_body(self, unit: TurnUnit, elsewhere: Mapping[str, Instead] | None = None,
                  floor: int = 0, extra: Extra = (0, 0), *,
                  verbatim: bool = False) -> tuple[Block, ...]:
        """The turn's records as blocks; a record in ``elsewhere`` is one line saying where it is
        (or the blocks given for it: a compact form).

        A function of the turn's records, ``elsewhere``, ``floor`` (each token cap raised to
        at least this) and ``verbatim`` (newest evidence: tool outputs with no repeated-lines
        note, RFC 0023) only: what changes as a turn ages (its class, reasons and chain label)
        is in the manifest, never in the body.
        """
        key = ("turn_body", unit.ref, tuple(r.ref for r in unit.records),
               tuple(sorted(elsewhere.items())) if elsewhere else (), floor, extra, verbatim)
        return self.memo(key, lambda: self._turn_body(unit, elsewhere, floor, extra, verbatim))

    def turn_full_within(self, unit: TurnUnit, head: str, elsewhere: Mapping[str, Instead] | None,
                         limit: int | None, *, exact: bool = False,
                         verbatim: bool = False) -> Rendered | None:
        """The turn's full form with its token caps raised: every body whole (``limit`` None),
        or the largest uniform raise whose form fits ``limit`` tokens (None when even the
        policy's caps do not fit). Excerpts keep their head and tail, so a field cut to fit
        still shows how its output ended."""
        whole = self.turn_full(unit, head, elsewhere, floor=_WHOLE, verbatim=verbatim)
        if limit is None or whole.tokens <= limit:
            return whole
        # Binary search on the floor (a form's size grows with it); only the one step that does
        # not fit a binding budget gets here, once per projection.
        lo, hi = 0, whole.tokens
        best: Rendered | None = None
        while lo < hi:
            mid = (lo + hi + 1) // 2
            form = self.turn_full(unit, head, elsewhere, floor=mid, verbatim=verbatim)
            if form.tokens <= limit:
                best, lo = form, mid
            else:
                hi = mid - 1
        if best is None or best.tokens >= limit or lo <= 0:
            return best
        # A token of cap is some four characters of excerpt, and the token count of a cut text
        # moves in steps of up to three: the room left below the next floor can be one or two
        # tokens no floor uses (a newest step cut with room, RFC 0016). The last step is by
        # characters: each excerpt's head or tail up to _EXTRA_CHARS longer, the largest form
        # that fits (the fewest characters added among equals).
        for h, t in _EXTRAS:
            form = self.turn_full(unit, head, elsewhere, floor=lo, extra=(h, t),
                                  verbatim=verbatim)
            if best.tokens < form.tokens <= limit:
                best = form
                if form.tokens == limit:
                    return best
        # The wider search costs tens of forms: only for a newest step (``exact``), which must
        # never be left cut while a token is unused (issue 12); an older step's last token or
        # two stay unused.
        return (self._fill(unit, head, elsewhere, lo, best, limit, verbatim) if exact
                else best)

    def _fill(self, unit: TurnUnit, head: str, elsewhere: Mapping[str, Instead] | None,
              floor: int, best: Rendered, limit: int, verbatim: bool = False) -> Rendered:
        """The form that fills ``limit`` exactly, when a few characters more at ``floor`` do
        not: an excerpt's count can skip the one value that fits (a multi-character token
        enters whole). An excerpt's head a few characters shorter moves every token boundary
        of its tail, so a longer tail lands on other counts: for each of a few head cuts, a
        binary search over the tail's added characters. Bounded (``_FILL_CUTS`` times a search
        over ``_FILL_CHARS``), and only for the one step a binding budget cuts."""
        for cut in _FILL_CUTS:
            low, high = 0, _FILL_CHARS
            while low < high:
                mid = (low + high + 1) // 2
                form = self.turn_full(unit, head, elsewhere, floor=floor, extra=(-cut, mid),
                                      verbatim=verbatim)
                if form.tokens <= limit:
                    low = mid
                    if form.tokens > best.tokens:
                        best = form
                        if form.tokens == limit:
                            return best
                else:
                    high = mid - 1
        return best

    def _turn_body(self, unit: TurnUnit, elsewhere: Mapping[str, Instead] | None,
                   floor: int, extra: Extra = (0, 0),
                   verbatim: bool = False) -> tuple[Block, ...]:
        repeats = tool_repeats(unit.records)
        hidden = {r for refs in repeats.values() for r in refs}
        sole = sum(1 for r in unit.records if isinstance(r.record, Tool)) == 1
        blocks: list[Block] = []
        if unit.turn.label:
            blocks.append(self.line(f"trigger: {label_value(unit.turn.label, self.chars.trigger_label)}"))
        # The operator's words come first, then what happened: a clipped full form then always
        # keeps them (and so every ref its pinned compact form showed, which the planner needs
        # to accept the clip without losing a ref).
        ordered = sorted(unit.records, key=lambda r: not (
            isinstance(r.record, Message) and r.record.by_operator))
        for stored in ordered:
            if stored.ref in hidden:
                continue
            if elsewhere and stored.ref in elsewhere:
                instead = elsewhere[stored.ref]
                if isinstance(instead, str):
                    blocks.append(self.line(f"{stored.ref}: {instead}"))
                else:
                    blocks.extend(instead)
                continue
            blocks.extend(self.record_blocks(
                stored, repeats, "".join(b.body for b in blocks if b.kind is BlockKind.FENCED),
                floor, extra, sole_call=sole, verbatim=verbatim))
        return tuple(blocks)

    def turn_compact_verbatim(self, unit: TurnUnit, head: str) -> Rendered:
        """One line of facts, then each operator message in full (capped like FULL)."""
        blocks = [self.line(f"- {head} · {turn_digest(unit, self.chars, quote_operator=False)}",
                            [unit.ref])]
        for stored in unit.records:
            rec = stored.record
            if isinstance(rec, Message) and rec.by_operator:
                blocks.append(self.trusted(stored, operator_label(stored.ref), self.caps.operator))
        return self.rendered(blocks)

    def turn_compact(self, unit: TurnUnit, head: str) -> Rendered:
        # A bare ref (a loop step's head) needs no separator before the digest: the line reads
        # ``- turn:t8 bash `ls` → ok`` (RFC 0015).
        sep = " " if " " not in head else " · "
        key = ("compact", unit.ref, head, tuple(r.ref for r in unit.records))
        return self.memo(key, lambda: self.rendered(
            [self.line(f"- {head}{sep}{turn_digest(unit, self.chars)}", [unit.ref])]))

    def turn_ref(self, unit: TurnUnit) -> Rendered:
        t = unit.turn
        return self.rendered([self.line(f"- turn:{t.id} {t.trigger} (ref only)", [unit.ref])])

    # -- work item -----------------------------------------------------------------------
    def work_item(self, state: WorkItemState, waits: list[WaitState],
                  spoken_in: str | None = None,
                  settled: Sequence[Settled] = ()) -> dict[Form, Rendered]:
        """The work item's forms; ``spoken_in``: the ref of an operator message the prompt shows
        whole that holds the objective word for word (named instead: the text is said once);
        ``settled``: waits a task result or an event answered though no wait record closed them,
        each stated resolved with the record's ref in every form (the record itself may be left
        out for room, and an older turn's ``wait … open`` line must not read as current)."""
        ref = state.ref
        c = self.chars
        if spoken_in is not None:
            objective = self.line(f"objective: the operator's words in {spoken_in} (below)")
            compact_objective = full_objective = objective
        else:
            compact_objective = self.line(
                f"objective: {label_value(state.objective, c.objective_compact, marked=True)}")
            full_objective = self.line(
                f"objective: {label_value(state.objective, c.objective_full, marked=True)}")
        done = sum(1 for t in state.todos if t.done)
        head = (f"work item {label_value(state.work_item_id, c.ident)} · status "
                f"{state.status.value} · {ref}")
        ref_form = self.rendered([self.line(head, [ref])])
        compact = [self.line(head, [ref]), compact_objective]
        nxt = next((t.text for t in state.todos if not t.done), None)
        compact.append(self.line(f"todos: {done}/{len(state.todos)} done"
                                 + (f"; next: {label_value(nxt, c.next_todo)}" if nxt else "")))
        for w in waits:
            compact.append(self.line(f"waiting on {label_value(w.wait_id, c.ident)}: "
                                     f"{label_value(w.condition, c.wait_condition_compact)}"))
        answered = [self.line(settled_line(s, c)) for s in settled]
        compact.extend(answered)
        if state.blocker:
            compact.append(self.line(f"blocker: {label_value(state.blocker, c.blocker_compact)}"))
        full = [self.line(head, [ref]), full_objective]
        if state.plan:
            full.append(self.line("plan:"))
            full.extend(self.line(f"{i}. {label_value(p, c.plan_step)}")
                        for i, p in enumerate(state.plan, 1))
        if state.todos:
            full.append(self.line("todos:"))
            full.extend(self.line(f"- [{'x' if t.done else ' '}] {label_value(t.text, c.todo)}")
                        for t in state.todos)
        for w in waits:
            full.append(self.line(f"waiting on {label_value(w.wait_id, c.ident)} ({w.opened_ref}): "
                                  f"{label_value(w.condition, c.wait_condition_full)}"))
        full.extend(answered)
        if state.blocker:
            full.append(self.line(f"blocker: {label_value(state.blocker, c.blocker_full)}"))
        if state.completion_report:
            full.append(self.line("completion report: "
                                  f"{label_value(state.completion_report, c.completion_report)}"))
        return {Form.REF: ref_form, Form.COMPACT: self.rendered(compact),
                Form.FULL: self.rendered(full)}


def settled_line(settled: Settled, chars: TextLimits) -> str:
    """``wait task-1 resolved by task_result:r9 (opened wait:w3)``: a wait answered by a record
    though no wait record closed it (RFC 0023)."""
    w = settled.wait
    return (f"wait {label_value(w.wait_id, chars.ident)} resolved by {settled.by} "
            f"(opened {w.opened_ref})")


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


def _folded(body: str, counter: TokenCounter, verbatim: bool = False) -> tuple[str, int]:
    """A tool output's body as the prompt shows it (:func:`~.folding.tool_output_text`; with
    ``verbatim``, quoted notes neutralised and no line folded) and its count; ``("", -1)`` when
    that is the body itself (whose count the store cached)."""
    shown = neutralise_repeat_marks(body) if verbatim else tool_output_text(body)
    return ("", -1) if shown == body else (shown, counter.count(shown))


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
    found: list[int] = []
    pos = 0
    while len(found) < limit and (match := _KEY_LINE.search(text, pos)) is not None:
        i = bisect.bisect_right(ends, match.start())
        found.append(i)
        pos = ends[i]
    return found
