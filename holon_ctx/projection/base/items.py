"""The planner's vocabulary: blocks of text, the rendered forms they make, and items offering forms.

A :class:`Block` is a few lines whose token count adds exactly to its neighbours' (RFC 0002,
decision 3): ``head`` and ``tail`` are label lines, ``body`` is block-safe record text. Besides its
text a block says what it is — ``kind``, the ``trust`` of the text it shows, whether that text is
an ``excerpt`` (head and tail of a longer body), the ``refs`` it shows and the ``notes`` the
runtime wrote inside its body (:class:`Note`) — so a reader (the preview, ``explain``, ``diff``,
the density measure, the shown-lines pass) never parses the prompt back. A :class:`Rendered` form
is a tuple of blocks with its exact token count; an :class:`Item` offers one to three forms to
the planner.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum

import attrs

from holon_ctx.errors import EngineError
from holon_ctx.projection.base.model import Form, Priority, Section

__all__ = ["Block", "BlockKind", "ClipFn", "GrowFn", "Item", "LazyRendered", "Mark", "Note",
           "NoteKind", "Rendered", "notes_kept", "operator_chars"]


class BlockKind(StrEnum):
    """What a block's text is, for readers of a projection (the prompt itself shows it in words)."""

    #: A runtime-written line: a fact, a stub, a fold line, a list line.
    LABEL = "label"
    #: A turn's heading line (``### turn:…``): the text layout's, which messages leave out.
    HEADING = "heading"
    #: The operator's own words under an ``operator (trusted)`` label, unfenced.
    OPERATOR = "operator"
    #: Text the runtime vouches for (a runtime note, vouched guidance) under its label, unfenced.
    TRUSTED = "trusted"
    #: Untrusted or model-written text inside a data fence, under its label.
    FENCED = "fenced"
    #: Pre-rendered text that carries its own labels and fences (an episode's forms).
    TEXT = "text"
    #: A note the clipper adds after a clipped block ("[clipped; full text: …]").
    NOTE = "note"


class Mark(StrEnum):
    """What a block's first line stands out as, for readers that emphasise it (the preview's
    styles): the prompt says it in words, the block says it here, so no reader matches the
    line's start against the markup (issue 24 item 3, RFC 0028's fourth amendment)."""

    #: A heading line: a turn's (``### turn:…``) or a recalled episode's (``### episode …``).
    HEADING = "heading"
    #: A failed run's or an unresolved side effect's label (``ALERT …``).
    ALERT = "alert"
    #: A fold line standing for a run of low-value turns (``- folded …``).
    FOLD = "fold"
    #: The line naming the current input's relation to earlier work (``relation: …``).
    RELATION = "relation"


class NoteKind(StrEnum):
    """Which of the runtime's notes a line inside a record's body is (the body is the record's
    text; these lines are not, so the density measure counts them as markup)."""

    #: ``… [N+ tokens omitted; full text: REF] …`` between an excerpt's head and tail.
    EXCERPT = "excerpt"
    #: ``[line above ×40]`` (or ``[3 lines above ×40]``) after lines shown once (RFC 0016).
    REPEAT = "repeat"
    #: ``[4 lines as in tool:x9]`` for lines an output shown above printed (RFC 0016).
    SAME = "same"


@attrs.frozen
class Note:
    """A line the runtime wrote inside a block's body, recorded where it is written: readers
    take it from here, never by matching the body's text (a tool's own line that reads like a
    note is neutralised, but the text alone cannot say whose a line is)."""

    kind: NoteKind
    #: Where the line is in the body, half-open, its newline included.
    start: int
    end: int
    #: Lines it stands for: the repeated group's size (REPEAT), the run's length (SAME).
    lines: int = 0
    #: Copies in a row, the one shown included (REPEAT).
    times: int = 0
    #: The output shown above that prints the run (SAME).
    as_in: str | None = None

    def moved(self, by: int) -> Note:
        return attrs.evolve(self, start=self.start + by, end=self.end + by)


