"""How ``explain`` and ``diff`` are drawn: status first, then the facts it rests on.

The analysis is in :mod:`holon_ctx.cli.explain` and :mod:`holon_ctx.cli.diff`; this module only
lays out their results (label/value rows that wrap under themselves at any width).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.text import Text

from holon_ctx.cli.explain import REASON_WORDS
from holon_ctx.cli.layout import emit, hang, kv
from holon_ctx.cli.preview import TAGS
from holon_ctx.cli.wording import plural

if TYPE_CHECKING:
    from holon_ctx.cli.diff import Difference
    from holon_ctx.cli.explain import Explanation

__all__ = ["print_diff", "print_explanation"]


_STATUS_STYLE = {"in_full": "bold green", "excerpted": "bold green", "clipped": "bold yellow",
                 "clipped_out": "bold yellow",
                 "compacted": "bold yellow", "ref_only": "bold yellow", "omitted": "bold red",
                 "folded": "bold blue", "archived": "bold blue", "outside_window": "bold red",
                 "not_a_candidate": "bold red", "not_yet_appended": "bold red"}


#: Where a ref sits in a session request, in words (SessionRequest.where).
_SESSION_PLACE: dict[object, str] = {
    "stable_prefix": "the stable prefix (cached across re-plans)",
    "frozen_history": "the history frozen at the epoch's re-plan (a cached prefix)",
    "appended": "the history appended since the re-plan (cached from the next request on)",
    "current_state": "the current-state tail (re-sent every request)",
}


#: A label and its value, as kv() lays them out.
_Row = tuple[str, str | Text]


def print_explanation(console: Console, e: Explanation) -> None:
    """Write one explanation: status first, then the facts it rests on, then what would change it."""
    title = Text.assemble(("explain ", "bold"), (e.ref, "bold"),
                          f" · budget {e.budget_tokens} · as of {e.current_turn}")
    rows: list[_Row] = [
        ("status", Text.assemble((e.status, _STATUS_STYLE.get(e.status, "bold")), f" — {e.summary}"))]
    if e.record is not None:
        rows.append(("record", _record_what(e.record)))
    if e.item is not None:
        rows.extend(_item_rows(e.item))
    if e.shown_as:
        rows.append(("shown", e.shown_as))
    if e.reason:
        words = REASON_WORDS.get(e.reason)
        rows.append(("reason", f"{e.reason} — {words}" if words else e.reason))
    rows.extend(_context_rows(e))
    rows.append(("to get in", e.to_get_in))
    emit(console, [*hang(console, title, console.width), *kv(console, rows)])


def _record_what(r: dict[str, Any]) -> Text:
    """The record row: a turn's trigger and origin, or an entry's kind, trust, size and owner."""
    if "trigger" in r:
        what = Text(f"turn · trigger {r['trigger']} · origin {r['origin']}")
        if "priority" in r:
            what.append(f" · on its own: {r['priority']} ({', '.join(r['facts'])})")
        return what
    trust = r["trust"] or "unknown"
    owner = f" · owned by {r['turn']}" if r["turn"] else ""
    return Text.assemble(f"{r['kind']} · origin {r['origin']} · trust ",
                         (trust, TAGS.get(trust, ("", ""))[1]),
                         f" · {plural(r['tokens'], 'token')}{owner}")


def _item_rows(i: dict[str, Any]) -> list[_Row]:
    """The plan's item: its key and section, priority, chain (a turn's) and tokens."""
    rows: list[_Row] = [("item", f"{i['key']} in {i['section']} ({i['kind']})"),
                       ("priority", f"{i['priority']}: {', '.join(i['reasons']) or '-'}")]
    if i["kind"] == "turn":
        rows.append(("chain", "the current turn" if i["chain"] == "current" else
                     f"current chain, linked by rule {i['chain']}" if i["chain"] else
                     "not in the current chain"))
    rows.append(("tokens", f"{i['tokens']} of {i['full_tokens']} ({i['form']})"))
    return rows


def _context_rows(e: Explanation) -> list[_Row]:
    """What around the ref bears on it: its fold, episode, the window, the session, the usage."""
    rows: list[_Row] = []
    if e.fold is not None:
        rows.append(("fold", _fold_text(e.fold)))
    if e.episode is not None:
        ep = e.episode
        score = "" if ep["score"] is None else f" · score {ep['score']:.3f}"
        rows.append(("episode", f"{ep['ref']} covers {'–'.join(ep['covers'])}{score} · "
                                f"{ep['representation']}"))
    if e.window_first and e.status in ("outside_window", "archived", "not_a_candidate"):
        rows.append(("window", f"first turn in the recent window: {e.window_first}"))
    if e.session is not None:
        where = _SESSION_PLACE.get(e.session.get("in_request"), "not in it")
        rows.append(("session", f"epoch since {e.session['epoch_started_at']} "
                                f"({str(e.session['epoch_reason']).replace('_', ' ')}); in the "
                                f"request a runtime sends now: {where}"))
    if e.usage is not None:
        u = e.usage
        rows.append(("usage", f"the call for {e.current_turn} ({u['model'] or 'no model named'})"
                              f": estimated {u['estimated_tokens']:,} tokens, the provider "
                              f"counted {u['observed_tokens']:,} (×{u['ratio']:.3f}; planned "
                              f"under {u['planned_tokens']:,} of {u['budget_tokens']:,})"))
    return rows


def _fold_text(f: dict[str, Any]) -> str:
    """A fold's span, size and kinds; or, for a run whose fold line is left out, its start."""
    if "count" not in f:
        return f"the run starting at {f['first']} (its fold line is left out)"
    kinds = ", ".join(f"{k}×{n}" for k, n in sorted(f["kinds"].items(),
                                                   key=lambda kv: (-kv[1], kv[0])))
    span = f["first"] if f["first"] == f["last"] else f"{f['first']}–{f['last']}"
    left_out = " (the fold line itself is left out)" if f.get("shown") is False else ""
    return f"{span} · {plural(f['count'], 'turn')} · {kinds}{left_out}"


def _ref_list(console: Console, label: str, refs: Sequence[str]) -> list[Text]:
    if not refs:
        return kv(console, [(label, "none")], 10)
    kinds = Counter(r.partition(":")[0] for r in refs)
    head = f"{len(refs)} (" + ", ".join(f"{k} {n}" for k, n in kinds.most_common()) + ")"
    return kv(console, [(label, head), ("", ", ".join(refs))], 10)


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
    lines.extend(kv(console, [("reshaped", f"{plural(len(changes), 'item')} changed form"
                                + (": " + "; ".join(changes) if changes else ""))], 10))
    lines.append(Text())
    pa, pb = d.stable_prefix_tokens
    if d.stable_prefix_changed:
        stable = Text.assemble(("changed", "bold red"), f" (environment section, {pa} → "
                               f"{plural(pb, 'token')}): a provider's prompt cache cannot reuse it")
    else:
        stable = Text.assemble(("unchanged", "bold green"), f" (environment section, {plural(pa, 'token')}): "
                               "a provider's prompt cache can reuse it")
    same = ", ".join(d.identical_sections) or "none"
    first = (f"first difference in {d.first_difference}" if d.first_difference
             else "the prompts are identical")
    lines.extend(kv(console, [
        ("stable prefix", stable),
        ("shared text", f"{plural(d.shared_prefix_tokens, 'token')} from the start; identical sections "
                        f"from the top: {same}; {first}")], 14))
    # Every line fits the width: long ones (the title, a long form change) wrap, hanging.
    emit(console, [part for line in lines for part in hang(console, line, console.width)])
