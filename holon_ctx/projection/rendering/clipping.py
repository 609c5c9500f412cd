"""Clipping: the step that does not fit is cut to the tokens left, never beyond a block boundary.

This is what keeps utilisation above 90% at small budgets (RFC 0002, decision 5). The planner
calls :meth:`Clipper.clip` once per plan, for the first step that does not fit: the longest prefix
of the form's blocks that fits is kept, and the first block that does not is cut —

* a fenced or trusted block keeps its label and fence and loses the end of its body ("…");
* otherwise (or when even that does not fit) its label line alone is cut short with "…" (a fence
  is never opened without being closed);

and a note naming the full text's ref follows, in the longer of its two wordings that fits
(:func:`~holon_ctx.projection.base.formats.clip_notes`). Of the candidates the one using the most tokens
wins. A clipped form always ends with that note: when the misfit block cannot be cut short beside
it, the block before it is cut instead (and so on), so no block is dropped without a marker.
Refs of a block count as shown when any of it is, so every candidate shows the same refs and a
larger limit never shows fewer.
"""

from __future__ import annotations

import attrs

from holon_ctx.ledger.body import block_safe, neutralise_fences
from holon_ctx.projection.base.formats import clip_notes
from holon_ctx.projection.base.items import Block, BlockKind, Rendered, notes_kept
from holon_ctx.projection.rendering.render import Renderer
from holon_ctx.tokens import TokenCounter, seam_tokens

__all__ = ["Clipper", "clip_line", "clip_text"]


class Clipper:
    def __init__(self, r: Renderer) -> None:
        self.r = r

    def clip(self, rendered: Rendered, limit: int) -> Rendered | None:
        """The longest prefix of the blocks that fits ``limit``, the first misfit block clipped,
        and a note naming the full text; None when not even a note fits beside the first block."""
        out: list[Block] = []
        used = 0
        first_ref = rendered.refs[0] if rendered.refs else "the ledger"
        notes = [attrs.evolve(self.r.line(text), kind=BlockKind.NOTE)
                 for text in clip_notes(first_ref)]
        for block in rendered.blocks:
            if used + block.tokens <= limit:
                out.append(block)
                used += block.tokens
                continue
            # The first misfit is cut short and the note follows it. When it cannot be (the
            # note leaves it no room), the block before it is cut instead, and so on: no block
            # is ever dropped without the note saying so.
            while True:
                best: tuple[Block, ...] = ()
                best_tokens = 0
                room = limit - used
                for note in notes:
                    for part in self._clip_block(block, room - note.tokens):
                        total = part.tokens + note.tokens
                        if best_tokens < total <= room:
                            best, best_tokens = (part, note), total
                if best or not out:
                    break
                block = out.pop()
                used -= block.tokens
            out.extend(best)
            used += best_tokens
            break
        if not out or used > limit:
            return None
        return attrs.evolve(self.r.rendered(out), clipped=True)

    def _clip_block(self, block: Block, room: int) -> list[Block]:
        """Ways to cut ``block`` to at most ``room`` tokens: body clipped, label cut short."""
        counter = self.r.counter
        if room < 3:
            return []
        parts: list[Block] = []
        if block.clippable and block.body:
            fixed = counter.count(block.head) + counter.count(block.tail)
            # A seam (o200k: a body starting with "/" under the fence line) may cost one more.
            slack = 0 if getattr(counter, "additive", True) else 1
            body = clip_text(counter, block.body, room - fixed - slack)
            if body:
                tokens = fixed + counter.count(body) + seam_tokens(counter, block.head, body)
                if tokens <= room:
                    parts.append(attrs.evolve(block, body=body, tokens=tokens, notes=notes_kept(
                        block.notes, block.body, body)))
        if _opens_with_fence(block):
            # A fence line is never cut short into a label (it would open a fence that
            # nothing closes).
            return parts
        label = block.head.split("\n", 1)[0]
        line = clip_line(counter, label, room)
        if line is not None:
            # The label keeps what it stands out as (an alert's, cut short, is still one).
            parts.append(Block(head=line, tokens=counter.count(line), refs=block.refs,
                               mark=block.mark))
        return parts


def _opens_with_fence(block: Block) -> bool:
    """The block's first line is a fence's opening line: its first piece (a form kept whole
    starts with its first) is fenced, and a fenced block's head ends with its fence line
    (a record's, an episode quote's), so a head of one line is the fence alone."""
    while block.parts:
        block = block.parts[0]
    return block.fenced and block.head.count("\n") <= 1


def clip_line(counter: TokenCounter, label: str, max_tokens: int) -> str | None:
    """``label`` cut short to a block-safe line ending in "…" within ``max_tokens`` tokens."""
    tokens = counter.encode(label)
    keep = min(len(tokens), max_tokens - 1)
    while keep > 0:
        text = counter.decode(tokens[:keep]).rstrip()
        if text and "\ufffd" not in text[-2:]:
            line = f"{text}…\n"
            if counter.count(line) <= max_tokens:
                return line
        keep -= 1
    return None


def clip_text(counter: TokenCounter, body: str, max_tokens: int) -> str:
    """The longest block-safe prefix of ``body``, ending in "…", within ``max_tokens`` ("" if none).

    ``body`` is already fence-safe; a prefix of it is re-neutralised anyway, and the search
    steps down by the overshoot, so it ends within a token or two of the limit.
    """
    if max_tokens < 2:
        return ""
    tokens = counter.encode(body)
    keep = min(len(tokens), max_tokens - 1)
    while keep > 0:
        text = counter.decode(tokens[:keep])
        if "\ufffd" not in text[-2:]:
            clipped = block_safe(neutralise_fences(text))
            if clipped:
                clipped = clipped[:-1] + "…\n"
                over = counter.count(clipped) - max_tokens
                if over <= 0:
                    return clipped
                keep -= over
                continue
        keep -= 1
    return ""
