"""What a request part's text is made of: the blocks it was laid out from, kept as data.

A session request's parts (:class:`~holon_ctx.projection.provider_formats.native.Part`) are text,
because that is what a provider gets; but every part is made from rendered blocks, and each block
knows what it is (its kind, the trust of the text it shows, the ref it shows). A part keeps that
as *spans*: one :class:`Span` per block, its kind and trust and the lengths of its head, body and
tail in the part's text. Readers of a request — the preview's trust gutter (``cli/preview.py``),
the session view (``cli/session_view.py``) — rebuild the blocks from the spans (:func:`blocks_of`)
instead of reading the fences back out of the text (issue 24 item 3, RFC 0028).

A span is small (``array_like``: five values, a ref and a mark) because the parts a re-plan froze
are persisted with their epoch (:mod:`holon_ctx.ledger.epochs`, ``EPOCH_FORMAT`` 3: the mark
came with 3, so an epoch saved by older code, whose spans have none, is re-planned, not read).
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from holon_ctx.projection.base.items import Block, BlockKind, Mark

__all__ = ["Span", "blocks_of", "spans_of", "title_span"]


class Span(msgspec.Struct, frozen=True, array_like=True):
    """One block of a part's text: what it is, and where its head, body and tail end."""

    kind: str
    trust: str | None
    head: int
    body: int
    tail: int
    #: The ref whose text the block shows (its first), if any: the ledger says how far an
    #: unfenced body is trusted.
    ref: str | None = None
    #: What the block's first line stands out as (a :class:`~holon_ctx.projection.base.items.Mark`
    #: value: heading, alert, fold, relation), None for a plain line.
    mark: str | None = None


def spans_of(blocks: Iterable[Block]) -> tuple[Span, ...]:
    """The spans of ``blocks`` laid out one after another. A block that stands for several
    (a form kept whole, :attr:`~holon_ctx.projection.base.items.Block.parts`) gives its parts'."""
    out: list[Span] = []
    for block in blocks:
        if block.parts:
            out.extend(spans_of(block.parts))
            continue
        out.append(Span(kind=block.kind.value, trust=block.trust, head=len(block.head),
                        body=len(block.body), tail=len(block.tail), ref=block.ref,
                        mark=block.mark.value if block.mark else None))
    return tuple(out)


def title_span(title: str) -> Span:
    """A section title line above a part's blocks: a line holon_ctx wrote."""
    return Span(kind=BlockKind.LABEL.value, trust=None, head=len(title), body=0, tail=0)


def blocks_of(text: str, spans: Iterable[Span]) -> tuple[Block, ...]:
    """The blocks ``spans`` describe over ``text`` (no tokens: a reader's view). Text the spans
    do not cover (a part made before spans were kept) is one label block of its own."""
    out: list[Block] = []
    at = 0
    for s in spans:
        head_end = at + s.head
        body_end = head_end + s.body
        end = body_end + s.tail
        out.append(Block(head=text[at:head_end], body=text[head_end:body_end],
                         tail=text[body_end:end], refs=(s.ref,) if s.ref else (),
                         kind=BlockKind(s.kind), trust=s.trust,
                         mark=Mark(s.mark) if s.mark else None))
        at = end
    if at < len(text):
        out.append(Block(head=text[at:]))
    return tuple(out)
