"""``holon-ctx compact --db PATH``: archive aged-out turns and seal a continuity envelope."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import Any

from holon_ctx.cli.common import open_continuity, open_db, open_episodes
from holon_ctx.cli.terminal import say
from holon_ctx.cli.wording import plural

__all__ = ["register"]


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "compact", help="archive old turn ranges into episodes and seal a continuity envelope")
    p.add_argument("--db", metavar="PATH", required=True, help="the SQLite ledger to compact")
    p.add_argument("--session", metavar="ID", default="session-local",
                   help="the session id the governed store keeps state under")
    p.add_argument("--tenant", metavar="ID", default="tenant-local",
                   help="the tenant whose policy version governs it (default %(default)s)")
    p.add_argument("--principal", metavar="ID", default="operator",
                   help="who the session acts for (default %(default)s)")
    p.set_defaults(func=cmd_compact)


def cmd_compact(args: argparse.Namespace) -> int:
    from holon_ctx import SessionConfig  # noqa: PLC0415
    from holon_ctx.lowlevel import compact  # noqa: PLC0415

    ledger = open_db(args.db, must_exist=True, session=args.session_key)
    episodes = open_episodes(ledger, create=True)
    continuity = open_continuity(ledger)
    # A database ledger (SQLite or PostgreSQL) always has both beside it.
    assert episodes is not None
    assert continuity is not None
    try:
        session = SessionConfig(session_id=args.session, tenant_id=args.tenant,
                                principal_id=args.principal)
        result = compact(ledger, episodes, continuity, session=session,
                         clock=lambda: datetime.now(UTC))
    finally:
        continuity.close()
        episodes.close()
        ledger.close()
    if result.envelope_id is None:
        print("nothing to compact: no closed turn range is older than the recent window")
        return 0
    print(f"archived {plural(len(result.archive.archived), 'episode')}; sealed {result.envelope_id}")
    print(f"open obligations: {len(result.obligations)}; "
          f"side effects to reconcile: {len(result.blocking)}")
    for item in result.obligations:
        say(f"  - {item}")  # worded from ledger text: made safe for the terminal
    return 0
