"""Helpers for tests that run holon-ctx in child processes and then look at the database."""

from __future__ import annotations

import os
from pathlib import Path

from holon_ctx.ledger.sqlite import SqliteStore

ROOT = Path(__file__).resolve().parent.parent


def child_env(**extra: str) -> dict[str, str]:
    """The environment for a child Python that imports this checkout's holon_ctx."""
    return {**os.environ, **extra,
            "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


def ledger_ids(db: Path) -> list[str]:
    """The ids of every record in the SQLite ledger at ``db``, in ledger order."""
    store = SqliteStore(db)
    try:
        return [r.id for r in store.iter_records()]
    finally:
        store.close()
