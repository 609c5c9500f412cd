"""The parts of the preview around the prompt: the summary before it, the details after it.

The summary ("at a glance") is what a newcomer reads without scrolling: the governed control
state and why it is there, what was folded, which episodes were recalled and in what order, and
how many items were left out or shrunk with their top reasons. It reads the Projection (its
manifest and item decisions), never the prompt text. The details after the prompt list every
fold, recalled episode and left-out item.

Tables at any width. A table is laid out in one line per row when its columns fit; otherwise the
leading columns that fit stay on the row's line and the others follow on an indented line as
``name value`` pairs, wrapped. No column is ever dropped, so the reason an item was left out
survives a 60-column terminal.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import attrs
from rich.cells import cell_len
from rich.console import Console
from rich.text import Text

from holon_ctx.cli.explain import omission_reason
from holon_ctx.cli.layout import hang, kv
from holon_ctx.cli.wording import plural
from holon_ctx.lowlevel import (
    ControlState,
    Form,
    ItemDecision,
    Omission,
    Priority,
    Projection,
    Section,
)

__all__ = ["Column", "detail_lines", "glance_lines", "left_out_rows", "table_lines"]

#: The order recall ranks episodes in, as the summary and the episode table state it.
RECALL_ORDER = "episodes holding a pinned open item first, then by recall score (highest first)"
#: A one-line gloss of the recall score.
RECALL_SCORE = ("how well an archived episode matches the current turn: BM25 over its text, plus "
                "boosts for the same work item, shared refs and open items")
#: What each governed-state item holds, by its key (the projector's control items).
_CONTROL = {"control:blocking": ("side effect to reconcile", "side effects to reconcile"),
            "control:obligations": ("pending obligation", "pending obligations"),
            "control:constraints": ("exact operator constraint", "exact operator constraints")}


@attrs.frozen
class Column:
    """A table column: its heading, alignment, and the style of its cells."""

    name: str
    right: bool = False
    style: str = ""


def table_lines(console: Console, width: int, columns: Sequence[Column],
                rows: Sequence[Sequence[str]], *, indent: int = 2) -> list[Text]:
    """``rows`` under ``columns`` in ``width`` cells: one line per row when they fit, else the
    leading columns that fit on the row's line and the rest stacked below it (see the module
    docstring). The last column of a one-line layout wraps under itself."""
    if not rows:
        return []
    widths = [max(cell_len(c.name), *(cell_len(r[i]) for r in rows))
              for i, c in enumerate(columns)]
    gap = 2
    # How many columns go on the row's line: all, if everything but the last fits and the last
    # keeps room for its longest word (it wraps between words, under itself); else the longest
    # prefix that fits (at least the first).
    longest_word = max(cell_len(w) for r in rows for w in r[-1].split() or [""])
    # A right-aligned last column (figures) does not wrap: it needs its whole width; a text one
    # needs its longest word, and room for its heading.
    last = widths[-1] if columns[-1].right else max(longest_word, cell_len(columns[-1].name))
    if indent + sum(widths[:-1]) + gap * (len(widths) - 1) + last <= width:
        inline = len(columns)
    else:
        inline, used = 1, indent + widths[0]
        while inline < len(columns) and used + gap + widths[inline] <= width:
            used += gap + widths[inline]
            inline += 1

    def cells(values: Sequence[str], styles: Sequence[str]) -> Text:
        line = Text(" " * indent)
        for i in range(inline):
            last = i == inline - 1
            text = values[i] if last and not columns[i].right else (
                values[i].rjust(widths[i]) if columns[i].right else values[i].ljust(widths[i]))
            line.append(text, style=styles[i])
            if not last:
                line.append(" " * gap)
        return line

    head = cells([c.name for c in columns], ["dim"] * len(columns))
    head.stylize("dim")
    out = [head]
    hang_at = indent + sum(widths[:inline - 1]) + gap * (inline - 1)
    for row in rows:
        out.extend(hang(console, cells(row, [c.style for c in columns]), width,
                        hang_at if inline == len(columns) else None))
        if inline < len(columns):
            rest = Text(" " * (indent + 2))
            for i in range(inline, len(columns)):
                if i > inline:
                    rest.append(" · ", style="dim")
                rest.append(f"{columns[i].name} ", style="dim")
                rest.append(row[i], style=columns[i].style)
            out.extend(hang(console, rest, width, indent + 4))
    return out


def left_out_rows(p: Projection) -> list[tuple[ItemDecision, str]]:
    """Items left out or shrunk, most important first: ``(decision, reason code)``."""
    rows: list[tuple[ItemDecision, str]] = []
    for d in p.decisions:
        reason = omission_reason(d)
        if reason is not None:
            rows.append((d, reason))
    order = {s: i for i, s in enumerate(Section)}
    rows.sort(key=lambda r: (r[0].priority, order[r[0].section]))
    return rows


def _by_reason(rows: list[tuple[ItemDecision, str]]) -> str:
    """Every reason with its count, commonest first: the counts add up to the items."""
    reasons = Counter(reason for _, reason in rows)
    return ", ".join(f"{r} {n}" for r, n in sorted(reasons.items(), key=lambda rn: (-rn[1], rn[0])))


def _kinds(kinds: dict[str, int], limit: int | None = None) -> str:
    ranked = sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0]))
    shown = ", ".join(f"{k}×{n}" for k, n in ranked[:limit])
    return shown + (", …" if limit is not None and len(ranked) > limit else "")


# -- the summary --------------------------------------------------------------------------------
def _governed(p: Projection) -> str:
    controls = [d for d in p.decisions if d.kind == "control"]
    if not controls:
        return ("none: no governed store for this ledger (`holon-ctx compact --db PATH` seals one "
                "when it archives old turns)")
    items = dict(p.section_items.get(Section.WORK_ITEM, ()))
    parts = []
    for d in controls:
        one, many = _CONTROL.get(d.key, (d.key, d.key))
        rendered = items.get(d.key)
        if d.form is Form.FULL and rendered is not None:
            n = len(rendered.blocks) - 1  # a heading line, then one line per entry
            parts.append(f"{n} {one if n == 1 else many}")
        else:
            parts.append(f"{many} ({'heading only' if d.form is not None else 'left out'})")
    blocking = any(d.key == "control:blocking" for d in controls)
    why = ("pinned first in the work item because it comes from the governed store (the "
           "continuity envelope), never from a summary: compaction cannot drop it or grant "
           "authority")
    if blocking:
        why += ". Reconcile = find out whether the side effect happened before acting again"
    return f"{', '.join(parts)}, {why}"


def _episodes(p: Projection) -> str:
    eps = p.manifest.episodes
    if not eps:
        return "none recalled (no archived episode ends before the recent window, or none matches)"
    forms = Counter(e.representation for e in eps)
    shown = [f"{forms[k]} {k}" for k in ("full", "clipped", "compact", "ref") if forms[k]]
    if forms["omitted"]:
        shown.append(f"{forms['omitted']} left out for budget")
    return f"{len(eps)} recalled, ranked {RECALL_ORDER}: {', '.join(shown)}"


def _left_out(p: Projection) -> str:
    rows = left_out_rows(p)
    # A huge turn is one item shown in full while its older records are left out, counted on
    # its fold line (RFC 0010, decision 7): no item row says so, so this line does.
    earlier = sum(1 for s in p.manifest.sections for o in s.omitted
                  if o["reason"] == Omission.EARLIER_IN_TURN.value)
    huge = (f"{plural(earlier, 'earlier record')} of a huge turn counted on its fold line "
            f"({Omission.EARLIER_IN_TURN.value})")
    if not rows:
        text = (f"every item is in the prompt, but {huge}" if earlier
                else "nothing: every candidate is in the prompt in full")
    else:
        high = sum(1 for d, _ in rows if d.priority <= Priority.HIGH)
        text = (f"{plural(len(rows), 'item')}" + (f", {high} of them high priority" if high else "")
                + f"; by reason {_by_reason(rows)}" + (f"; and {huge}" if earlier else ""))
    window = p.manifest.window
    if not window.get("reached_start"):
        text += f"; turns before {window.get('first')} are outside the window"
    return text


def _governed_stated(control: ControlState | None) -> str:
    """The governed state a session request states in its current state (its last part)."""
    counts = [] if control is None else [
        (len(control.blocking), "control:blocking"),
        (len(control.obligations), "control:obligations"),
        (len(control.constraints), "control:constraints")]
    parts = [f"{n} {_CONTROL[key][0 if n == 1 else 1]}" for n, key in counts if n]
    if not parts:
        return ("none: no governed store for this ledger (`holon-ctx compact --db PATH` seals one "
                "when it archives old turns)" if control is None else "none held")
    why = ("stated in the current state, the request's last part, because it comes from the "
           "governed store (the continuity envelope), never from a summary: compaction cannot "
           "drop it or grant authority")
    if control is not None and control.blocking:
        why += ". Reconcile = find out whether the side effect happened before acting again"
    return f"{', '.join(parts)}, {why}"


def glance_lines(p: Projection, console: Console, *, session: bool = False,
                 control: ControlState | None = None) -> list[Text]:
    """The summary a newcomer reads first (budget bars come just before it). ``session``: ``p``
    is a session request's (its governed state is ``control``, stated in its last part)."""
    folded = sum(f.count for f in p.folds)
    kinds: Counter[str] = Counter()
    for f in p.folds:
        kinds.update(f.kinds)
    folds = (f"{plural(len(p.folds), 'run')}, {plural(folded, 'low-value turn')} "
             f"({_kinds(dict(kinds), 3)}), one counted line each" if p.folds else "nothing")
    rows: list[tuple[str, str]] = [("governed", _governed_stated(control) if session
                                    else _governed(p)), ("folded", folds),
                                   ("episodes", _episodes(p))]
    if p.manifest.episodes:
        rows.append(("score", RECALL_SCORE))
    rows.append(("left out", _left_out(p)))
    return [Text("at a glance (every fold, episode and left-out item follows the prompt)",
                 style="bold"), *kv(console, rows)]


