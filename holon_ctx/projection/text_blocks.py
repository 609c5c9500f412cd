"""Pre-rendered text (an episode's forms) as blocks the clipper can cut.

Each fenced excerpt is one clippable block (its claim line, opening line, body and closing line),
every other line a block of its own, so a form that does not fit whole keeps its first lines and
a note naming its full text instead of dropping out. Lines that do not start with a visible
character stay with the line before: token counts add only across boundaries where a line ends
and a non-blank one starts (RFC 0002, :mod:`holon_ctx.tokens`).

Counting. The blocks' counts must add up to the text's. For holon_ctx's own tiktoken counters
that is the additivity contract, with :meth:`~holon_ctx.tokens.TiktokenCounter.seam` naming the
one kind of boundary where it does not hold (o200k's punctuation before ``/``): the whole text is
counted only there. A re-plan lays out a few new episode texts, and counting each twice (whole
and blocks) was about a fifth of a re-plan's tokenization. Any other counter makes no such
promise, so its whole count is taken and compared, as before: should the counts not add up, the
text stays one block.
"""

from __future__ import annotations

import itertools

from holon_ctx.projection.formats import FENCE_CLOSE, fence_parts
from holon_ctx.projection.items import Block, BlockKind
from holon_ctx.tokens import TiktokenCounter, TokenCounter

__all__ = ["text_blocks"]


def text_blocks(body: str, ref: str, counter: TokenCounter) -> tuple[Block, ...]:
    """``body`` (ending with a newline) as blocks under ``ref`` (see the module docstring)."""
    # [head, fenced body, tail]: a fenced chunk's tail is its closing line, once it came.
    chunks: list[list[str]] = []
    inside = False
    for line in body.splitlines(keepends=True):
        if inside:
            if line == FENCE_CLOSE:
                chunks[-1][2] = line
                inside = False
            else:
                chunks[-1][1] += line
        elif fence_parts(line.rstrip("\n")):
            # The claim line above a fence heads its block, as a record's label does: a
            # clipped block then keeps a label, never a fence opener cut short.
            if chunks and not chunks[-1][2]:
                chunks[-1][0] += line
            else:
                chunks.append([line, "", ""])
            inside = True
        elif line[:1].strip():
            chunks.append([line, "", ""])
        elif chunks and not chunks[-1][2]:
            chunks[-1][0] += line  # a continuation line stays with the line before
        else:
            return _whole(body, ref, counter)
    if inside:
        return _whole(body, ref, counter)
    texts = ["".join(chunk) for chunk in chunks]
    blocks = tuple(Block(head=head, body=inner, tail=tail, tokens=counter.count(text),
                       refs=(ref,), clippable=bool(inner), kind=BlockKind.TEXT)
                   for (head, inner, tail), text in zip(chunks, texts, strict=True))
    if isinstance(counter, TiktokenCounter):
        if any(counter.seam(a, b) for a, b in itertools.pairwise(texts)):
            return _whole(body, ref, counter)
        return blocks
    whole = _whole(body, ref, counter)
    return blocks if sum(b.tokens for b in blocks) == whole[0].tokens else whole


def _whole(body: str, ref: str, counter: TokenCounter) -> tuple[Block, ...]:
    return (Block(head=body, tokens=counter.count(body), refs=(ref,), kind=BlockKind.TEXT),)
