"""Episode forms for the prompt: full, compact and ref, built from the episode itself.

Episodes cross from memory to the projection as data (:class:`~holon_ctx.memory.interface.
RecalledEpisode`: the episode, the keys still open, the records the prompt holds elsewhere), and
this module writes their markup, as :mod:`holon_ctx.projection.rendering.render` writes a record's. Each form
is a sequence of :class:`Chunk` — a line (with the lines that continue it), or a claim line
heading a fenced quote — made as the text is written, so the projection's blocks (one per chunk,
each fenced quote one clippable block) come from the episode, never from re-reading its text;
:func:`full_text` and friends join the same chunks for ``holon-ctx episodes show``.

Block-safe (RFC 0002): every form starts with a non-blank line and ends with ``"\\n"``, so its
token count adds exactly to its neighbours'. Trust stays visible, as in
:mod:`holon_ctx.projection.rendering.render`: the operator's archived words are labelled and unfenced;
every other quoted text (tool output, external events, task summaries, briefs, assistant messages,
model recaps) sits inside ``<data ref=… origin=… trust=…>`` … ``</data>`` after
:func:`~holon_ctx.ledger.body.neutralise_fences`, so it can neither close its fence nor pose as the
operator. Label lines carry only builder-written text and sanitised one-line previews.

``open_keys`` is what recall found still open *as of the projected turn*: unresolved items are
marked ``still open`` or ``resolved since``; without it they read ``open at range end``.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Collection
from typing import Final

import attrs

from holon_ctx.ledger.body import block_safe, neutralise_fences
from holon_ctx.ledger.records import Trust
from holon_ctx.memory.episodes import Claim, Episode, Field, Recap, Span
from holon_ctx.memory.index import FormCounts, chunk_key, pack_counts
from holon_ctx.memory.interface import RecalledEpisode
from holon_ctx.memory.summarizer import with_recaps
from holon_ctx.memory.unresolved import KINDS, OpenKind
from holon_ctx.projection.base.formats import FENCE_CLOSE, fence_open, one_line
from holon_ctx.projection.base.items import Block, BlockKind, LazyRendered, Mark, Rendered
from holon_ctx.projection.base.model import Form
from holon_ctx.projection.rendering.render import Renderer
from holon_ctx.tokens import TiktokenCounter, TokenCounter, store_counter

__all__ = ["Chunk", "Chunks", "compact_chunks", "compact_text", "derive_form_counts",
           "episode_forms", "form_blocks", "form_counts_maker", "full_chunks", "full_text", "ref_text",
           "retrieval_hint"]


@attrs.frozen
class Chunk:
    """Lines of a form that a clip keeps or drops together: a line with the lines that continue
    it (those not starting with a visible character: token counts add only across a line that
    does), or a claim line heading the fence of its quote (``body`` the quote, ``tail`` the
    fence's closing line), so a clipped form keeps a label, never a fence opener cut short."""

    head: str
    body: str = ""
    tail: str = ""
    #: Trust of the quoted text the chunk shows (a Trust value); None for builder-written lines.
    trust: str | None = None
    #: The record a fenced quote shows (its fence names it): ``explain`` reads it here.
    quote: str | None = None
    #: What the chunk's first line stands out as (the episode's heading line), for readers.
    mark: Mark | None = None

    @property
    def text(self) -> str:
        return self.head + self.body + self.tail


@attrs.frozen
class Chunks:
    """A form's chunks; ``whole``: a continuation line had no line to continue (the form is then
    one block, as its text cannot be cut where its counts add)."""

    chunks: tuple[Chunk, ...]
    whole: bool = False

    @property
    def text(self) -> str:
        return "".join(c.text for c in self.chunks)


class _Writer:
    """Collects a form's chunks as its lines are written."""

    def __init__(self) -> None:
        self.chunks: list[Chunk] = []
        self.whole = False

    def lines(self, text: str, trust: str | None = None, mark: Mark | None = None) -> None:
        """``text``'s lines; ``mark``: what the first of them stands out as (it starts a chunk)."""
        for line in text.splitlines(keepends=True):
            last = self.chunks[-1] if self.chunks else None
            if line[:1].strip() or last is None or last.tail:
                # A continuation with nothing open to continue leaves the form whole.
                self.whole = self.whole or not line[:1].strip()
                self.chunks.append(Chunk(head=line, trust=trust, mark=mark))
                mark = None
            else:
                self.chunks[-1] = attrs.evolve(last, head=last.head + line)

    def fenced(self, fence: str, body: str, trust: str, quote: str) -> None:
        """A fenced quote of record ``quote``, under the line above it when that line heads no
        fence yet."""
        last = self.chunks[-1] if self.chunks else None
        if last is not None and not last.tail:
            self.chunks[-1] = Chunk(head=last.head + fence, body=body, tail=FENCE_CLOSE,
                                    trust=trust, quote=quote, mark=last.mark)
        else:
            self.chunks.append(Chunk(head=fence, body=body, tail=FENCE_CLOSE, trust=trust,
                                     quote=quote))

    def done(self) -> Chunks:
        return Chunks(chunks=tuple(self.chunks), whole=self.whole)

_TITLES: dict[Field, str] = {
    Field.OPERATOR_INTENTS: "operator intents (the operator's words, archived: history, "
                            "not the current request):",
    Field.DECISIONS: "decisions:",
    Field.RESULTS: "results:",
    Field.ARTIFACT_TRAIL: "artifact trail:",
    Field.UNRESOLVED: "unresolved when the range ended:",
    Field.MODEL_INFERENCES: "model inferences (not authority):",
}
_TRUSTED = Trust.TRUSTED_OPERATOR.value


def _line(text: str, limit: int) -> str:
    """:func:`one_line`, with a fast path for text it would return unchanged.

    Text that is printable (no newline, tab or non-ASCII space), holds no ``<`` or ``(`` (so no
    fence tag and no trusted label), no double or edge spaces, and fits ``limit``, is already one
    sanitised line; ids, refs and builder-written labels almost always are.
    """
    if (len(text) <= limit and "<" not in text and "(" not in text and "  " not in text
            and text.isprintable() and text[:1] != " " and text[-1:] != " "):
        return text
    return one_line(text, limit)


def retrieval_hint(episode_id: str) -> str:
    return f"holon-ctx episodes show {episode_id}"


def _refs(refs: list[str], limit: int = 6) -> str:
    shown = ", ".join(_line(r, 80) for r in refs[:limit])
    return shown + (f", +{len(refs) - limit} more" if len(refs) > limit else "")


def _state(claim: Claim, open_keys: Collection[str] | None) -> str:
    pinned = claim.kind in OpenKind._value2member_map_ and KINDS[OpenKind(claim.kind)].pinned
    if open_keys is None:
        return "open at range end" + (", pinned" if pinned else "")
    if claim.key in open_keys:
        return "STILL OPEN" + (", pinned until resolved" if pinned else "")
    return "resolved since"


def _quote(out: _Writer, claim: Claim) -> None:
    """The claim's quote: the operator's words as lines of their own, any other text fenced."""
    body = block_safe(neutralise_fences(claim.quote))
    if not body:
        return
    if claim.truncated:
        body += f"[… cut to the field budget; full text: {_line(claim.refs[0], 80)}]\n"
    if claim.trust == _TRUSTED:
        out.lines(body, _TRUSTED)
        return
    out.fenced(fence_open(claim.refs[0], claim.origin or "unknown", claim.trust or "unknown"),
               body, claim.trust or "unknown", claim.refs[0])


def _head(ep: Episode) -> str:
    first, last = ep.covers
    span = first if first == last else f"{first}–{last}"
    return (f"{ep.ref} · {span} ({ep.turns} turn{'s' if ep.turns != 1 else ''}) · "
            f"{_line(ep.owner, 80)} · closed by {ep.closed_by} · generated by "
            f"{_line(ep.generated_by, 80)}")


#: Said instead of a record's text that the prompt shows on its own (a pinned turn's record).
SHOWN_ELSEWHERE: Final = "its text is shown with its turn in this prompt"


def _held(claim: Claim, shown: Collection[str]) -> bool:
    """The claim's record is shown on its own in the prompt (its text must not be repeated)."""
    return bool(shown) and bool(claim.refs) and claim.refs[0] in shown


def _text(claim: Claim, shown: Collection[str], width: int) -> str:
    """The claim's line; a preview of words the prompt shows elsewhere is left out."""
    if _held(claim, shown) and "“" in claim.text:
        return f"{_line(claim.text[:claim.text.index('“')].rstrip(': '), width)} ({SHOWN_ELSEWHERE})"
    return _line(claim.text, width)


def full_text(ep: Episode, open_keys: Collection[str] | None = None,
              shown: Collection[str] = ()) -> str:
    """Every field, quotes included (:func:`full_chunks`), as one text."""
    return full_chunks(ep, open_keys, shown).text


def recapped_text(ep: Episode, recaps: list[Recap]) -> str:
    """The episode as a reader is shown it (``holon-ctx episodes show``): its accepted recaps
    bound to its digest applied (:func:`~holon_ctx.memory.summarizer.with_recaps`), every field."""
    return full_text(with_recaps(ep, recaps))


def full_chunks(ep: Episode, open_keys: Collection[str] | None = None,
                shown: Collection[str] = ()) -> Chunks:
    """Every field, quotes included (fenced unless they are the operator's words); a record in
    ``shown`` (held by a pinned turn the prompt shows) is named, not quoted again."""
    out = _Writer()
    out.lines(f"### {_head(ep)}\n", mark=Mark.HEADING)
    for field in Field:
        claims = ep.field(field)
        if not claims:
            continue
        out.lines(_TITLES[field] + "\n")
        for claim in claims:
            state = f"[{_state(claim, open_keys)}] " if field is Field.UNRESOLVED else ""
            held = _held(claim, shown)
            note = f"; {SHOWN_ELSEWHERE}" if held and claim.quote else ""
            out.lines(f"- {state}{_text(claim, shown, 400)} ({_refs(claim.refs)}{note})\n")
            if claim.quote and not held:
                _quote(out, claim)
    out.lines(f"source records: {len(ep.source_refs)} ({ep.digest}); full text: "
              f"{retrieval_hint(ep.id)}\n")
    return out.done()


def _summary(claims: list[Claim], shown: int, width: int, *, quote: bool = False,
             held: Collection[str] = ()) -> str:
    parts = []
    for claim in claims[:shown]:
        if quote and claim.quote and not _held(claim, held):
            words = f"“{_line(claim.quote, width)}”"
        else:
            words = _text(claim, held, width)
        parts.append(f"{words} ({_refs(claim.refs, 1)})")
    more = f"; +{len(claims) - shown} more" if len(claims) > shown else ""
    return "; ".join(parts) + more


def _binding_first(claims: list[Claim], decisions: list[Claim]) -> list[Claim]:
    """``claims`` with those that bind the agent first, in their order, then the rest in theirs:
    operator words a decision cites (a brief naming a code word, an answer to the assistant's
    question) and briefs. A compact form clipped to the budget, or the first few results, then
    loses the filler of a long conversation before its decisions (issue 25, item 3)."""
    cited = {c.refs[0] for c in decisions if c.refs}
    binding = [c for c in claims if (c.refs and c.refs[0] in cited) or c.kind.startswith("brief_")]
    if not binding:
        return claims
    taken = {id(c) for c in binding}
    return binding + [c for c in claims if id(c) not in taken]


#: Characters of the operator's words the compact form keeps, per intent (the builder's own
#: field budget caps them first): enough for a constraint stated at the end of a long request.
_INTENT_CHARS: Final = 1500


def compact_text(ep: Episode, open_keys: Collection[str] | None = None,
                 shown: Collection[str] = ()) -> str:
    """One line per non-empty field (:func:`compact_chunks`), as one text."""
    return compact_chunks(ep, open_keys, shown).text


def compact_chunks(ep: Episode, open_keys: Collection[str] | None = None,
                   shown: Collection[str] = ()) -> Chunks:
    """One line per non-empty field, previews only (no quoted untrusted text). Decisions and the
    operator's own words come first and whole (every one, the words verbatim up to the field
    budget; those a decision cites before the rest), then what is still open, then results
    (briefs first) and the artifact trail as previews: a form clipped to the budget keeps what
    binds the agent before what happened, and a decision before filler."""
    lines = [f"- {_head(ep)}\n"]
    if ep.decisions:
        lines.append(f"decisions: {_summary(ep.decisions, len(ep.decisions), 400, held=shown)}\n")
    if ep.operator_intents:
        lines.append("operator's words: " + _summary(
            _binding_first(ep.operator_intents, ep.decisions), len(ep.operator_intents),
            _INTENT_CHARS, quote=True, held=shown) + "\n")
    if ep.unresolved:
        items = "; ".join(f"[{_state(c, open_keys)}] {_line(c.text, 160)} ({_refs(c.refs, 1)})"
                          for c in ep.unresolved[:8])
        more = f"; +{len(ep.unresolved) - 8} more" if len(ep.unresolved) > 8 else ""
        lines.append(f"unresolved: {items}{more}\n")
    if ep.results:
        lines.append(f"results: {_summary(_binding_first(ep.results, []), 3, 120, held=shown)}\n")
    if ep.artifact_trail:
        lines.append(f"artifacts: {_summary(ep.artifact_trail, 3, 120, held=shown)}\n")
    lines.append(f"full text: {retrieval_hint(ep.id)}\n")
    out = _Writer()
    for line in lines:
        out.lines(line)
    return out.done()


def ref_text(ep: Episode, open_keys: Collection[str] | None = None,
             shown: Collection[str] = ()) -> str:
    """One line: the ref, its span, the first request, counts and the retrieval hint."""
    first, last = ep.covers
    head = ep.operator_intents[0] if ep.operator_intents else None
    intent = (f": “{_line(head.quote, 80)}”"
              if head is not None and head.quote and not _held(head, shown) else "")
    still = len(ep.unresolved) if open_keys is None else sum(
        1 for c in ep.unresolved if c.key in open_keys)
    counts = [f"{len(ep.decisions)} decision{'s' if len(ep.decisions) != 1 else ''}"]
    if still:
        counts.append(f"{still} open item{'s' if still != 1 else ''}")
    return (f"- {ep.ref} ({first}–{last}, {_line(ep.owner, 60)}){intent} · "
            f"{', '.join(counts)} · full text: {retrieval_hint(ep.id)}\n")


def episode_forms(r: Renderer, ep: RecalledEpisode) -> dict[Form, Rendered]:
    """A recalled episode's forms for the planner, in blocks the clipper can cut: each fenced
    quote one clippable block (its claim line, the fence and the quote), every other line a block
    of its own, so a form that does not fit whole keeps its first lines and a note naming its
    full text instead of dropping out. Remembered by what they depend on (the episode's id and
    digest, the recaps merged into it, the keys still open, the records held elsewhere): an
    episode recalled turn after turn is rendered and counted once."""
    key = ("episode", ep.ref, ep.episode.digest, ep.recaps, ep.open_keys, ep.held)
    return r.memo(key, lambda: _forms(r, ep))


def _forms(r: Renderer, recalled: RecalledEpisode) -> dict[Form, Rendered]:
    ep, keys, held = recalled.episode, recalled.open_keys, recalled.held
    counter = r.counter
    table = recalled.counts.table(counter.identity) if recalled.counts is not None else None
    count = _stored_or_counted(table, counter)

    def full() -> Rendered:
        return r.rendered(form_blocks(full_chunks(ep, keys, held), recalled.ref, counter, count))
    # The planner weighs every recalled episode's full form by its count and picks it for a few
    # (three of twelve at an operator's re-plan at 100k messages): the count stored when the
    # episode was archived stands in, and the form is written when something reads it (RFC
    # 0024, decision 6). Only for the episode as archived: recaps merged into it or records
    # held elsewhere change its text, and those are written now.
    total = table.get(chunk_key(_full_total_text(ep, keys))) if (
        table and not held and not recalled.recaps) else None
    return {Form.REF: r.rendered([r.line(ref_text(ep, keys, held), [recalled.ref])]),
            Form.COMPACT: r.rendered(form_blocks(compact_chunks(ep, keys, held), recalled.ref,
                                                 counter, count)),
            Form.FULL: full() if total is None else LazyRendered(total, (recalled.ref,), full)}


def _probe() -> Episode:
    """An episode that takes every path of :func:`full_chunks`: each field, the operator's words
    and fenced quotes, a quote cut to its budget, unresolved items pinned and not, a long line."""
    def claim(kind: str, i: int, **kw: object) -> Claim:
        return Claim(kind=kind, text=f"{kind} {i} (x)  " + "w" * 500 * (i % 2), refs=[
            f"message:m{i}", f"tool:t{i}"], **kw)  # type: ignore[arg-type]
    quoted = {"quote": "line <data ref=x>\n\n  indented ```\n", "origin": "tool",
              "trust": "untrusted_external"}
    return Episode(
        id="probe", span=Span(first_turn="turn:a", last_turn="turn:b", first_seq=0, last_seq=1),
        turn_ids=["a", "b"], source_refs=["turn:a", "message:m0"], digest="sha256:0",
        owner="conversation", closed_by="max_range",
        operator_intents=[claim("request", 0, quote="Keep cents.\n", origin="operator",
                                trust=Trust.TRUSTED_OPERATOR.value, truncated=True)],
        decisions=[claim("decision", 1, **quoted)], results=[claim("result", 2, **quoted)],
        artifact_trail=[claim("tool_run", 3, truncated=True, **quoted)],
        unresolved=[claim(OpenKind.TOOL_CALL_PENDING.value, 4, key="call:c4"),
                    claim(OpenKind.TODO_OPEN.value, 5, key="todo:t5")],
        model_inferences=[claim("inference", 6, **quoted)])


@functools.cache
def full_form_version() -> str:
    """Part of the key of a full form's stored count: a digest of the full forms this code
    writes for :func:`_probe` (open items open at the range's end, resolved, still open). A
    change to how :func:`full_chunks` writes a form changes it, so a count stored by other
    code is not found and the form is written and counted; what the probe does not reach,
    :class:`~holon_ctx.projection.base.items.LazyRendered` checks when the form is written."""
    ep = _probe()
    texts = [full_chunks(ep, keys).text for keys in (None, frozenset(), frozenset({"call:c4"}))]
    return chunk_key("\x00".join(texts)).hex()


def _full_total_text(ep: Episode, open_keys: Collection[str] | None) -> str:
    """The text whose :func:`~holon_ctx.memory.index.chunk_key` names the full form's count
    among an episode's stored counts. No chunk's text (a chunk starts with a visible
    character), and it names every input of the form besides the episode the counts belong to
    (stored with it) and the records held elsewhere (none, for a stored count): the code's
    version and the state each unresolved item is shown in."""
    states = "\x1f".join(_state(c, open_keys) for c in ep.unresolved)
    return f"\x00full form tokens\x00{full_form_version()}\x00{states}"


def _stored_or_counted(table: dict[bytes, int] | None,
                       counter: TokenCounter) -> Callable[[str], int]:
    """``counter.count``, answered from the counts stored with the episode (``table``, when
    ``counter`` made them) for a text whose key they hold (:mod:`holon_ctx.memory.index`:
    keyed by the text itself, so a count is only ever reused for the very text it was made
    of)."""
    if not table:
        return counter.count

    def count(text: str) -> int:
        n = table.get(chunk_key(text))
        return counter.count(text) if n is None else n
    return count


def derive_form_counts(ep: Episode, counter: TokenCounter) -> FormCounts:
    """The counts to store with ``ep`` when it is archived: every text :func:`form_blocks`
    counts for its full and compact forms as recall most often finds them (no record held
    elsewhere; each unresolved item resolved, and again with each still open). A form recalled
    otherwise differs in a few short lines, which are counted when it is rendered."""
    made: dict[bytes, int] = {}

    def count(text: str) -> int:
        key = chunk_key(text)
        n = made.get(key)
        if n is None:
            # count_many, not count: these texts are stored, not counted again, and would push
            # the labels every request counts out of the counter's cache of short texts (65,536
            # entries; an import of 10k messages archived ~8k short chunks through it).
            n = made[key] = counter.count_many([text])[0]
        return n
    states: list[frozenset[str]] = [frozenset()]
    if ep.unresolved:
        states.append(frozenset(c.key for c in ep.unresolved))
    for keys in states:
        full = form_blocks(full_chunks(ep, keys), ep.ref, counter, count)
        # The full form's count too: a recall that does not pick the form never writes it.
        made[chunk_key(_full_total_text(ep, keys))] = sum(b.tokens for b in full)
        form_blocks(compact_chunks(ep, keys), ep.ref, counter, count)
    return FormCounts(counter.identity, pack_counts(made))


def form_counts_maker(ledger: object) -> Callable[[Episode], FormCounts]:
    """:func:`derive_form_counts` with the counter whose counts ``ledger`` caches: what an
    archiver writing to a store that later processes read is given (``Archiver(..., forms=...)``:
    a session's compaction, ``holon-ctx episodes archive`` and ``rebuild``, the demo build; RFC
    0024 decision 6)."""
    return functools.partial(derive_form_counts, counter=store_counter(ledger))


def form_blocks(form: Chunks, ref: str, counter: TokenCounter,
                count: Callable[[str], int] | None = None) -> tuple[Block, ...]:
    """One block per chunk, or one block for the whole form where the chunks' counts would not
    add up to its count (or a continuation line began it: :class:`Chunks`).

    For holon_ctx's own tiktoken counters adding up is the additivity contract, with
    :meth:`~holon_ctx.tokens.TiktokenCounter.seam` naming the one kind of boundary where it does
    not hold (o200k's punctuation before ``/``): the whole form is counted only there (a re-plan
    lays out a few new episodes, and counting each twice was about a fifth of its tokenization).
    Any other counter makes no such promise: its whole count is taken and compared. ``count``
    (``counter.count`` by default) counts a chunk or a whole form: the stored counts' reader."""
    count = count or counter.count
    texts = [c.text for c in form.chunks]
    if form.whole:
        return _whole(form, ref, count)
    blocks = tuple(Block(head=c.head, body=c.body, tail=c.tail, tokens=count(text),
                         refs=(ref,), clippable=bool(c.body), kind=BlockKind.TEXT, trust=c.trust,
                         quote=c.quote, mark=c.mark)
                   for c, text in zip(form.chunks, texts, strict=True))
    if isinstance(counter, TiktokenCounter):
        if any(counter.seam(a, b) for a, b in itertools.pairwise(texts)):
            return _whole(form, ref, count)
        return blocks
    whole = _whole(form, ref, count)
    return blocks if sum(b.tokens for b in blocks) == whole[0].tokens else whole


def _whole(form: Chunks, ref: str, count: Callable[[str], int]) -> tuple[Block, ...]:
    text = form.text
    parts = tuple(Block(head=c.head, body=c.body, tail=c.tail, refs=(ref,), kind=BlockKind.TEXT,
                        trust=c.trust, quote=c.quote, mark=c.mark) for c in form.chunks)
    return (Block(head=text, tokens=count(text), refs=(ref,), kind=BlockKind.TEXT,
                  parts=parts),)