# -- the details after the prompt ---------------------------------------------------------------
def _fold_table(p: Projection, console: Console, width: int) -> list[Text]:
    if not p.folds:
        return [Text("folded ranges: none", style="dim")]
    head = Text(f"folded ranges ({len(p.folds)}): each shows in the prompt as one counted line",
                style="bold")
    rows = [(f.first if f.first == f.last else f"{f.first}–{f.last}", str(f.count),
             _kinds(f.kinds)) for f in p.folds]
    return [head, *table_lines(console, width, [Column("range", style="bold"),
                                                Column("turns", right=True), Column("kinds")],
                               rows)]


def _episode_table(p: Projection, console: Console, width: int) -> list[Text]:
    eps = p.manifest.episodes
    if not eps:
        return [Text("recalled episodes: none", style="dim")]
    why = {d.key: d for d in p.decisions if d.kind == "episode"}
    out = [Text(f"recalled episodes ({len(eps)}), ranked {RECALL_ORDER}", style="bold"),
           Text(f"  recall score: {RECALL_SCORE}", style="dim")]
    rows = []
    for rank, e in enumerate(eps, 1):
        d = why.get(e.ref)
        rows.append((str(rank), e.ref, f"{e.score:.3f}", e.representation,
                     d.priority.label if d else "-", ", ".join(d.reasons) if d else "-",
                     "–".join(e.covers)))
    return out + table_lines(console, width, [
        Column("#", right=True), Column("episode", style="bold"), Column("score", right=True),
        Column("form"), Column("priority"), Column("why recalled"), Column("covers")], rows)


