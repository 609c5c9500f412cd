"""How much of a prompt is ledger content, and whether the newest steps were cut with room left.

Two measures of one :class:`~holon_ctx.projection.planning.manifest.Projection` (issue 12), read from the
structured blocks it carries, never by parsing the text back:

* **markup share**: tokens that are not ledger content, as a share of the prompt. Content is the
  text of records (the body of every fenced, trusted or operator block, and an episode's
  pre-rendered text); everything else — section titles, turn headings, record labels, fence
  lines, one-line stubs, fold lines, clip notes, and the line an excerpt puts between the head
  and the tail of a body it cut (``… [N+ tokens omitted; full text: REF] …``, counted as content
  before RFC 0015), the note after a run of identical lines shown once (``[line above ×40]``,
  RFC 0016) and the note standing for lines an output above printed (``[4 lines as in
  tool:x9]``, RFC 0016; counted as content before the notes were data unless its body also
  held a ``line above`` note) — is markup. The notes are read from the blocks
  (:attr:`~holon_ctx.projection.base.items.Block.notes`), where the renderer recorded them.
  Ledger text a label line quotes verbatim (a command on a stub or a tool line, an objective,
  a file path, the workspace) is content: the frame around it is markup (RFC 0015, "quoted
  content"; :attr:`Density.strict_markup_share` counts label lines whole, and both are
  reported). Blocks count additively (:mod:`holon_ctx.tokens`), so a block's
  markup is its tokens less its body's and its quotes', and an excerpt's note is its own line.
* **cut with room**: a field (message, tool output) of one of the newest steps is shown cut to a
  per-field limit — excerpted at its cap, clipped, or the step shown in less than its full form
  — while the prompt leaves at least one token of its budget unused. A field excerpted to the
  room left (the step grown past its capped form) is the budget binding, not a per-field cut.

The frontier benchmark reports both over every step of the shared trajectories; a test pins them
on a few of those (``tests/test_prompt_density.py``).
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from holon_ctx.projection.base.items import Block, BlockKind
from holon_ctx.projection.base.model import Form
from holon_ctx.projection.planning.manifest import Projection
from holon_ctx.tokens import TokenCounter

__all__ = ["Density", "content_tokens", "cut_steps", "density"]

#: Blocks whose body is a record's own text.
_CONTENT_BODY = frozenset({BlockKind.FENCED, BlockKind.TRUSTED, BlockKind.OPERATOR})


@attrs.frozen
class Density:
    """Markup and content of one prompt, in tokens of the counter that measured it."""

    prompt_tokens: int
    content_tokens: int
    budget_tokens: int
    #: Turn refs among the newest steps asked about whose fields are shown cut.
    cut: tuple[str, ...] = ()
    #: Of ``content_tokens``, ledger text quoted on label lines (commands on stubs and tool
    #: lines, objectives, file paths, the workspace): content by the measure's definition,
    #: markup by the stricter one that counts every label line whole (both reported).
    quoted_tokens: int = 0

    @property
    def markup_tokens(self) -> int:
        return self.prompt_tokens - self.content_tokens

    @property
    def markup_share(self) -> float:
        return self.markup_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    @property
    def strict_markup_share(self) -> float:
        """The markup share counting label lines whole, the ledger text they quote included."""
        return ((self.markup_tokens + self.quoted_tokens) / self.prompt_tokens
                if self.prompt_tokens else 0.0)

    @property
    def unused_tokens(self) -> int:
        return self.budget_tokens - self.prompt_tokens

    @property
    def cut_with_room(self) -> bool:
        """A newest step is cut while at least one token of the budget is left unused."""
        return bool(self.cut) and self.unused_tokens >= 1


def content_tokens(blocks: Iterable[Block], counter: TokenCounter) -> int:
    """Tokens of record text in ``blocks``: bodies of record blocks, episodes' whole text."""
    total = 0
    for block in blocks:
        # Ledger text a label line quotes (a command, an objective, a path) is content too.
        total += block.quoted
        if block.kind is BlockKind.TEXT:
            total += block.tokens
        elif block.kind in _CONTENT_BODY and block.body:
            total += block.tokens - counter.count(block.head) - (
                counter.count(block.tail) if block.tail else 0)
            # The runtime's notes in the body (an excerpt's, the repeat and same-lines notes:
            # RFC 0015, 0016) are its lines, not the record's; each is a line of its own
            # (block-safe), so its count comes off the body's exactly. The renderer recorded
            # where each is (Block.notes).
            total -= sum(counter.count(block.body[n.start:n.end]) for n in block.notes)
    return total


def cut_steps(projection: Projection, steps: Iterable[str]) -> tuple[str, ...]:
    """Of the turn refs ``steps``, those shown with a field cut (see the module docstring)."""
    decisions = {d.key: d for d in projection.decisions}
    shown = {key: rendered for pairs in projection.section_items.values()
             for key, rendered in pairs}
    cut: list[str] = []
    for ref in steps:
        decision = decisions.get(ref)
        rendered = shown.get(ref)
        if decision is None or rendered is None:
            continue  # not a turn item of this prompt (folded, or shown elsewhere)
        # A step grown past its capped form was given the room there was: an excerpt left in
        # it was sized to the budget, which binds; one at its cap (or less) was cut to a limit.
        at_cap = rendered.tokens <= decision.full_tokens
        if (decision.form is not Form.FULL or rendered.clipped
                or (at_cap and any(b.excerpt for b in rendered.blocks))):
            cut.append(ref)
    return tuple(cut)


def density(projection: Projection, counter: TokenCounter, newest: Iterable[str] = ()) -> Density:
    """The markup share of ``projection``'s prompt and which of the turn refs ``newest`` are cut."""
    blocks = [b for pairs in projection.section_items.values() for _, r in pairs for b in r.blocks]
    return Density(prompt_tokens=projection.used_tokens,
                   content_tokens=content_tokens(blocks, counter),
                   budget_tokens=projection.budget_tokens,
                   cut=cut_steps(projection, newest),
                   quoted_tokens=sum(b.quoted for b in blocks))
