"""The rich preview: what the model will read, with where every line came from and how far to trust it.

How it works. The projection hands over, per section, the items it chose and their blocks (the
exact text of the prompt, in order). Each block is cut into lines and every line gets a *tag*:

    op   the operator's own words (trusted instructions)
    rt   runtime facts (task results, runtime notes, configuration)
    ext  untrusted external or tool text, inside a <data> fence
    mdl  model-written text (assistant messages, briefs), inside a <data> fence
         (blank) structure written by holon_ctx itself: titles, turn headings, labels

Fenced lines are tagged from the fence's own ``trust=`` attribute, which the renderer writes and the
fenced text cannot forge (``neutralise_fences`` runs on every body). Unfenced bodies are the
operator's or the runtime's: ``trust_of(ref)`` asks the ledger which. The tag is printed in a gutter
on every physical line, so trust stays visible in ``--plain`` output and in a pipe, and colour only
adds emphasis.

Everything is laid out by hand (pre-wrapped ``Text`` lines) rather than with rich tables for the
long parts: it keeps the output byte-stable for golden tests and the preview of a few hundred lines
well under the one-second start-to-screen target. The module also draws ``explain`` and ``diff``
(the last part): one place for every line a person reads, a little past the house's ~400 lines.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from rich.cells import cell_len
from rich.console import Console
from rich.text import Text

from holon_ctx.projection.model import SECTION_ORDER, Form, Priority, Section
from holon_ctx.projection.planner import Block
from holon_ctx.projection.projector import SECTION_TITLES, ItemDecision, Projection

if TYPE_CHECKING:
    from holon_ctx.cli.diff import Difference
    from holon_ctx.cli.explain import Explanation

__all__ = ["TAGS", "TrustOf", "print_diff", "print_explanation", "print_preview", "tag_block_lines",
           "visible"]

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
#: Label lines the renderer puts above the operator's own (unfenced) words.
_OPERATOR_LABELS = ("operator (trusted) ", "pinned operator words:")
_FENCE_OPEN = re.compile(r'^<data ref="[^"]*" origin="[^"]*" trust="([a-z_]+)">$')
_GUTTER = 4  # "ext" plus the bar

# Structure lines keep their own emphasis: headings, alerts, folds and the relation line.
_STRUCTURE_STYLES: tuple[tuple[str, str], ...] = (
    ("### ", "bold"),
    ("ALERT ", "bold red"),
    ("- folded ", "italic dim"),
    ("relation: ", "bold blue"),
)

BAR_CELLS = 40


def tag_block_lines(block: Block, trust_of: TrustOf) -> Iterator[tuple[str, str]]:
    """``(kind, line)`` for each line of a block; kind is a trust value, "fence" or "structure"."""
    head = block.head.splitlines()
    fence: str | None = None
    for line in head:
        m = _FENCE_OPEN.match(line)
        if m:
            fence = m.group(1)
            yield "fence:" + fence, line
        elif fence is not None:
            # Episode text blocks carry whole fenced excerpts in their head.
            if line == "</data>":
                yield "fence:" + fence, line
                fence = None
            else:
                yield fence, line
        else:
            yield "structure", line
    if block.body:
        if fence is None:
            # An unfenced body is trusted text: the operator's words or a runtime fact. The ledger
            # says which; a block that names no ref (a pin's copy of its target) has only its
            # label, which untrusted text cannot wear (neutralise_fences rewrites the trusted one).
            # Unknown stays the lower of the two: never promoted to the operator's trust.
            trust = (trust_of(block.refs[0]) if block.refs else (
                "trusted_operator" if head and head[-1].startswith(_OPERATOR_LABELS) else None)
            ) or "runtime_fact"
            if trust not in TAGS:
                trust = "runtime_fact"
        else:
            trust = fence
        for line in block.body.splitlines():
            yield trust, line
    for line in block.tail.splitlines():
        yield ("fence:" + fence if fence else "structure"), line


#: C0 controls but tab and newline, DEL and C1: tool output can carry terminal escape sequences,
#: and a viewer must not let untrusted text move the cursor, recolour the screen or retitle it.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def visible(line: str) -> str:
    """The line as it can be shown on a terminal: control characters as ``\\xNN``, tabs as spaces
    (a tab's width depends on the column, which the gutter shifts)."""
    if "\t" in line:
        # Tab stops every 8 cells, counted in terminal cells (a CJK character takes two).
        out: list[str] = []
        column = 0
        for i, part in enumerate(line.split("\t")):
            if i:
                pad = 8 - column % 8
                out.append(" " * pad)
                column += pad
            out.append(part)
            column += cell_len(part)
        line = "".join(out)
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", line)


class _Lines:
    """Collects gutter-tagged, pre-wrapped lines of one width."""

    def __init__(self, console: Console, width: int) -> None:
        self.console = console
        self.width = width
        self.out: list[Text] = []

    def add(self, kind: str, line: str) -> None:
        trust = kind.removeprefix("fence:")
        tag, style = TAGS.get(trust, ("", ""))
        if kind.startswith("fence:"):
            style = f"dim {style}".strip()
        elif kind == "structure":
            style = next((s for prefix, s in _STRUCTURE_STYLES if line.startswith(prefix)), "")
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


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


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


def header_lines(p: Projection, console: Console) -> list[Text]:
    from holon_ctx.projection.relation import RELATION_TEXT  # noqa: PLC0415 - cheap, keeps order

    m = p.manifest
    first = m.window.get("first", p.current_turn)
    reached = " (reaches the start of the ledger)" if m.window.get("reached_start") else ""
    title = Text.assemble(("holon-ctx preview", "bold"), " of ", (p.current_turn, "bold"),
                          f" at a budget of {p.budget_tokens} tokens")
    return [title, *_kv(console, [
        ("used", f"{p.used_tokens} tokens ({_pct(p.used_tokens, p.budget_tokens)}) · counter "
                 f"{p.counter}"),
        ("relation", Text.assemble((p.relation.value, "bold blue"),
                                   f" — {RELATION_TEXT[p.relation]}")),
        ("anchor", p.anchor_turn or "none (the current turn stands alone)"),
        ("window", f"{m.window.get('turns', 0)} earlier turns from {first}{reached}"),
    ])]


def bar_lines(p: Projection, console: Console, width: int) -> list[Text]:
    name_w = max(len(s.name) for s in p.manifest.sections)
    cells = max(10, min(BAR_CELLS, width - name_w - 46))
    caption = "scaled to the budget"[:cells]
    out = [Text(f"{'section':<{name_w}}  {caption:<{cells}}  {'used/allocated':>15}  form",
                style="dim")]
    total = Text(f"{'total':<{name_w}} │", style="bold")
    total.append_text(_bar(p.used_tokens, p.budget_tokens, p.budget_tokens, cells))
    total.append(f"│ {p.used_tokens:>6}/{p.budget_tokens:<7}  "
                 f"{_pct(p.used_tokens, p.budget_tokens)} of the budget")
    out.append(total)
    for s in p.manifest.sections:
        row = Text(f"{s.name:<{name_w}} │")
        row.append_text(_bar(s.used_tokens, s.allocated_tokens, p.budget_tokens, cells))
        rep = _representation(Section(s.name), p.decisions, s.representation)
        row.append(f"│ {s.used_tokens:>6}/{s.allocated_tokens:<7}  ")
        form_col = row.cell_len
        row.append(rep, style="dim" if rep == "empty" else "")
        out.extend(hang(console, row, width, form_col))
    legend = Text(f"{'':<{name_w}}  ")
    for char, style, words in (("█", "green", "used"), ("▓", "yellow", "beyond allocation"),
                               ("░", "dim green", "allocated, unused")):
        legend.append(char, style=style)
        legend.append(f" {words}  ", style="dim")
    out.append(legend)
    return out


def section_lines(p: Projection, console: Console, width: int, trust_of: TrustOf) -> list[Text]:
    lines = _Lines(console, width)
    legend = Text("gutter: ", style="dim")
    for trust, (tag, style) in TAGS.items():
        if tag:
            legend.append(tag, style=style)
            legend.append(f" {_TRUST_WORDS[trust]}  ", style="dim")
    legend.append("(blank) written by holon-ctx", style="dim")
    lines.out.extend(legend.wrap(console, width))
    for section in SECTION_ORDER:
        items = p.section_items.get(section)
        if not items:
            continue
        title = SECTION_TITLES[section]
        lines.text(Text(title, style="bold reverse"))
        for _key, rendered in items:
            for block in rendered.blocks:
                for kind, line in tag_block_lines(block, trust_of):
                    lines.add(kind, line)
    return lines.out


def fold_lines(p: Projection) -> list[Text]:
    if not p.folds:
        return [Text("folded ranges: none", style="dim")]
    out = [Text(f"folded ranges ({len(p.folds)}): each shows in the prompt as one counted line",
                style="bold")]
    for f in p.folds:
        span = f.first if f.first == f.last else f"{f.first}–{f.last}"
        kinds = ", ".join(f"{k}×{n}" for k, n in sorted(f.kinds.items(), key=lambda kv: (-kv[1], kv[0])))
        out.append(Text.assemble("  ", (span, "bold"), f"  {f.count} ", ("· ", "dim"), kinds))
    return out


def episode_lines(p: Projection) -> list[Text]:
    eps = p.manifest.episodes
    if not eps:
        return [Text("recalled episodes: none", style="dim")]
    out = [Text(f"recalled episodes ({len(eps)}), in recall order", style="bold")]
    for e in eps:
        covers = "–".join(e.covers)
        out.append(Text.assemble("  ", (e.ref, "bold"), f"  score {e.score:.3f}  covers {covers}  ",
                                 (e.representation, "dim" if e.representation == "omitted" else "")))
    return out


_OMISSION = {None: "budget_exhausted", Form.COMPACT: "compacted_for_budget",
             Form.REF: "ref_only_for_budget"}


def left_out_rows(p: Projection) -> list[tuple[ItemDecision, str]]:
    """Items left out or shrunk, most important first: ``(decision, reason code)``."""
    rows: list[tuple[ItemDecision, str]] = []
    for d in p.decisions:
        if d.clipped:
            rows.append((d, "clipped_to_fit"))
        elif d.form is None or (d.tokens < d.full_tokens and d.form is not Form.FULL):
            rows.append((d, _OMISSION[d.form]))
    order = {s: i for i, s in enumerate(SECTION_ORDER)}
    rows.sort(key=lambda r: (r[0].priority, order[r[0].section]))
    return rows


def left_out_lines(p: Projection, width: int, limit: int) -> list[Text]:
    reasons: Counter[str] = Counter()
    for s in p.manifest.sections:
        reasons.update(o["reason"] for o in s.omitted)
    window = p.manifest.window
    out: list[Text] = []
    rows = left_out_rows(p)
    summary = ", ".join(f"{k} {n}" for k, n in reasons.most_common()) or "none"
    out.append(Text(f"left out or shrunk: {len(rows)} items", style="bold"))
    out.append(Text(f"  manifest reason codes (refs): {summary}", style="dim"))
    if not window.get("reached_start"):
        out.append(Text(f"  turns before {window.get('first')} are outside the recent window "
                        "(not candidates; episodes recall them when archived)", style="dim"))
    if not rows:
        return out
    key_w = min(max(len(d.key) for d, _ in rows), 40)
    with_reason = key_w + 72 <= width
    out.append(Text(f"  {'item':<{key_w}}  {'priority':<10} {'now':<8} {'tokens now/full':>15}  "
                    f"{'enters at':<10}" + ("  reason" if with_reason else ""), style="dim"))
    for d, reason in rows[:limit]:
        now = "omitted" if d.form is None else ("clipped" if d.clipped else d.form.label)
        tokens = f"{d.tokens}/{d.full_tokens}"
        at = f"≥ {d.next_budget}" if d.next_budget else "-"
        row = Text(f"  {d.key:<{key_w}}  ")
        row.append(f"{d.priority.label:<10} ",
                   style="bold" if d.priority <= Priority.HIGH else "")
        row.append(f"{now:<8} {tokens:>15}  {at:<10}" + (f"  {reason}" if with_reason else ""))
        out.append(row)
    if len(rows) > limit:
        out.append(Text(f"  … and {len(rows) - limit} more (all of them: holon-ctx project --json; "
                        "one of them: holon-ctx explain REF)", style="dim"))
    return out


def print_preview(console: Console, p: Projection, trust_of: TrustOf, *,
                  left_out_limit: int = 25) -> None:
    """Write the whole preview to ``console`` at its width."""
    width = console.width
    parts: list[Iterable[Text]] = [
        header_lines(p, console), [Text()], bar_lines(p, console, width), [Text()],
        section_lines(p, console, width, trust_of), [Text()],
        fold_lines(p), episode_lines(p), [Text()], left_out_lines(p, width, left_out_limit),
    ]
    lines: list[Text] = []
    for i, part in enumerate(parts):
        if i == 4:  # the sections: already wrapped with their gutter
            lines.extend(part)
            continue
        for line in part:
            lines.extend(hang(console, line, width))
    _emit(console, lines)


def hang(console: Console, line: Text, width: int, indent: int | None = None) -> list[Text]:
    """``line`` wrapped to ``width`` with a hanging indent (default: its own indent plus two)."""
    if line.cell_len <= width:
        return [line]
    plain = line.plain
    if indent is None:
        indent = len(plain) - len(plain.lstrip(" ")) + 2
    first = line.wrap(console, width, overflow="fold")[0]
    rest = line[len(first.plain):]
    first.rstrip()
    rest = rest[len(rest.plain) - len(rest.plain.lstrip(" ")):]
    room = max(10, width - indent)
    return [first, *(Text(" " * indent) + part
                     for part in rest.wrap(console, room, overflow="fold"))]


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _emit(console: Console, lines: Sequence[Text]) -> None:
    """One print of pre-wrapped lines: rich must not re-wrap them (no_wrap, soft_wrap), and one
    call is much cheaper than a call per line. Trailing blanks go: they only make diffs noisy."""
    for line in lines:
        line.rstrip()
    if console.color_system is None:
        # No colour at all (a pipe, --plain): the text is all there is, and writing it directly
        # skips rich's per-segment rendering (a third of the view's time on the demo).
        console.file.write("".join(f"{line.plain}\n" for line in lines))
        console.file.flush()
        return
    console.print(Text("\n").join(lines), no_wrap=True, crop=False, overflow="ignore",
                  soft_wrap=True)


# -- explain and diff ----------------------------------------------------------------------------
def _kv(console: Console, rows: Sequence[tuple[str, str | Text]], label_w: int = 11) -> list[Text]:
    """Label/value rows; long values wrap under themselves (hanging indent)."""
    out: list[Text] = []
    room = max(20, console.width - label_w)
    for label, value in rows:
        text = value if isinstance(value, Text) else Text(visible(value))
        for i, part in enumerate(text.wrap(console, room, overflow="fold")):
            out.append(Text.assemble((f"{label if i == 0 else '':<{label_w}}", "dim"), part))
    return out


_STATUS_STYLE = {"in_full": "bold green", "excerpted": "bold green", "clipped": "bold yellow",
                 "clipped_out": "bold yellow",
                 "compacted": "bold yellow", "ref_only": "bold yellow", "omitted": "bold red",
                 "folded": "bold blue", "archived": "bold blue", "outside_window": "bold red",
                 "not_a_candidate": "bold red", "not_yet_appended": "bold red"}


def print_explanation(console: Console, e: Explanation) -> None:
    """Write one explanation: status first, then the facts it rests on, then what would change it."""
    title = Text.assemble(("explain ", "bold"), (e.ref, "bold"),
                          f" · budget {e.budget_tokens} · as of {e.current_turn}")
    rows: list[tuple[str, str | Text]] = [
        ("status", Text.assemble((e.status, _STATUS_STYLE.get(e.status, "bold")), f" — {e.summary}"))]
    if e.record is not None:
        r = e.record
        trust = r["trust"] or "unknown"
        if "trigger" in r:
            what = Text(f"turn · trigger {r['trigger']} · origin {r['origin']}")
            if "priority" in r:
                what.append(f" · on its own: {r['priority']} ({', '.join(r['facts'])})")
        else:
            owner = f" · owned by {r['turn']}" if r["turn"] else ""
            what = Text.assemble(f"{r['kind']} · origin {r['origin']} · trust ",
                                 (trust, TAGS.get(trust, ("", ""))[1]),
                                 f" · {r['tokens']} tokens{owner}")
        rows.append(("record", what))
    if e.item is not None:
        i = e.item
        rows.append(("item", f"{i['key']} in {i['section']} ({i['kind']})"))
        rows.append(("priority", f"{i['priority']}: {', '.join(i['reasons']) or '-'}"))
        if i["kind"] == "turn":
            rows.append(("chain", "the current turn" if i["chain"] == "current" else
                         f"current chain, linked by rule {i['chain']}" if i["chain"] else
                         "not in the current chain"))
        rows.append(("tokens", f"{i['tokens']} of {i['full_tokens']} ({i['form']})"))
    if e.shown_as:
        rows.append(("shown", e.shown_as))
    if e.reason:
        rows.append(("reason", e.reason))
    if e.fold is not None:
        f = e.fold
        if "count" in f:
            kinds = ", ".join(f"{k}×{n}" for k, n in sorted(f["kinds"].items(),
                                                           key=lambda kv: (-kv[1], kv[0])))
            span = f["first"] if f["first"] == f["last"] else f"{f['first']}–{f['last']}"
            left_out = " (the fold line itself is left out)" if f.get("shown") is False else ""
            rows.append(("fold", f"{span} · {_n(f['count'], 'turn')} · {kinds}{left_out}"))
        else:
            rows.append(("fold", f"the run starting at {f['first']} (its fold line is left out)"))
    if e.episode is not None:
        ep = e.episode
        score = "" if ep["score"] is None else f" · score {ep['score']:.3f}"
        rows.append(("episode", f"{ep['ref']} covers {'–'.join(ep['covers'])}{score} · "
                                f"{ep['representation']}"))
    if e.window_first and e.status in ("outside_window", "archived", "not_a_candidate"):
        rows.append(("window", f"first turn in the recent window: {e.window_first}"))
    rows.append(("to get in", e.to_get_in))
    _emit(console, [title, *_kv(console, rows)])


def _ref_list(console: Console, label: str, refs: Sequence[str]) -> list[Text]:
    if not refs:
        return _kv(console, [(label, "none")], 10)
    kinds = Counter(r.partition(":")[0] for r in refs)
    head = f"{len(refs)} (" + ", ".join(f"{k} {n}" for k, n in kinds.most_common()) + ")"
    return _kv(console, [(label, head), ("", ", ".join(refs))], 10)


def print_diff(console: Console, d: Difference) -> None:
    """Write a comparison of two projections: sections, refs in and out, and cache reuse."""
    a, b = d.a, d.b
    lines = [Text.assemble(("holon-ctx diff", "bold"),
                           f" · A: budget {a['budget_tokens']} at {a['current_turn']}"
                           f" · B: budget {b['budget_tokens']} at {b['current_turn']}"),
             Text(f"used tokens {a['used_tokens']} → {b['used_tokens']} "
                  f"({b['used_tokens'] - a['used_tokens']:+d})"),
             Text()]
    name_w = max(len(s.name) for s in d.sections)
    lines.append(Text(f"{'section':<{name_w}}  {'A':>7}  {'B':>7}  {'change':>7}  form",
                      style="dim"))
    for s in d.sections:
        row = Text(f"{s.name:<{name_w}}  {s.a_tokens:>7}  {s.b_tokens:>7}  ")
        row.append(f"{s.change:>+7d}", style="green" if s.change > 0 else "red" if s.change < 0
                   else "dim")
        rep = s.a_representation if s.a_representation == s.b_representation else \
            f"{s.a_representation} → {s.b_representation}"
        row.append(f"  {rep}")
        lines.append(row)
    lines.append(Text())
    lines.extend(_ref_list(console, "entered", d.entered))
    lines.extend(_ref_list(console, "left", d.left))
    changes = [f"{c['key']} {c['a']} → {c['b']}" for c in d.form_changes]
    lines.extend(_kv(console, [("reshaped", f"{len(changes)} items changed form"
                                + (": " + "; ".join(changes) if changes else ""))], 10))
    lines.append(Text())
    pa, pb = d.stable_prefix_tokens
    if d.stable_prefix_changed:
        stable = Text.assemble(("changed", "bold red"), f" (environment section, {pa} → {pb} "
                               "tokens): a provider's prompt cache cannot reuse it")
    else:
        stable = Text.assemble(("unchanged", "bold green"), f" (environment section, {pa} tokens): "
                               "a provider's prompt cache can reuse it")
    same = ", ".join(d.identical_sections) or "none"
    first = (f"first difference in {d.first_difference}" if d.first_difference
             else "the prompts are identical")
    lines.extend(_kv(console, [
        ("stable prefix", stable),
        ("shared text", f"{_n(d.shared_prefix_tokens, 'token')} from the start; identical sections "
                        f"from the top: {same}; {first}")], 14))
    _emit(console, lines)
