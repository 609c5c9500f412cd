"""``holon-ctx replay SOURCE --budget N [--price …] [--baseline …] [--width W] [--json]``: the bill.

Makes every model call of the ledger as a runtime would (:mod:`holon_ctx.projection.measure.replay`:
right before each reply the ledger holds, and at the end) with the session projection and each
baseline, and prices every request against the one before it under a price table. What a person
reads, top to bottom (RFC 0021): every call (tokens sent, cached, billed; the session's
re-plans), the totals per approach, a chart of billed tokens per call, a legend of the columns,
and last a one-line verdict that names the cheapest approach within the budget, by how much, and
why when it is not the session. Tables are laid out as the preview's are (any width from 40
columns: columns that do not fit stack under their row, named; no figure is ever cut). In a pipe
without ``--width`` each row stays on one line; ``--json`` is for programs.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import Counter
from typing import Any

from rich.text import Text

from holon_ctx import LedgerStore, Observation
from holon_ctx.cli._api import (
    BASELINES,
    ApproachReport,
    PriceTable,
    price_table,
    replay,
    usage_store_for,
)
from holon_ctx.cli.common import (
    add_model_arg,
    add_source_args,
    console,
    model_of,
    open_source,
    positive_int,
)
from holon_ctx.cli.file_episodes import FileArchive, ReplayCompaction
from holon_ctx.cli.layout import emit, hang
from holon_ctx.cli.preview_cmds import _view_args
from holon_ctx.cli.preview_summary import Column, table_lines
from holon_ctx.cli.terminal import is_terminal, write_data_json
from holon_ctx.errors import InputError, quote_value

__all__ = ["register", "verdict"]

_BARS = "▁▂▃▄▅▆▇█"
#: Baselines replayed when ``--baseline`` is not given: the usual alternative to a projection.
DEFAULT_BASELINES = "newest"
#: Why the session re-planned, in words (``SessionRequest.replan_reason`` codes).
_REPLAN_WHY = {
    "work_item_changed": "work-item switches",
    "over_budget": "the history outgrowing the budget",
    "checkpoint": "checkpoints",
    "anchor_not_in_history": "continuations of a turn outside the history",
    "episode_recalled": "newly relevant episodes",
    "environment_changed": "environment changes",
    "pinned_turn_not_in_history": "pins of a turn outside the history",
    "relevant_decision_not_in_history": "returns to a decision outside the history",
    "topic_changed": "operator turns to another topic",
    "episode_item_resolved": "open items of a shown episode resolved",
}
#: What the session is, for the legend (the baselines' lines come from BASELINES).
_SESSION = ("holon-ctx's session projection: a cached prefix, appended to between re-plans, and "
            "a short current-state tail (docs/session.md)")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "replay", help="make every model call as a runtime would: tokens sent, cached and billed")
    add_source_args(p)
    add_model_arg(p)
    p.add_argument("--budget", type=positive_int, required=True, metavar="N",
                   help="token budget of each request (the whole request, framing included)")
    p.add_argument("--price", default="anthropic", metavar="TABLE",
                   help="anthropic, openai, gemini, or a JSON file {\"cache_read\": …, "
                        "\"cache_write\": …} (default anthropic)")
    p.add_argument("--baseline", default=DEFAULT_BASELINES, metavar="LIST",
                   help="approaches to replay beside the session projection, comma-separated: "
                        + ", ".join(BASELINES) + f"; all; or none (default {DEFAULT_BASELINES})")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    _view_args(p)
    p.set_defaults(func=cmd_replay)


def _approaches(text: str) -> list[str]:
    names = ["session"]
    wanted = {"all": ",".join(BASELINES), "none": ""}.get(text.strip(), text)
    for raw in (t.strip() for t in wanted.split(",")):
        if not raw:
            continue
        if raw not in BASELINES:
            raise InputError(f"unknown baseline {quote_value(raw)}; choose from {', '.join(BASELINES)}, "
                             "all or none", path="--baseline")
        if raw not in names:
            names.append(raw)
    return names


def verdict(reports: list[ApproachReport], budget: int) -> str:
    """One line: the cheapest approach that stays within the budget, by how much, and why when
    it is not the session (its re-plans, or its tail sent anew on every call)."""
    session = reports[0]
    within = [r for r in reports if r.over_budget == 0]
    cheapest = min(within, key=lambda r: r.billed)
    others = sorted((r for r in within if r is not cheapest), key=lambda r: r.billed)
    over = [r for r in reports if r.over_budget and r.billed < cheapest.billed]
    tail = "".join(f"; {r.name} bills less ({r.billed:,.0f}) but exceeds the {budget:,}-token "
                   f"budget on {r.over_budget} of {len(r.rows)} calls" for r in over)
    if not others:
        return (f"verdict: nothing to compare the session with (--baseline {', '.join(BASELINES)}"
                f" or all){tail}")
    if cheapest is session:
        runner = others[0]
        return (f"verdict: the session is the cheapest within the budget: {session.billed:,.0f} "
                f"billed, {_less(session, runner)} than {runner.name} "
                f"({runner.billed:,.0f}){tail}")
    # A trim that kept no message of the history bills next to nothing and cannot act: said,
    # so the bill is not read as the same work done for less.
    empty = (f"; {cheapest.name}'s request held no message of the history on "
             f"{cheapest.empty_calls} of {len(cheapest.rows)} calls (the system message alone)"
             if cheapest.empty_calls else "")
    return (f"verdict: {cheapest.name} is the cheapest within the budget: {cheapest.billed:,.0f} "
            f"billed, {_less(cheapest, session)} than the session ({session.billed:,.0f}); "
            f"why: {_why(session)}{empty}{tail}")


def _less(a: ApproachReport, b: ApproachReport) -> str:
    return f"{100 * (b.billed - a.billed) / b.billed:.1f}% less" if b.billed else "no less"


def _why(session: ApproachReport) -> str:
    """What made the session dear: its re-plans (and their causes) or its per-call tail."""
    replanned = [row for row in session.rows if row.cost.replanned]
    billed = session.billed or 1.0
    replan_share = sum(row.cost.billed for row in replanned) / billed
    if replanned and replan_share >= 0.25:
        causes = Counter(row.replan_reason or "?" for row in replanned)
        named = ", ".join(f"{n} for {_REPLAN_WHY.get(code, code)}"
                          for code, n in causes.most_common())
        return (f"the session re-planned on {len(replanned)} of {len(session.rows)} calls "
                f"({named}); a "
                f"re-plan writes its whole prefix to the cache again, and those calls billed "
                f"{100 * replan_share:.0f}% of its total")
    unshared = sum(row.cost.billed for row in session.rows if not row.cost.replanned) / billed
    return (f"the session's calls between re-plans billed {100 * unshared:.0f}% of its total: "
            "each sends its new records and its current-state tail uncached, while the "
            "baseline's requests repeat more of the one before")


def _observed(store: LedgerStore, reports: list[ApproachReport]) -> dict[str, Observation]:
    """The usage a session recorded for each replayed turn (its last observation), by turn."""
    usage = usage_store_for(store)
    try:
        found = usage.of_turns([row.turn for row in reports[0].rows])
    finally:
        usage.close()
    return {o.turn: o for o in found}


def _report_json(reports: list[ApproachReport], budget: int, price: PriceTable,
                 observed: dict[str, Observation] | None = None) -> dict[str, Any]:
    def usage(turn: str) -> dict[str, Any]:
        o = (observed or {}).get(turn)
        # Beside the replayed count: what a session estimated when it made the call, and what
        # the provider counted (RFC 0022); null where no usage was recorded.
        return {"estimated_tokens": o.estimated_tokens if o else None,
                "observed_tokens": o.observed_tokens if o else None}

    return {"budget_tokens": budget,
            "price": {"name": price.name, "cache_read": price.cache_read,
                      "cache_write": price.cache_write},
            "verdict": verdict(reports, budget).removeprefix("verdict: "),
            "approaches": {r.name: {
                "totals": {"calls": len(r.rows), "sent_tokens": r.sent_tokens,
                           "billed": round(r.billed, 2), "reuse": round(r.reuse, 4),
                           "billed_share": round(r.billed_share, 4), "replans": r.replans,
                           "replans_per_100_calls": round(r.replans_per_100, 2),
                           "over_budget": r.over_budget, "empty_calls": r.empty_calls},
                "calls": [{"turn": row.turn, "sent_tokens": row.cost.sent_tokens,
                           "request_tokens": row.request_tokens,
                           "shared_tokens": row.cost.shared_tokens,
                           "replanned": row.cost.replanned,
                           **({"replan_reason": row.replan_reason} if row.replan_reason else {}),
                           # A trim that kept no message of the history (the system message alone).
                           **({"empty": True} if row.empty else {}),
                           "billed": round(row.cost.billed, 2),
                           **(usage(row.turn) if r.name == "session" else {})}
                          for row in r.rows]}
                for r in reports}}


def chart_lines(reports: list[ApproachReport], cells: int) -> list[str]:
    """Billed tokens per call, one line per approach, the calls in order left to right: each
    cell the mean of ``ceil(calls / cells)`` consecutive calls, on one scale for every approach
    (the top bar is the dearest cell of any), so heights compare across lines."""
    calls = len(reports[0].rows)
    per = max(1, math.ceil(calls / max(1, cells)))
    means = {r.name: [sum(row.cost.billed for row in r.rows[i:i + per]) / len(r.rows[i:i + per])
                      for i in range(0, calls, per)] for r in reports}
    top = max((m for values in means.values() for m in values), default=0.0) or 1.0
    label = max(len(r.name) for r in reports)
    out = [f"{name:<{label}}  " + "".join(
        _BARS[min(len(_BARS) - 1, round(v / top * (len(_BARS) - 1)))] for v in values)
        for name, values in means.items()]
    first = f"{'':<{label}}  call 1"
    last = f"call {calls}"
    span = label + 2 + len(means[reports[0].name])
    out.append(first + last.rjust(max(1, span - len(first))))
    cell = "each cell one call" if per == 1 else f"each cell the mean of {per} calls"
    return [f"billed tokens per call ({cell}; █ = {top:,.0f} billed tokens, the same scale on "
            "every line)", *out]


def _legend(reports: list[ApproachReport], price: PriceTable) -> list[tuple[str, str]]:
    rows = [
        ("sent", "tokens the request sends: each message's role, content and tool calls, "
                 "as a prompt cache compares them"),
        ("cached", "tokens the request shares, from its start, with the request before it: a "
                   f"provider's prompt-cache hit, billed at {price.cache_read}x"),
        ("re-plan", "yes: the session planned its prefix afresh at this call (the cache holds "
                    "none of it yet); its causes are in the verdict"),
        ("billed", f"the call's price in uncached input tokens: cached tokens at "
                   f"{price.cache_read}x, new tokens written to the cache at "
                   f"{price.cache_write}x, tokens after the last cache breakpoint at 1x"),
        ("prefix reuse", "cached tokens over sent tokens, over all calls"),
        ("billed share", "billed over sent: what the calls cost against sending every token "
                         "uncached"),
        ("over budget", "calls whose request exceeds the budget"),
        ("estimated, observed", "where the session recorded the provider's usage "
                                "(Session.observe_usage): its own count of the request it sent, "
                                "and the provider's (RFC 0022)"),
    ]
    rows += [(r.name, _SESSION if r.name == "session" else BASELINES[r.name]) for r in reports]
    return rows


def cmd_replay(args: argparse.Namespace) -> int:
    price = price_table(args.price, option="--price")
    names = _approaches(args.baseline)
    framing = model_of(args).framing
    store = open_source(args)
    try:
        # A file's ledger grows the episodes a library session would while the budget binds.
        grown = ReplayCompaction(store) if FileArchive.applies(store, None) else None
        reports = replay(store, args.budget, price, approaches=names, framing=framing,
                         episodes=grown.source if grown else None,
                         before_call=grown.before_call if grown else None)
        observed = _observed(store, reports)
    finally:
        store.close()
    if args.json:
        write_data_json(json.dumps(_report_json(reports, args.budget, price, observed),
                                   ensure_ascii=False) + "\n")
        return 0
    out = console(plain=args.plain, width=args.width)
    # A pipe without --width keeps each row on one line (grep, awk); else the any-width layout.
    width = args.width or (out.width if is_terminal(sys.stdout) else 10**6)
    emit(out, _report_lines(out, reports, args.budget, price, width, observed))
    return 0


def _report_lines(out: Any, reports: list[ApproachReport], budget: int, price: PriceTable,
                  width: int, observed: dict[str, Observation]) -> list[Text]:
    lines: list[Text] = []

    def para(text: str, style: str = "") -> None:
        lines.extend(hang(out, Text(text, style=style), width, 2))

    calls = len(reports[0].rows)
    para(f"replay of {calls:,} model call{'' if calls == 1 else 's'} at {budget:,} tokens, priced as "
         f"{price.name} (cache read {price.cache_read}x, write {price.cache_write}x)", "bold")
    header, rows = _turn_table(reports, observed)
    lines.extend(table_lines(out, width, header, rows))
    lines.append(Text())
    para("totals (billed in uncached input tokens)", "bold")
    session = reports[0]
    totals = [[r.name, f"{len(r.rows):,}", f"{r.sent_tokens:,}", f"{r.billed:,.0f}",
               "-" if r is session else
               f"{100 * (r.billed - session.billed) / session.billed:+.1f}%"
               if session.billed else "-",
               f"{r.reuse:.3f}", f"{r.billed_share:.3f}",
               f"{r.replans_per_100:.1f}" if r is session else "-", f"{r.over_budget:,}"]
              for r in reports]
    lines.extend(table_lines(out, width, [
        Column("approach", style="bold"), Column("calls", right=True),
        Column("sent", right=True), Column("billed", right=True),
        Column("vs session", right=True), Column("prefix reuse", right=True),
        Column("billed share", right=True), Column("re-plans /100 calls", right=True),
        Column("over budget", right=True)], totals))
    lines.append(Text())
    chart = chart_lines(reports, min(100, max(10, width - 2 - max(len(r.name) for r in reports)
                                              - 2)))
    para(chart[0], "bold")
    lines.extend(Text("  " + line) for line in chart[1:])
    lines.append(Text())
    para("legend", "bold")
    lines.extend(table_lines(out, width, [Column("column or approach", style="bold"),
                                          Column("what it is")], _legend(reports, price)))
    lines.append(Text())
    para(verdict(reports, budget), "bold")
    return lines


def _turn_table(reports: list[ApproachReport],
                observed: dict[str, Observation]) -> tuple[list[Column], list[list[str]]]:
    """Per model call: the turn, then per approach tokens sent and cached (the same token stream
    the totals add up), the session's re-plans, and the bill; where a session recorded the
    provider's usage, its estimate and the provider's count beside them."""
    header = [Column("call", right=True), Column("turn")]
    for report in reports:
        suffix = "" if report.name == "session" else f" {report.name}"
        header += [Column(f"sent{suffix}", right=True), Column(f"cached{suffix}", right=True)]
        if report.name == "session":
            header.append(Column("re-plan", right=True))
            if observed:
                header += [Column("estimated", right=True), Column("observed", right=True)]
        header.append(Column(f"billed{suffix}", right=True, style="bold"))
    rows = []
    for i, row in enumerate(reports[0].rows):
        cells = [str(i + 1), row.turn]
        for report in reports:
            cost = report.rows[i].cost
            cells += [f"{cost.sent_tokens:,}", f"{cost.shared_tokens:,}"]
            if report.name == "session":
                cells.append("yes" if cost.replanned else "-")
                if observed:
                    o = observed.get(row.turn)
                    cells += ([f"{o.estimated_tokens:,}", f"{o.observed_tokens:,}"] if o
                              else ["-", "-"])
            cells.append(f"{cost.billed:,.0f}")
        rows.append(cells)
    return header, rows
