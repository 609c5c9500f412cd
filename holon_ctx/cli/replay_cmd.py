"""``holon-ctx replay SOURCE --budget N [--price …] [--baseline …] [--json]``: the bill, per turn.

Walks every turn as a runtime would (:mod:`holon_ctx.projection.replay`) and prints, per turn, the
tokens sent, the tokens shared with the previous request (a provider's cache hit), whether the
session re-planned, and the billed-equivalent cost under a price table; totals at the end. On a
terminal, a rich table and a one-line chart per approach; in a pipe, plain text; ``--json`` for
programs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rich.table import Table

from holon_ctx.cli.common import add_source_args, console, open_source, positive_int
from holon_ctx.cli.terminal import is_terminal, write_data_json
from holon_ctx.errors import InputError
from holon_ctx.projection.cost import PRICES, PriceTable, load_price_table
from holon_ctx.projection.replay import APPROACHES, ApproachReport, replay
from holon_ctx.tokens import default_counter

__all__ = ["register"]

_BARS = "▁▂▃▄▅▆▇█"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "replay", help="walk every turn as a runtime would: tokens sent, cached and billed")
    add_source_args(p)
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


def _report_json(reports: list[ApproachReport], budget: int, price: PriceTable) -> dict[str, Any]:
    return {"budget_tokens": budget,
            "price": {"name": price.name, "cache_read": price.cache_read,
                      "cache_write": price.cache_write},
            "approaches": {r.name: {
                "totals": {"turns": len(r.rows), "sent_tokens": r.sent_tokens,
                           "billed": round(r.billed, 2), "reuse": round(r.reuse, 4),
                           "billed_share": round(r.billed_share, 4), "replans": r.replans,
                           "replans_per_100_turns": round(r.replans_per_100, 2),
                           "over_budget": r.over_budget},
                "turns": [{"turn": row.turn, "sent_tokens": row.cost.sent_tokens,
                           "request_tokens": row.request_tokens,
                           "shared_tokens": row.cost.shared_tokens,
                           "replanned": row.cost.replanned, "billed": round(row.cost.billed, 2)}
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
    counter = default_counter()
    store = open_source(args)
    try:
        reports = replay(store, args.budget, price, counter, approaches=names)
    finally:
        store.close()
    if args.json:
        write_data_json(json.dumps(_report_json(reports, args.budget, price),
                                   ensure_ascii=False) + "\n")
        return 0
    out = console(plain=args.plain)
    session = reports[0]
    table = Table(title=f"requests at {args.budget:,} tokens, priced as {price.name} "
                        f"(cache read {price.cache_read}×, write {price.cache_write}×)")
    table.add_column("turn")
    for report in reports:
        suffix = "" if report.name == "session" else f" {report.name}"
        table.add_column(f"sent{suffix}", justify="right")
        table.add_column(f"cached{suffix}", justify="right")
        if report.name == "session":
            table.add_column("re-plan", justify="center")
        table.add_column(f"billed{suffix}", justify="right")
    for i, row in enumerate(session.rows):
        cells = [row.turn]
        for report in reports:
            r = report.rows[i]
            cells += [f"{r.request_tokens:,}", f"{r.cost.shared_tokens:,}"]
            if report.name == "session":
                cells.append("yes" if r.cost.replanned else "")
            cells.append(f"{r.cost.billed:,.0f}")
        table.add_row(*cells)
    totals = Table(title="totals (billed in uncached-token equivalents)")
    for name in ("approach", "turns", "sent", "billed", "prefix reuse", "billed share",
                 "re-plans /100 turns", "over budget"):
        totals.add_column(name, justify="left" if name == "approach" else "right")
    for report in reports:
        totals.add_row(report.name, str(len(report.rows)), f"{report.sent_tokens:,}",
                       f"{report.billed:,.0f}", f"{report.reuse:.3f}",
                       f"{report.billed_share:.3f}",
                       f"{report.replans_per_100:.1f}" if report.name == "session" else "",
                       str(report.over_budget))
    with out.capture() as captured:
        out.print(table)
        out.print(totals)
        if is_terminal(sys.stdout):
            for report in reports:
                out.print(f"{report.name:>9} billed share per turn: {_chart(report)}")
    sys.stdout.write(captured.get())
    return 0