def _plan_entries(p: Projection) -> dict[str, int]:
    """A session request's items by key: the plan budget at which its last re-plan would have
    kept each one (larger, or at all), as the manifest keeps it (RFC 0024, decision 5)."""
    return {str(item["key"]): n for section in p.manifest.sections for item in section.items
            if isinstance(n := item.get("next_budget"), int) and n > 0}


def _enters_note(p: Projection) -> Text:
    """What a session request's "enters at" means, and why it is not a request budget."""
    info = p.manifest.session or {}
    planned = info.get("plan_budget_tokens")
    at = f", planned at {planned} of {p.budget_tokens} tokens" if planned else ""
    return Text(f"  enters at: the plan budget at which the last re-plan (at "
                f"{info.get('epoch_started_at', '?')}{at}) would have kept the item larger, or "
                "at all; a session changes what it holds only when it re-plans (the request "
                "budget for the turn planned afresh: holon-ctx explain REF)",
                style="dim")


def _left_out_table(p: Projection, console: Console, width: int, limit: int, *,
                    session: bool = False) -> list[Text]:
    rows = left_out_rows(p)
    # The same items and counts as the summary: one count for one set (issue 27).
    out = [Text(f"left out or shrunk: {plural(len(rows), 'item')}"
                + (f", by reason {_by_reason(rows)}" if rows else ""), style="bold")]
    window = p.manifest.window
    if not window.get("reached_start"):
        out.append(Text(f"  turns before {window.get('first')} are outside the recent window "
                        "(not candidates; episodes recall them when archived)", style="dim"))
    # The reason comes second: it is what a reader wants, and it also says what the item is now
    # (budget_exhausted: omitted; compacted_for_budget, ref_only_for_budget, clipped_to_fit).
    # A session request's decisions carry no request budget to enter at (a session's items
    # change only at re-plans): its column is the re-plan's plan budget, labelled as such.
    planned = _plan_entries(p) if session else {}
    table = [(d.key, reason, d.priority.label, f"{d.tokens}/{d.full_tokens}",
              f"plan ≥ {planned[d.key]}" if d.key in planned
              else f"≥ {d.next_budget}" if d.next_budget else "-") for d, reason in rows[:limit]]
    out += table_lines(console, width, [
        Column("item"), Column("reason"), Column("priority"),
        Column("tokens now/full", right=True), Column("enters at")], table)
    if planned and any(d.key in planned for d, _ in rows[:limit]):
        out.append(_enters_note(p))
    if len(rows) > limit:
        out.append(Text(f"  … and {len(rows) - limit} more (all of them: holon-ctx project --json; "
                        "one of them: holon-ctx explain REF)", style="dim"))
    return out


def detail_lines(p: Projection, console: Console, width: int, left_out_limit: int, *,
                 session: bool = False) -> list[Text]:
    """Every fold, recalled episode and left-out item, after the prompt. ``session``: ``p`` is
    a session request's (its "enters at" is the last re-plan's plan budget)."""
    return [*_fold_table(p, console, width), Text(), *_episode_table(p, console, width), Text(),
            *_left_out_table(p, console, width, left_out_limit, session=session)]
