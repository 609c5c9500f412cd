"""``holon-ctx db migrate|sessions|delete-session --db URL``: a PostgreSQL database of sessions.

The schema is also created or migrated on first use by any command; ``migrate`` does it ahead of
time (a deploy step, or when the runtime's database role may not create tables). See
docs/postgres.md.
"""

from __future__ import annotations

import argparse
from typing import Any

from holon_ctx.cli.common import check_session_key, console
from holon_ctx.errors import InputError, quote_value
from holon_ctx.postgres import describe, is_postgres_url

__all__ = ["register"]


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("db", help="a PostgreSQL database: migrate, sessions, delete-session")
    sub = p.add_subparsers(dest="db_command", metavar="ACTION", required=True,
                           parser_class=type(p))
    q = sub.add_parser("migrate", help="create or upgrade the holon-ctx schema")
    q.add_argument("--db", metavar="URL", required=True, help="a postgresql:// URL")
    q.set_defaults(func=cmd_migrate)
    q = sub.add_parser("sessions", help="the sessions (ledgers) in the database")
    q.add_argument("--db", metavar="URL", required=True, help="a postgresql:// URL")
    q.add_argument("--plain", action="store_true", help="no colour")
    q.set_defaults(func=cmd_sessions)
    q = sub.add_parser("delete-session", help="delete one session's ledger, episodes and "
                                              "governed state")
    q.add_argument("--db", metavar="URL", required=True, help="a postgresql:// URL")
    q.set_defaults(func=cmd_delete)


def _url(args: argparse.Namespace) -> str:
    check_session_key(args.db, None)  # a URL of another scheme, named without its password
    if not is_postgres_url(args.db):
        raise InputError("`holon-ctx db` works on a postgresql:// URL (a SQLite file is one "
                         "ledger: it has no sessions, and migrates when opened)", source=args.db)
    return str(args.db)


def cmd_migrate(args: argparse.Namespace) -> int:
    from holon_ctx.postgres import migrate  # noqa: PLC0415

    url = _url(args)
    before, now = migrate(url)
    print(f"{describe(url)}: schema version {now}" +
          (" (already current)" if before == now else f" (was {before or 'absent'})"))
    return 0


def cmd_sessions(args: argparse.Namespace) -> int:
    from rich.table import Table  # noqa: PLC0415

    from holon_ctx.postgres import list_sessions  # noqa: PLC0415

    url = _url(args)
    sessions = list_sessions(url)
    table = Table(title=f"{len(sessions)} sessions in {describe(url)}")
    table.add_column("session key")
    table.add_column("records", justify="right")
    table.add_column("created")
    for s in sessions:
        table.add_row(s.key, str(s.records), s.created_at.isoformat(timespec="seconds"))
    out = console(plain=args.plain)
    if not out.is_terminal:
        out = console(plain=args.plain, width=200)  # a pipe or file: never truncate keys
    out.print(table)
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    from holon_ctx.postgres import delete_session  # noqa: PLC0415

    url = _url(args)
    if not args.session_key:
        raise InputError("delete-session needs --session-key KEY", source=describe(url))
    if not delete_session(url, args.session_key):
        raise InputError(f"no session {quote_value(args.session_key)} (`holon-ctx db sessions` lists them)",
                         source=describe(url))
    print(f"deleted session {quote_value(args.session_key)} from {describe(url)}")
    return 0
