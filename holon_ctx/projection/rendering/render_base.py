"""Rendering's primitives: label lines, record bodies and their excerpts, fenced and trusted
blocks, each with its exact token count, and the memo that makes a form cost its rendering once.

Every block is additive (see :mod:`holon_ctx.tokens`): label lines never start blank and end with
``"\\n"``; bodies come from :func:`~holon_ctx.ledger.body.record_body` or are re-made block-safe.
So a form's cost is the sum of its blocks and the prompt's cost is the sum of its forms.

Trust is visible in the text itself. Operator words are labelled ``operator (trusted)`` and left
unfenced; runtime facts are plain label lines; everything written by tools, external parties,
tasks or models is fenced as ``<data ref=… origin=… trust=…>`` … ``</data>``, and
:func:`~holon_ctx.ledger.body.neutralise_fences` guarantees the text cannot close its fence.
Each block says what it is (kind, trust, refs) when it is made, so no reader parses it back.

The renderer is three classes, one per concern, each a module: these primitives
(:class:`BlockRenderer`), a record's blocks (:class:`~.render_records.RecordRenderer`), and a
turn's and the work item's forms (:class:`~.render.Renderer`, the one the projection uses).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeAlias, TypeVar

import attrs

from holon_ctx.ledger.body import block_safe, record_body_counted
from holon_ctx.ledger.records import Tool, Trust
from holon_ctx.ledger.store import LedgerStore, StoredRecord
from holon_ctx.projection.base.formats import (
    FENCE_CLOSE,
    HEADING,
    excerpt_mark,
    fence_open,
    neutralise_repeat_marks,
    split_quotes,
)
from holon_ctx.projection.base.framing import Framing, default_framing
from holon_ctx.projection.base.items import Block, BlockKind, Mark, Note, NoteKind, Rendered
from holon_ctx.projection.base.policy import Policy, TokenCaps
from holon_ctx.projection.rendering.folding import tool_output_shown
from holon_ctx.tokens import TiktokenCounter, TokenCounter, seam_tokens

__all__ = ["BlockRenderer", "Extra"]

_T = TypeVar("_T")
#: Characters added to an excerpt's head and tail past what its cap gives (turn_full_within).
Extra: TypeAlias = tuple[int, int]
#: A body as a form shows it: ``(text, tokens, excerpt, notes)`` (see BlockRenderer._body).
Shown: TypeAlias = tuple[str, int, bool, tuple[Note, ...]]
#: Entries of a renderer's memo before it is dropped (a few thousand turns of forms).
_MEMO_ENTRIES = 16384


class BlockRenderer:
    """Blocks of one record's text, counted, and the memo of a projector's renderings."""

    def __init__(self, counter: TokenCounter, store_counter: str,
                 policy: Policy | None = None, framing: Framing | None = None, *,
                 records_of: BlockRenderer | None = None,
                 store: LedgerStore | None = None) -> None:
        self.counter = counter
        #: The ledger the records come from, asked whether a wait a record names was still open
        #: (``closed_before``); None (a renderer of loose records) labels as the record says.
        self.store: LedgerStore | None = (store if store is not None or records_of is None
                                          else records_of.store)
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
        # A record's shown text and its capped bodies depend on the record, the cap asked for
        # and the counter alone — not on this renderer's caps — so renderers that differ only
        # in their caps (a session's history and its entry renderer) keep them in one memo:
        # a re-plan then finds the text, its folding and its count that the walk already made
        # when the record arrived, instead of tokenizing every new tool output again.
        shares = (records_of is not None and records_of.counter is counter
                  and records_of.trust_cached == self.trust_cached)
        self._records: dict[tuple[object, ...], object] = (
            records_of._records if records_of is not None and shares else {})

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

    def _record_memo(self, key: tuple[object, ...], make: Callable[[], _T]) -> _T:
        """:meth:`memo` for what depends on a record, a cap and the counter only (shared with
        the renderers this one was made beside; see ``records_of``)."""
        table = self._records
        hit = table.get(key)
        if hit is not None:
            return hit  # type: ignore[return-value]
        if len(table) >= _MEMO_ENTRIES:
            table.clear()
        value = make()
        table[key] = value
        return value

    # -- primitives --------------------------------------------------------------------
    def line(self, text: str, refs: Iterable[str] = (), mark: Mark | None = None) -> Block:
        """A label line (counted once per text: work refs, fold and relation lines recur every
        call); ``mark``: what it stands out as (a fold line, the relation line, an alert)."""
        key = ("line", text, tuple(refs), mark)
        hit = self._memo.get(key)
        if hit is not None:
            return hit  # type: ignore[return-value]
        return self.memo(key, lambda: self._line(text, key[2], mark))

    def _line(self, text: str, refs: tuple[str, ...], mark: Mark | None) -> Block:
        shown, frame = split_quotes(text if text.endswith("\n") else text + "\n")
        tokens = self.counter.count(shown)
        return Block(head=shown, tokens=tokens, refs=refs, mark=mark,
                     quoted=tokens - self.counter.count(frame) if frame != shown else 0)

    def heading(self, text: str, refs: Iterable[str] = ()) -> Block:
        """A heading line (``### text``): a label line that says it is one (readers such as
        the provider formats tell it by its kind, never by its text)."""
        key = ("heading", text, tuple(refs))
        return self.memo(key, lambda: attrs.evolve(self.line(HEADING + text, key[2]),
                                                    kind=BlockKind.HEADING, mark=Mark.HEADING))

    def label_head(self, label: str, fence: str) -> tuple[str, int, int]:
        """A label line above a fence's opening line: ``(head, tokens, quoted tokens)``."""
        shown, frame = split_quotes(f"{label}\n{fence}")
        tokens = self.counter.count(shown)
        return shown, tokens, (tokens - self.counter.count(frame) if frame != shown else 0)

    def _body(self, stored: StoredRecord, cap: int, extra: Extra = (0, 0),
              verbatim: bool = False) -> Shown:
        """The record body, or a head-and-tail excerpt when it exceeds ``cap`` tokens (``extra``:
        characters added to the excerpt's head and tail, finer than a token of cap; see
        turn_full_within; ``verbatim``: no repeated-lines note, see :meth:`_text`): ``(text,
        tokens, excerpt, notes)``, the notes being the runtime's lines in the text."""
        return self._record_memo(("body", stored.ref, cap, extra, verbatim),
                                 lambda: self._body_uncached(stored, cap, extra, verbatim))

    def body(self, stored: StoredRecord, cap: int) -> tuple[str, int, bool]:
        """The record's body as a form capped at ``cap`` tokens shows it: ``(text, tokens,
        excerpt)``."""
        return self._body(stored, cap)[:3]

    def _text(self, stored: StoredRecord,
              verbatim: bool = False) -> tuple[str, int, tuple[Note, ...]]:
        """The record's body as the prompt shows it, and its token count: a tool output with
        its runs of identical lines folded (RFC 0016), any other body as it is.

        ``verbatim``: a tool output of the newest evidence (the current input, the newest two
        steps) keeps every line; only quoted notes are neutralised, so that a line the tool
        printed never reads as the runtime's note (RFC 0023). The notes the fold wrote come
        with it."""
        body, stale = record_body_counted(stored.record)
        if isinstance(stored.record, Tool):
            # Folded and counted once per record (the grow search asks for many caps).
            shown, tokens, notes = self._record_memo(("tool_text", stored.ref, verbatim),
                                                     lambda: _folded(body, self.counter, verbatim))
            if tokens >= 0:
                return shown, tokens, notes
        return body, (stored.tokens if self.trust_cached and not stale
                      else self.counter.count(body)), ()

    def _body_uncached(self, stored: StoredRecord, cap: int,
                       extra: Extra, verbatim: bool = False) -> Shown:
        body, tokens, notes = self._text(stored, verbatim)
        if tokens <= cap:
            return body, tokens, False, notes
        # Cut by characters first so a 275 KB output never goes through the tokenizer here;
        # the excerpt is then counted exactly.
        chars = max(80, int(len(body) * cap / tokens * 0.95))
        head_end = max(1, int(chars * 0.7) + extra[0])
        tail_start = len(body) - int(chars * 0.3) - extra[1]
        if tail_start <= head_end:
            # Head and tail meet (a long tail asked for by the exact-fill search): that is
            # the whole text, not an excerpt of it.
            return body, tokens, False, notes
        head, tail = body[:head_end].rstrip(), body[tail_start:].lstrip()
        ref = getattr(stored.record, "output_ref", None) or stored.ref
        # "N+ omitted", measured: text cut in three never takes fewer tokens than it did whole,
        # so what is left out is at least the whole less the head and the tail shown (the cap
        # alone over-claimed by some 0.1% where the shown text is denser than the average). At
        # least one: head and tail do not meet.
        head_tokens, tail_tokens = self.counter.count(head), self.counter.count(tail)
        omitted = max(1, tokens - head_tokens - tail_tokens)
        mark = excerpt_mark(omitted, ref)
        joined = f"{head}\n{mark}\n{tail}"
        excerpt = block_safe(joined)
        excerpt_tokens = (self._joined_tokens(head, head_tokens, mark, tail, tail_tokens)
                          if excerpt == joined else None)
        if excerpt_tokens is None:
            excerpt_tokens = self.counter.count(excerpt)
        if excerpt_tokens >= tokens:
            # Just over the cap, the note costs what it would save: the body is shown whole.
            return body, tokens, False, notes
        return excerpt, excerpt_tokens, True, _excerpt_notes(notes, len(head), len(mark),
                                                             len(body) - len(tail))

    def _joined_tokens(self, head: str, head_tokens: int, mark: str, tail: str,
                       tail_tokens: int) -> int | None:
        """The count of ``head + "\\n" + mark + "\\n" + tail`` (an excerpt block_safe leaves
        as it is) from the counts of its head and tail, or None when it must be measured.

        The head and the tail were just counted for the mark's figure; counting the excerpt
        again encoded them a second time (the largest of a new excerpt's three encodings; a
        re-plan makes one per tool output new to it, and the clipper more). The mark line
        starts with "…" and the tail with no blank, so the lines add up by the additivity
        contract (:mod:`holon_ctx.tokens`; o200k's seam measured where a line starts with
        "/"); the head's own newline is priced by
        :meth:`~holon_ctx.tokens.TiktokenCounter.count_line_ended` (None for a head that ends
        in punctuation: measured). Other counters make no such promise: measured."""
        counter = self.counter
        if not isinstance(counter, TiktokenCounter) or not head or tail[:1].isspace():
            return None
        head_line = counter.count_line_ended(head, head_tokens)
        if head_line is None:
            return None
        mark_line = f"{mark}\n"
        return (head_line + counter.count(mark_line) + tail_tokens
                + seam_tokens(counter, f"{head}\n", mark_line) + seam_tokens(counter, mark_line, tail))

    def fenced(self, stored: StoredRecord, label: str | None, cap: int, *,
               clippable: bool = True, extra: Extra = (0, 0), verbatim: bool = False) -> Block:
        """The record's body in a data fence, under ``label`` (None: the fence alone says what
        it is — its ref, origin and trust — and a label would repeat it)."""
        rec = stored.record
        body, body_tokens, excerpt, notes = self._body(stored, cap, extra, verbatim)
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
                     excerpt=excerpt, quoted=quoted_tokens, notes=notes)

    def trusted(self, stored: StoredRecord, label: str, cap: int, extra: Extra = (0, 0)) -> Block:
        """Text the operator wrote or the runtime vouches for: labelled, not fenced."""
        body, body_tokens, excerpt, notes = self._body(stored, cap, extra)
        head = label + "\n"
        trust = stored.record.trust
        return Block(head=head, body=body, tokens=(self.counter.count(head) + body_tokens
                                                   + seam_tokens(self.counter, head, body)),
                     refs=(stored.ref,), clippable=True,
                     kind=BlockKind.OPERATOR if trust is Trust.TRUSTED_OPERATOR else BlockKind.TRUSTED,
                     trust=trust.value if trust else None, excerpt=excerpt, notes=notes)

    @staticmethod
    def rendered(blocks: Iterable[Block]) -> Rendered:
        blocks = tuple(blocks)
        # Each ref once, first seen first (a dict: an episode's form has a block per line).
        refs = tuple(dict.fromkeys(r for b in blocks for r in b.refs))
        return Rendered(blocks=blocks, tokens=sum(b.tokens for b in blocks), refs=refs)

    def raised_caps(self, floor: int) -> TokenCaps:
        """The policy's token caps, each raised to at least ``floor`` (0: the caps as they are)."""
        if floor <= 0:
            return self.caps
        return self.memo(("raised_caps", floor), lambda: TokenCaps(**{
            name: max(value, floor) for name, value in attrs.asdict(self.caps).items()}))