def notes_kept(notes: tuple[Note, ...], old: str, new: str) -> tuple[Note, ...]:
    """The ``notes`` of body ``old`` still whole in ``new``, a body made by cutting ``old``
    short (the clipper): those inside the text the two share from their start. A note ends in
    a newline and starts a line, so one kept is still a line of its own in ``new``."""
    if not notes:
        return ()
    # The length of the shared start, by bisection (each step one comparison in C).
    lo, hi = 0, min(len(old), len(new))
    if not old.startswith(new[:hi]):
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if old.startswith(new[:mid]):
                lo = mid
            else:
                hi = mid
        hi = lo
    return tuple(n for n in notes if n.end <= hi)


@attrs.frozen
class Block:
    """Lines that count additively: ``head`` and ``tail`` are label lines, ``body`` is block-safe."""

    head: str
    body: str = ""
    tail: str = ""
    tokens: int = 0
    #: Refs whose content this block shows.
    refs: tuple[str, ...] = ()
    clippable: bool = False
    kind: BlockKind = BlockKind.LABEL
    #: Trust of the record whose text ``body`` shows (a :class:`~holon_ctx.ledger.records.Trust`
    #: value), None when the block shows no record text.
    trust: str | None = None
    #: The body is a head-and-tail excerpt of a longer text (the excerpt names the full ref).
    excerpt: bool = False
    #: Tokens of ledger text its label lines quote (a command, an objective, a file path):
    #: content, not markup, for the prompt-density measure (formats.quoted).
    quoted: int = 0
    #: The record an episode's fenced quote shows (its fence names it), None elsewhere: where
    #: a recalled episode quotes a record is read here, not from the fence line.
    quote: str | None = None
    #: The runtime's notes inside ``body`` (excerpt, repeat and same-lines notes), in order.
    notes: tuple[Note, ...] = ()
    #: What the block's first line stands out as (:class:`Mark`), None for a plain line.
    mark: Mark | None = None
    #: A form kept as one block where its pieces' token counts would not add up (an episode's
    #: form: projection/rendering/episode_forms.py): the pieces, each with its kind and trust, so readers
    #: still see which lines are a fenced quote without parsing the text. Their text joined is
    #: this block's ``head``; no tokens (the block's count is the whole's).
    parts: tuple[Block, ...] = attrs.field(default=(), eq=False, repr=False)

    @property
    def text(self) -> str:
        return self.head + self.body + self.tail

    @property
    def ref(self) -> str | None:
        """The ref whose text the block shows (its first), if any."""
        return self.refs[0] if self.refs else None

    @property
    def fenced(self) -> bool:
        """The block shows text inside a data fence: a record's fenced body, an episode's
        fenced quote (text with the quote's trust and the fence's closing line), or a form
        kept whole that holds one."""
        return (self.kind is BlockKind.FENCED
                or (self.kind is BlockKind.TEXT and bool(self.trust) and bool(self.tail))
                or any(p.fenced for p in self.parts))


@attrs.frozen
class Rendered:
    blocks: tuple[Block, ...]
    tokens: int
    refs: tuple[str, ...]
    clipped: bool = False
    #: The blocks' text, joined once (a rendered form is reused across a projector's calls).
    text: str = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "text", "".join(
            b.head + b.body + b.tail for b in self.blocks))


#: The slots Rendered keeps its blocks and text in (LazyRendered fills them when it writes).
_BLOCKS_SLOT = Rendered.__dict__["blocks"]
_TEXT_SLOT = Rendered.__dict__["text"]


