"""How a connection to a ledger's SQLite file writes and checkpoints its WAL (RFC 0001, "The
SQLite store", decision "WAL checkpoints").

Every connection that writes on a session's turn — the ledger's, the episodes', the saved
epochs', the usage observations' and the governed store's — gets the same three settings, because
SQLite runs a checkpoint from whichever connection commits once the WAL holds its threshold: one
connection left at the default would checkpoint at the default.
"""

from __future__ import annotations

import sqlite3
from typing import Final

__all__ = ["WAL_AUTOCHECKPOINT", "WAL_SIZE_LIMIT", "tune_wal"]

#: Pages in the WAL before a commit checkpoints it (SQLite's default is 1,000). A checkpoint
#: copies each page once however often the WAL holds it, and a turn rewrites the same index
#: leaves: on the 100k bench loop, over 250 turns, 9 checkpoints at 1,000 cost 88-103 ms of CPU
#: in all, 5 at 2,000 37-41 ms (most 3-6 ms each), 2 at 4,000 36-39 ms (16-22 ms each): 2,000
#: halves the sum and keeps each one small (RFC 0001, "WAL checkpoints"). ~8 MiB of WAL.
WAL_AUTOCHECKPOINT: Final = 2000
#: Bytes the WAL file is cut back to when a checkpoint lets it restart: a reader that held a
#: snapshot through several thresholds grew it, and SQLite otherwise keeps the high-water size.
WAL_SIZE_LIMIT: Final = 64 * 1024 * 1024


def tune_wal(db: sqlite3.Connection) -> None:
    """Apply the ledger file's WAL settings to ``db`` (per connection; nothing is written)."""
    db.execute(f"PRAGMA wal_autocheckpoint={WAL_AUTOCHECKPOINT}")
    db.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT}")
    # Builds compiled with SQLITE_SECURE_DELETE (Debian's, this project's) zero every freed page,
    # so replacing a saved epoch's ~130 KB state wrote its old overflow pages again as zeros
    # (~33 of a save's ~68 WAL frames). FAST zeroes deleted content only in pages written anyway.
    # Nothing this file deletes leaves the file: every derived row is rebuilt from `records`,
    # which is append-only, so the freed pages hold nothing the file does not.
    db.execute("PRAGMA secure_delete=FAST")
