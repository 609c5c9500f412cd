"""The rich preview: what the model will read, with where every line came from and how far to trust it.

How it works. The projection hands over, per section, the items it chose and their blocks (the
exact text of the prompt, in order). Each block is cut into lines and every line gets a *tag*:

    op   the operator's own words (trusted instructions)
    rt   runtime facts (task results, runtime notes, configuration)
    ext  untrusted external or tool text, inside a <data> fence
    mdl  model-written text (assistant messages, briefs), inside a <data> fence
         (blank) structure written by holon_ctx itself: titles, turn headings, labels

Fenced lines are tagged from the block's ``trust`` (the trust the renderer wrote into the fence's
``trust=`` attribute, which the fenced text cannot forge: ``neutralise_fences`` runs on every
body); a session request's parts keep their blocks as spans, so no line is read back. Unfenced bodies are the
operator's or the runtime's: ``trust_of(ref)`` asks the ledger which. The tag is printed in a gutter
on every physical line, so trust stays visible in ``--plain`` output and in a pipe, and colour only
adds emphasis: a structure line is emphasised by what its block says it is (``Block.mark``:
a heading, an alert, a fold line, the relation line), never by how the line starts.

Everything is laid out by hand (pre-wrapped ``Text`` lines) rather than with rich tables for the
long parts: it keeps the output byte-stable for golden tests and the preview of a few hundred lines
well under the one-second start-to-screen target. Shared layout helpers are in :mod:`.layout`;
``explain`` and ``diff`` are drawn by :mod:`.explain_view`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence

from rich.console import Console
from rich.text import Text

from holon_ctx.cli._api import SECTION_TITLES, Block, BlockKind, Mark, SessionRequest
from holon_ctx.cli.layout import emit, hang, kv, pct, visible
from holon_ctx.cli.preview_summary import detail_lines, glance_lines
from holon_ctx.cli.session_view import part_blocks
from holon_ctx.cli.wording import plural
from holon_ctx.lowlevel import ControlState, ItemDecision, Projection, Section

__all__ = ["TAGS", "TrustOf", "print_preview", "tag_block_lines"]

#: Looks up the trust of a record by ref ("trusted_operator", "runtime_fact", …); None if unknown.
TrustOf = Callable[[str], str | None]

#: Gutter tag and style of each kind of line.
TAGS: dict[str, tuple[str, str]] = {
    "trusted_operator": ("op", "bold green"),
    "runtime_fact": ("rt", "cyan"),
    "untrusted_external": ("ext", "yellow"),
    "model_output": ("mdl", "magenta"),
    "structure": ("", ""),
}
_TRUST_WORDS = {"trusted_operator": "operator (trusted)", "runtime_fact": "runtime fact",
                "untrusted_external": "external/tool (untrusted, fenced)",
                "model_output": "model output (fenced)"}
_GUTTER = 4  # "ext" plus the bar

# Structure lines keep their own emphasis: headings, alerts, folds and the relation line.
_MARK_STYLES: dict[Mark | None, str] = {
    Mark.HEADING: "bold",
    Mark.ALERT: "bold red",
    Mark.FOLD: "italic dim",
    Mark.RELATION: "bold blue",
}

BAR_CELLS = 40
_SECTION_NAMES = frozenset(s.value for s in Section)


def tag_block_lines(block: Block, trust_of: TrustOf) -> Iterator[tuple[str, str]]:
    """``(kind, line)`` for each line of a block; kind is a trust value, "fence" or "structure".

    A block says what it is (``kind``, ``trust``, and for a form kept whole its ``parts``):
    those are read, never the text. A session request's parts give their blocks back from the
    spans they keep (session_view.py), so both views tag the same way.
    """
    return ((kind, line) for kind, _, line in _marked_lines(block, trust_of))


def _marked_lines(block: Block, trust_of: TrustOf) -> Iterator[tuple[str, Mark | None, str]]:
    """:func:`tag_block_lines` with what each line stands out as: the block's mark on its first
    line (a heading, an alert, a fold or relation line), None on every other."""
    if block.parts:
        # A form kept whole (an episode's): its pieces say which lines are a fenced quote.
        for piece in block.parts:
            yield from _marked_lines(piece, trust_of)
        return
    if block.trust and (block.kind in (BlockKind.FENCED, BlockKind.OPERATOR, BlockKind.TRUSTED)
                        or _episode_quote(block)):
        # A record's block, or an episode's fenced quote (its claim line, the fence, the quote,
        # the closing line: projection/rendering/episode_forms.py).
        lines = _tag_structured(block)
    else:
        lines = _tag_unstructured(block, trust_of)
    mark = block.mark
    for kind, line in lines:
        yield kind, mark, line
        mark = None


def _tag_unstructured(block: Block, trust_of: TrustOf) -> Iterator[tuple[str, str]]:
    yield from (("structure", line) for line in block.head.splitlines())
    if block.body:
        # An unfenced body is trusted text: the operator's words or a runtime fact. The ledger
        # says which; a block that names no ref says it by its kind (the operator's words'
        # block is OPERATOR, projection/rendering/render_base.py), never by its label. Unknown
        # stays the lower of the two: never promoted to the operator's trust.
        trust = (trust_of(block.refs[0]) if block.refs else (
            "trusted_operator" if block.kind is BlockKind.OPERATOR else None)) or "runtime_fact"
        if trust not in TAGS:
            trust = "runtime_fact"
        for line in block.body.splitlines():
            yield trust, line
    for line in block.tail.splitlines():
        yield "structure", line


def _episode_quote(block: Block) -> bool:
    """An episode's fenced quote: a text block with the quote's trust and the fence's closing
    line (projection/rendering/episode_forms.py)."""
    return block.kind is BlockKind.TEXT and block.fenced


def _tag_structured(block: Block) -> Iterator[tuple[str, str]]:
    head = block.head.splitlines()
    trust = block.trust or "runtime_fact"
    if block.kind is BlockKind.FENCED or _episode_quote(block):
        # The label lines, then the fence's opening line (the head's last), body, closing line.
        yield from (("structure", line) for line in head[:-1])
        yield "fence:" + trust, head[-1]
        body, tail = trust, "fence:" + trust
    else:
        # Unfenced trusted text: its label, then the words at the trust the ledger gave them
        # (never promoted past the operator's; an unknown value reads as a runtime fact).
        yield from (("structure", line) for line in head)
        body = trust if trust in TAGS and trust != "structure" else "runtime_fact"
        tail = "structure"
    yield from ((body, line) for line in block.body.splitlines())
    yield from ((tail, line) for line in block.tail.splitlines())


class _Lines:
    """Collects gutter-tagged, pre-wrapped lines of one width."""

    def __init__(self, console: Console, width: int) -> None:
        self.console = console
        self.width = width
        self.out: list[Text] = []

    def add(self, kind: str, line: str, mark: Mark | None = None) -> None:
        trust = kind.removeprefix("fence:")
        tag, style = TAGS.get(trust, ("", ""))
        if kind.startswith("fence:"):
            style = f"dim {style}".strip()
        elif kind == "structure":
            style = _MARK_STYLES.get(mark, "")
        tag_style = TAGS.get(trust, ("", ""))[1]
        body = Text(visible(line), style=style)
        room = self.width - _GUTTER
        parts = [body] if body.cell_len <= room or room < 8 else \
            body.wrap(self.console, room, overflow="fold")
        for i, part in enumerate(parts):
            # Continuation lines keep the tag (trust stays visible) with a dotted bar.
            self.out.append(Text.assemble((f"{tag:<3}", tag_style if i == 0 else "dim"),
                                          ("│" if i == 0 else "┊", "dim"), part))

    def text(self, line: str | Text = "", style: str = "") -> None:
        self.out.append(line if isinstance(line, Text) else Text(line, style=style))


def _bar(used: int, allocated: int, budget: int, cells: int) -> Text:
    """One row scaled to the whole budget: █ used within the section's allocation, ▓ used beyond
    it (the planner lets spare tokens flow), ░ allocated but unused."""

    def n(tokens: int) -> int:
        return 0 if tokens <= 0 else min(cells, max(1, round(cells * tokens / budget)))

    used_end, alloc_end = n(used), n(allocated)
    within = min(used_end, alloc_end) if used > allocated else used_end
    beyond = used_end - within
    unused = max(0, alloc_end - used_end) if allocated > used else 0
    bar = Text()
    bar.append("█" * within, style="green")
    bar.append("▓" * beyond, style="yellow")
    bar.append("░" * unused, style="dim green")
    bar.append(" " * (cells - within - beyond - unused))
    return bar


def _representation(section: Section, decisions: Sequence[ItemDecision], fallback: str) -> str:
    forms: Counter[str] = Counter()
    for d in decisions:
        if d.section is section and d.form is not None:
            forms["clipped" if d.clipped else d.form.label] += 1
    if len(forms) <= 1:
        return fallback
    order = ("full", "compact", "ref", "clipped")
    return "mixed: " + ", ".join(f"{forms[k]} {k}" for k in order if forms[k])


def header_lines(p: Projection, console: Console, epoch: str | None = None, *,
                 session: bool = False) -> list[Text]:
    from holon_ctx.cli._api import RELATION_TEXT  # noqa: PLC0415 - cheap, keeps order

    m = p.manifest
    first = m.window.get("first", p.current_turn)
    reached = " (reaches the start of the ledger)" if m.window.get("reached_start") else ""
    title = Text.assemble(("holon-ctx preview", "bold"), " of ", (p.current_turn, "bold"),
                          f" at a budget of {plural(p.budget_tokens, 'token')}")
    # Each row glosses its word once (docs/concepts.md has the longer story).
    return [title, *kv(console, [
        ("used", f"{plural(p.used_tokens, 'token')} ({pct(p.used_tokens, p.budget_tokens)}) · counter "
                 f"{p.counter}" + (" · the request a runtime sends at this turn: its provider "
                                   "messages, framing included" if session else "")),
        ("relation", Text.assemble((p.relation.value, "bold blue"),
                                   f" — {RELATION_TEXT[p.relation]} (how the current input "
                                   "connects to earlier work)")),
        ("anchor", f"{p.anchor_turn} — the earlier turn this input continues, shown with it"
                   if p.anchor_turn else
                   "none (the current turn stands alone: no continuation anchor)"),
        ("window", f"{plural(int(str(m.window.get('turns', 0))), 'earlier turn')} from {first}{reached} — "
                   "each weighed on its own; older turns return only in recalled episodes"),
        *([("epoch", epoch if session else
                     f"{epoch} — this view plans the turn afresh; the session projection "
                     "appends between re-plans (docs/session.md)")] if epoch else []),
    ])]


#: Cells of a bar row besides the name and the bar: "│ " + used/allocated + two spaces.
_BAR_FIXED = 18
#: Below this many cells after the numbers, the form goes on a line of its own.
_FORM_ROOM = 8


def bar_lines(p: Projection, console: Console, width: int) -> list[Text]:
    name_w = max(len(s.name) for s in p.manifest.sections)
    cells = max(10, min(BAR_CELLS, width - name_w - 46))
    # A narrow terminal: shorter bars, so that name, bar and numbers still share one line.
    cells = min(cells, max(3, width - name_w - 2 - _BAR_FIXED))
    caption = "scaled to the budget"[:cells]
    out = [Text(f"{'section':<{name_w}}  {caption:<{cells}}  {'used/allocated':>15}  form",
                style="dim")]

    def row_lines(row: Text, tail: str, style: str = "") -> list[Text]:
        """The row with its tail (the form) after it, or, without room, on the next line."""
        form_col = row.cell_len
        if form_col + _FORM_ROOM > width:
            row.rstrip()
            return [row, *hang(console, Text(" " * (name_w + 2)) + Text(tail, style=style),
                               width, name_w + 2)]
        row.append(tail, style=style)
        return hang(console, row, width, form_col)

    total = Text(f"{'total':<{name_w}} │", style="bold")
    total.append_text(_bar(p.used_tokens, p.budget_tokens, p.budget_tokens, cells))
    total.append(f"│ {p.used_tokens:>6}/{p.budget_tokens:<7}  ")
    out.extend(row_lines(total, f"{pct(p.used_tokens, p.budget_tokens)} of the budget"))
    for s in p.manifest.sections:
        row = Text(f"{s.name:<{name_w}} │")
        row.append_text(_bar(s.used_tokens, s.allocated_tokens, p.budget_tokens, cells))
        # A session request's current state is stated, not planned: no section of the plan.
        rep = (_representation(Section(s.name), p.decisions, s.representation)
               if s.name in _SECTION_NAMES else s.representation)
        row.append(f"│ {s.used_tokens:>6}/{s.allocated_tokens:<7}  ")
        out.extend(row_lines(row, rep, "dim" if rep == "empty" else ""))
    legend = Text(f"{'':<{name_w}}  ")
    for char, style, words in (("█", "green", "used"), ("▓", "yellow", "beyond allocation"),
                               ("░", "dim green", "allocated, unused")):
        legend.append(char, style=style)
        legend.append(f" {words}  ", style="dim")
    out.extend(hang(console, legend, width, name_w + 2))
    return out


def _gutter_legend() -> Text:
    legend = Text("gutter: ", style="dim")
    for trust, (tag, style) in TAGS.items():
        if tag:
            legend.append(tag, style=style)
            legend.append(f" {_TRUST_WORDS[trust]}  ", style="dim")
    legend.append("(blank) written by holon-ctx", style="dim")
    return legend


def section_lines(p: Projection, console: Console, width: int, trust_of: TrustOf) -> list[Text]:
    lines = _Lines(console, width)
    lines.text(Text("the prompt, as the model reads it", style="bold"))
    lines.out.extend(_gutter_legend().wrap(console, width))
    for section in Section:  # render order (the enum's order)
        items = p.section_items.get(section)
        if not items:
            continue
        # A title says what fenced text is in the sections that hold turns: wrapped like any
        # other line, so none is wider than the terminal.
        lines.out.extend(Text(SECTION_TITLES[section], style="bold reverse").wrap(console, width))
        for _key, rendered in items:
            for block in rendered.blocks:
                for kind, mark, line in _marked_lines(block, trust_of):
                    lines.add(kind, line, mark)
    return lines.out


def request_lines(request: SessionRequest, console: Console, width: int,
                  trust_of: TrustOf) -> list[Text]:
    """The session request as the provider gets it: each message's role and place in the
    request (what a prompt cache keeps), then its content behind the trust gutter."""
    lines = _Lines(console, width)
    # Wrapped: at --width 40 the heading is wider than the terminal (the prompt's lines are
    # emitted as they are, not hung).
    lines.out.extend(Text("the request, message by message, as the model reads it",
                          style="bold").wrap(console, width))
    lines.out.extend(_gutter_legend().wrap(console, width))
    for place, part, blocks in part_blocks(request):
        role = part.role.value + (f" (result of call {part.call_id})" if part.call_id else "")
        lines.out.extend(Text(f"── {role} · {place}", style="bold reverse").wrap(console, width))
        for block in blocks:
            for kind, mark, line in _marked_lines(block, trust_of):
                lines.add(kind, line, mark)
    return lines.out


def print_preview(console: Console, p: Projection, trust_of: TrustOf, *,
                  left_out_limit: int = 25, epoch: str | None = None,
                  request: SessionRequest | None = None,
                  control: ControlState | None = None) -> None:
    """Write the whole preview to ``console`` at its width: the header and budget bars, the
    summary, the prompt with its trust gutter, then the details (folds, episodes, left out).
    With ``request`` (``p`` is then :func:`~holon_ctx.cli.session_view.as_projection` of it),
    the prompt is the session request's messages."""
    width = console.width
    prompt = (section_lines(p, console, width, trust_of) if request is None
              else request_lines(request, console, width, trust_of))
    parts: list[Iterable[Text]] = [
        header_lines(p, console, epoch, session=request is not None), [Text()],
        bar_lines(p, console, width), [Text()],
        glance_lines(p, console, session=request is not None, control=control), [Text()],
        prompt, [Text()],
        detail_lines(p, console, width, left_out_limit, session=request is not None),
    ]
    lines: list[Text] = []
    for i, part in enumerate(parts):
        if i == 6:  # the sections: already wrapped with their gutter
            lines.extend(part)
            continue
        for line in part:
            lines.extend(hang(console, line, width))
    emit(console, lines)