def _folded(body: str, counter: TokenCounter,
            verbatim: bool = False) -> tuple[str, int, tuple[Note, ...]]:
    """A tool output's body as the prompt shows it (:func:`~.folding.tool_output_shown`; with
    ``verbatim``, quoted notes neutralised and no line folded), its count and its notes;
    ``("", -1, ())`` when that is the body itself (whose count the store cached)."""
    shown, notes = (neutralise_repeat_marks(body), ()) if verbatim else tool_output_shown(body)
    return ("", -1, ()) if shown == body else (shown, counter.count(shown), notes)


def _excerpt_notes(notes: tuple[Note, ...], head_chars: int, mark_chars: int,
                   tail_start: int) -> tuple[Note, ...]:
    """The notes of an excerpt ``head + "\\n" + mark + "\\n" + tail`` of a body with ``notes``:
    the head's (a note whose line ends within the head: the newline after the head ends it
    again), the excerpt's own, then the tail's (those starting at or after ``tail_start``,
    where the tail starts in the body), moved to where they are in the excerpt. block_safe
    moves nothing but an empty head's line (a head inside the first line's indent, which holds
    no note): the excerpt then starts at the mark."""
    mark_at = head_chars + 1 if head_chars else 0
    tail_at = mark_at + mark_chars + 1
    return (*(n for n in notes if n.end - 1 <= head_chars),
            Note(NoteKind.EXCERPT, mark_at, tail_at),
            *(n.moved(tail_at - tail_start) for n in notes if n.start >= tail_start))
