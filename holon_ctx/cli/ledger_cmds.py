"""``holon-ctx import``, ``export`` and ``stats``: the ledger in and out."""

from __future__ import annotations

import argparse
import io
import sqlite3
import sys
from pathlib import Path
from typing import Any

from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn
from rich.table import Table

from holon_ctx import LedgerStore
from holon_ctx.cli._api import sniff_ledger
from holon_ctx.cli.common import (
    FORMAT_OPTION,
    add_source_args,
    check_session_key,
    console,
    db_name,
    open_db,
    open_source,
    remove_empty_session,
)
from holon_ctx.cli.dbfiles import write_db
from holon_ctx.cli.inputs import regular_input
from holon_ctx.cli.outputs import output_file
from holon_ctx.cli.terminal import is_terminal, say, write_data_json
from holon_ctx.cli.wording import plural
from holon_ctx.errors import InputError, StoreError
from holon_ctx.lowlevel import (
    Detection,
    LedgerStats,
    TranscriptFormat,
    export_jsonl,
    import_any,
    import_jsonl,
)
from holon_ctx.postgres import is_postgres_url

__all__ = ["register"]

#: Files above this size get a progress bar on a terminal; smaller imports finish too fast to need one.
_PROGRESS_BYTES = 2_000_000


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("import", help="import a ledger (JSONL v1) or a transcript into a "
                                             "SQLite database")
    p.add_argument("file", metavar="FILE", help="the ledger JSONL file or transcript to read")
    p.add_argument("--db", metavar="PATH", required=True,
                   help="the SQLite ledger to append to (created when missing)")
    p.add_argument("--from", dest="source_format", default="auto",
                   choices=["auto", *(f.value for f in TranscriptFormat)],
                   help="the format of FILE (default: detect it and say which on stderr)")
    p.add_argument("--id-prefix", default="", metavar="PREFIX",
                   help="prefix for the ids of records made from a transcript, so that several "
                        "transcripts can share one database")
    p.set_defaults(func=cmd_import)

    p = subparsers.add_parser("export", help="write a SQLite ledger as JSONL v1 (stdout or -o)")
    p.add_argument("--db", metavar="PATH", required=True, help="the SQLite ledger to write out")
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE (default: stdout)")
    p.set_defaults(func=cmd_export)

    p = subparsers.add_parser("stats", help="turns, records and tokens by kind and trust")
    add_source_args(p)
    p.add_argument("--plain", action="store_true", help="no colour")
    p.set_defaults(func=cmd_stats)


def cmd_import(args: argparse.Namespace) -> int:
    check_session_key(args.db, args.session_key)
    # A pipe or device is copied first (capped): it is read more than once (detection, parsing,
    # and again if another import creates the database meanwhile).
    with regular_input(args.file) as src:
        return _import(args, src)


def _import(args: argparse.Namespace, src: Path) -> int:
    out = console(stderr=True)
    fmt = args.source_format
    session = args.session_key

    def work(store: LedgerStore) -> tuple[Detection, int, LedgerStats]:
        detection = Detection(TranscriptFormat.LEDGER, f"given with {FORMAT_OPTION.format(fmt)}"
                              if fmt != "auto" else "ledger JSONL by its name or first line")
        if fmt != TranscriptFormat.LEDGER and not (fmt == "auto" and sniff_ledger(src)):
            # A transcript: parsed whole first, then appended in one transaction.
            detection, n = import_any(src, store, fmt, id_prefix=args.id_prefix,
                                      option=FORMAT_OPTION, prefix_option="--id-prefix {}")
        elif args.id_prefix:
            raise InputError("--id-prefix applies to transcripts; ledger JSONL keeps its own ids",
                             source=args.file)
        elif (size := src.stat().st_size) >= _PROGRESS_BYTES and out.is_terminal:
            with Progress("[progress.description]{task.description}", BarColumn(),
                          DownloadColumn(), TimeRemainingColumn(), console=out,
                          transient=True) as progress:
                task = progress.add_task(f"importing {src.name}", total=size)
                n = import_jsonl(src, store, on_bytes=lambda b: progress.advance(task, b))
        else:
            n = import_jsonl(src, store)
        return detection, n, store.stats()

    if is_postgres_url(args.db):
        store = open_db(args.db, must_exist=False, session=session)
        try:
            detection, n, stats = work(store)
        except BaseException:
            store.close()
            if getattr(store, "created", False):
                remove_empty_session(args.db, session)
            raise
        store.close()
    else:
        # A new database is built privately and published only once the import committed: a
        # failed import never removes a database file another process may be writing (RFC 0006).
        detection, n, stats = write_db(args.db, work)
    if args.source_format == "auto":
        say(f"holon-ctx: read {args.file} as {detection.format.value} ({detection.reason})",
            file=sys.stderr)
    say(f"imported {plural(n, 'record')} from {args.file} into {db_name(args.db, session)} "
        f"({plural(stats.turns, 'turn')}, {plural(stats.records, 'record')} in the ledger)")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    store = open_db(args.db, must_exist=True, session=args.session_key)
    try:
        if args.output:
            # Written beside the file and renamed into place when complete: a failure leaves
            # no partial export that looks whole.
            with output_file(args.output) as out:
                export_jsonl(store, out)
        elif is_terminal(sys.stdout):
            # On a terminal only: the same JSON with unsafe characters \u-escaped (RFC 0007).
            buffer = io.BytesIO()
            export_jsonl(store, buffer)
            write_data_json(buffer.getvalue())
            sys.stdout.flush()
        else:
            export_jsonl(store, sys.stdout.buffer)
            sys.stdout.buffer.flush()
    finally:
        store.close()
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    store = open_source(args)
    try:
        stats = store.stats()
    except sqlite3.DatabaseError as exc:
        # Damaged pages can pass the open and fail here, mid-read: still one line, exit 2.
        store.close()
        raise StoreError(f"{args.db or args.source}: not a usable holon-ctx database ({exc})") from None
    out = console(plain=args.plain)
    table = Table(title=f"ledger: {plural(stats.turns, 'turn')}, {plural(stats.records, 'record')} "
                        f"(tokens by {stats.counter})")
    table.add_column("kind")
    table.add_column("records", justify="right")
    table.add_column("tokens", justify="right")
    for kind in sorted(stats.records_by_kind):
        table.add_row(kind, str(stats.records_by_kind[kind]),
                      str(stats.tokens_by_kind.get(kind, 0)))
    trust = Table(title="tokens by trust")
    trust.add_column("trust")
    trust.add_column("tokens", justify="right")
    for name in sorted(stats.tokens_by_trust):
        trust.add_row(name, str(stats.tokens_by_trust[name]))
    extra = getattr(args, "_extra_stats", None)
    try:
        # Everything is rendered into a capture first: an error in the per-section part (budget
        # too small, no turns) must leave stdout empty, not print half a report.
        with out.capture() as captured:
            out.print(table)
            out.print(trust)
            if extra is not None:
                extra(store, out)
    finally:
        store.close()
    sys.stdout.write(captured.get())
    return 0
