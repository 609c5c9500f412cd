"""``holon-ctx replay SOURCE --budget N [--price …] [--baseline …] [--json]``: the bill, per call.

Makes every model call of the ledger as a runtime would (:mod:`holon_ctx.projection.replay`:
right before each reply the ledger holds, and at the end) and prints, per call, the tokens sent,
the tokens shared with the previous request (a provider's cache hit), whether the session
re-planned, and the billed-equivalent cost under a price table; totals at the end. On a terminal,
rich tables and a one-line chart per approach; in a pipe, aligned plain text with every column
whole; ``--json`` for programs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rich.table import Table

from holon_ctx.cli.common import (
    add_model_arg,
    add_source_args,
    console,
    model_of,
    open_source,
    positive_int,
)
from holon_ctx.cli.file_episodes import FileArchive, ReplayCompaction
from holon_ctx.cli.terminal import is_terminal, write_data_json
from holon_ctx.errors import InputError
from holon_ctx.ledger.store import LedgerStore
from holon_ctx.ledger.usage import Observation
from holon_ctx.ledger.usage_sqlite import usage_store_for
from holon_ctx.projection.cost import PRICES, PriceTable, load_price_table
from holon_ctx.projection.replay import APPROACHES, ApproachReport, replay
from holon_ctx.projection.session import Layout, SessionProjector
from holon_ctx.tokens import store_counter

__all__ = ["register"]

_BARS = "▁▂▃▄▅▆▇█"


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
    p.add_argument("--baseline", default="", metavar="LIST",
                   help="approaches to replay beside the session projection, comma-separated: "
                        + ", ".join(a for a in APPROACHES if a != "session"))
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--plain", action="store_true", help="no colour")
    p.set_defaults(func=cmd_replay)


def _price(name: str) -> PriceTable:
    if name in PRICES:
        return PRICES[name]
    if not Path(name).exists():
        raise InputError(f"not a price table name ({', '.join(PRICES)}) nor a file",
                         source=name, path="--price")
    return load_price_table(name)


def _approaches(text: str) -> list[str]:
    names = ["session"]
    for raw in (t.strip() for t in text.split(",")):
        if not raw:
            continue
        if raw not in APPROACHES or raw == "session":
            raise InputError(f"unknown baseline {raw!r}; choose from "
                             + ", ".join(a for a in APPROACHES if a != "session"),
                             path="--baseline")
        if raw not in names:
            names.append(raw)
    return names


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
            "approaches": {r.name: {
                "totals": {"calls": len(r.rows), "sent_tokens": r.sent_tokens,
                           "billed": round(r.billed, 2), "reuse": round(r.reuse, 4),
                           "billed_share": round(r.billed_share, 4), "replans": r.replans,
                           "replans_per_100_calls": round(r.replans_per_100, 2),
                           "over_budget": r.over_budget},
                "calls": [{"turn": row.turn, "sent_tokens": row.cost.sent_tokens,
                           "request_tokens": row.request_tokens,
                           "shared_tokens": row.cost.shared_tokens,
                           "replanned": row.cost.replanned, "billed": round(row.cost.billed, 2),
                           **(usage(row.turn) if r.name == "session" else {})}
                          for row in r.rows]}
                for r in reports}}


def _chart(report: ApproachReport) -> str:
    """Each turn's billed share as one bar (low is cheap), at most 100 bars."""
    shares = [row.cost.billed / row.cost.sent_tokens if row.cost.sent_tokens else 0.0
              for row in report.rows]
    if len(shares) > 100:
        step = len(shares) / 100
        shares = [max(shares[int(i * step):int((i + 1) * step)] or [0.0]) for i in range(100)]
    top = max(shares, default=1.0) or 1.0
    return "".join(_BARS[min(len(_BARS) - 1, int(s / top * (len(_BARS) - 1)))] for s in shares)


def cmd_replay(args: argparse.Namespace) -> int:
    price = _price(args.price)
    names = _approaches(args.baseline)
    framing = model_of(args).framing
    store = open_source(args)
    counter = store_counter(store)
    try:
        # A file's ledger grows the episodes a library session would while the budget binds.
        grown = ReplayCompaction(store) if FileArchive.applies(store, None) else None
        session = SessionProjector(store, counter, layout=Layout.MESSAGES,
                                   episodes=grown.source if grown else None, framing=framing)
        reports = replay(store, args.budget, price, counter, approaches=names,
                         episodes=grown.source if grown else None, session_projector=session,
                         before_call=grown.before_call if grown else None)
        observed = _observed(store, reports)
    finally:
        store.close()
    if args.json:
        write_data_json(json.dumps(_report_json(reports, args.budget, price, observed),
                                   ensure_ascii=False) + "\n")
        return 0
    title = (f"requests at {args.budget:,} tokens, priced as {price.name} "
             f"(cache read {price.cache_read}x, write {price.cache_write}x)")
    header, rows = _turn_table(reports, observed)
    totals_header = ["approach", "calls", "sent", "billed", "prefix reuse", "billed share",
                     "re-plans /100 calls", "over budget"]
    totals = [[r.name, str(len(r.rows)), f"{r.sent_tokens:,}", f"{r.billed:,.0f}",
               f"{r.reuse:.3f}", f"{r.billed_share:.3f}",
               f"{r.replans_per_100:.1f}" if r.name == "session" else "", str(r.over_budget)]
              for r in reports]
    totals_title = "totals (billed in uncached-token equivalents)"
    if not is_terminal(sys.stdout):
        # In a pipe or a file: aligned plain text, every column whole (a rich table would be
        # squeezed to 80 columns and cut its cells).
        sys.stdout.write(f"{title}\n{_plain(header, rows)}\n{totals_title}\n"
                         f"{_plain(totals_header, totals)}")
        return 0
    out = console(plain=args.plain)
    with out.capture() as captured:
        for t_title, t_header, t_rows in ((title, header, rows),
                                          (totals_title, totals_header, totals)):
            table = Table(title=t_title)
            for i, name in enumerate(t_header):
                table.add_column(name, justify="left" if i == 0 else "right", no_wrap=True)
            for cells in t_rows:
                table.add_row(*cells)
            out.print(table)
        for report in reports:
            out.print(f"{report.name:>9} billed share per call: {_chart(report)}")
    sys.stdout.write(captured.get())
    return 0


def _turn_table(reports: list[ApproachReport],
                observed: dict[str, Observation]) -> tuple[list[str], list[list[str]]]:
    """Per model call: the turn, then per approach tokens sent and cached (the same token stream
    the totals add up), the session's re-plans, and the bill; where a session recorded the
    provider's usage, its estimate and the provider's count beside them."""
    header = ["call", "turn"]
    for report in reports:
        suffix = "" if report.name == "session" else f" {report.name}"
        header += [f"sent{suffix}", f"cached{suffix}"]
        if report.name == "session":
            header.append("re-plan")
            if observed:
                header += ["estimated", "observed"]
        header.append(f"billed{suffix}")
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


def _plain(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(c) for c in col) for col in zip(header, *rows, strict=True)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    return "".join(line(cells) + "\n" for cells in [header, *rows])