class LazyRendered(Rendered):
    """A form whose token count is known before it is written (a count stored with the data it
    renders): its blocks and text are made by ``make`` when first read. The planner weighs every
    item's forms by their counts and reads the blocks of the few it picks, so a form it never
    picks is never written (an episode's full form, RFC 0024 decision 6).

    What ``make`` returns must have the count and the refs given: a form that does not is a
    count stored by other code, and a plan made with it could be over its budget, so reading it
    raises :class:`~holon_ctx.errors.EngineError` rather than send it."""

    __slots__ = ("_make",)
    _make: Callable[[], Rendered]

    def __init__(self, tokens: int, refs: tuple[str, ...], make: Callable[[], Rendered]) -> None:
        object.__setattr__(self, "tokens", tokens)
        object.__setattr__(self, "refs", refs)
        object.__setattr__(self, "clipped", False)
        object.__setattr__(self, "_make", make)

    def _written(self) -> None:
        made = self._make()
        if made.tokens != self.tokens or made.refs != self.refs:
            raise EngineError(f"a form of {self.refs[0] if self.refs else 'an item'} counts "
                              f"{made.tokens} tokens where its stored count says {self.tokens}")
        _BLOCKS_SLOT.__set__(self, made.blocks)
        _TEXT_SLOT.__set__(self, made.text)

    @property
    def blocks(self) -> tuple[Block, ...]:
        try:
            found: tuple[Block, ...] = _BLOCKS_SLOT.__get__(self)
        except AttributeError:
            self._written()
            found = _BLOCKS_SLOT.__get__(self)
        return found

    @property
    def text(self) -> str:
        self.blocks  # noqa: B018 - written on first read
        found: str = _TEXT_SLOT.__get__(self)
        return found

    def __eq__(self, other: object) -> bool:
        # The form it stands for: equal to the Rendered it writes (attrs' own __eq__ compares
        # only instances of one class).
        if not isinstance(other, Rendered):
            return NotImplemented
        return (self.blocks, self.tokens, self.refs, self.clipped) == (
            other.blocks, other.tokens, other.refs, other.clipped)

    __hash__ = Rendered.__hash__


def operator_chars(form: Rendered) -> int:
    """Characters of the operator's own words ``form`` shows (a turn's form: an episode's lazy
    form would be written to be read)."""
    return sum(len(b.body) for b in form.blocks if b.kind is BlockKind.OPERATOR)


#: ``clip(form, limit)``: the form cut to at most ``limit`` tokens, or None (see clipping.py).
ClipFn = Callable[[Rendered, int], Rendered | None]
#: ``grow(limit)``: the full form with its per-field caps lifted — every field whole (``limit``
#: None), or the fields raised as far as fits ``limit`` tokens (None: not even the capped form).
GrowFn = Callable[[int | None], Rendered | None]


@attrs.frozen
class Item:
    key: str
    section: Section
    priority: Priority
    reasons: tuple[str, ...]
    #: Rank for steps inside the section (0 first).
    order: int
    #: Position when rendering the section (chronological for turns).
    position: tuple[int, ...]
    forms: dict[Form, Rendered]
    #: Refs this item stands for (shown in any form); the first is the item's own ref.
    refs: tuple[str, ...]
    chain: str | None = None
    kind: str = "item"
    #: 0 outside the recent window and for its page 0; k for window page k (see planner.py).
    tier: int = 0
    #: A turn whose full form cuts a field to its per-field cap offers the field whole when the
    #: budget has room (planner.py, "grow" steps); None when nothing in it is cut.
    grow: GrowFn | None = attrs.field(default=None, eq=False)
    #: ``shrink(limit)``: what the planner takes instead of its full form cut short when that
    #: does not fit (None: the form clipped, clipping.py). A huge turn offers its newest records
    #: that fit, its operator's words first (RFC 0010, decision 7).
    shrink: Callable[[int], Rendered | None] | None = attrs.field(default=None, eq=False)
    #: A larger form shown whole or not at all: a list whose smaller form already names what
    #: matters and counts what it leaves out (the execution frontier) is never replaced by its
    #: larger form cut short, which would drop the newest entries behind a clip note.
    whole: bool = False
    #: A decision the current input is about (RFC 0030): its steps lead the first round of its
    #: tier, before any other older evidence.
    required: bool = False
    #: A decision of another topic than the current input's (RFC 0030): its full form enters
    #: after every other step, whole or not at all, so it is the first evidence to go.
    deferred: bool = False

    @property
    def min_form(self) -> Form:
        return min(self.forms)
