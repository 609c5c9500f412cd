"""``holon-ctx compact --db PATH``: archive aged-out turns and seal a continuity envelope."""

from __future__ import annotations

import argparse
import sqlite3
from datetime import UTC, datetime
from typing import Any

from holon_ctx.cli.common import open_db

__all__ = ["register"]


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "compact", help="archive old turn ranges into episodes and seal a continuity envelope")
    p.add_argument("--db", metavar="PATH", required=True)
    p.add_argument("--session", metavar="ID", default="session-local",
                   help="the session id the governed store keeps state under")
    p.add_argument("--tenant", metavar="ID", default="tenant-local")
    p.add_argument("--principal", metavar="ID", default="operator")
    p.set_defaults(func=cmd_compact)


def cmd_compact(args: argparse.Namespace) -> int:
    from holon_ctx.compaction import SessionConfig, compact  # noqa: PLC0415
    from holon_ctx.continuity import ContinuityStore  # noqa: PLC0415
    from holon_ctx.ledger.episode_store import SqliteEpisodeStore  # noqa: PLC0415

    ledger = open_db(args.db, must_exist=True)
    episodes = SqliteEpisodeStore(ledger.path, create=True)
    # The governed store gets a connection that waits for other writers as long as the ledger's
    # does (its own would give up after SQLite's default 5 s); autocommit, as it would open itself.
    conn = sqlite3.connect(ledger.path, isolation_level=None, timeout=ledger.lock_timeout)
    continuity = ContinuityStore(conn)
    try:
        session = SessionConfig(session_id=args.session, tenant_id=args.tenant,
                                principal_id=args.principal)
        result = compact(ledger, episodes, continuity, session=session,
                         clock=lambda: datetime.now(UTC))
    finally:
        continuity.close()
        conn.close()
        episodes.close()
        ledger.close()
    if result.envelope_id is None:
        print("nothing to compact: no closed turn range is older than the recent window")
        return 0
    print(f"archived {len(result.archive.archived)} episodes; sealed {result.envelope_id}")
    print(f"open obligations: {len(result.obligations)}; "
          f"side effects to reconcile: {len(result.blocking)}")
    for item in result.obligations:
        print(f"  - {item}")
    return 0
