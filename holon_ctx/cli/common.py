"""Helpers every command shares: opening a SOURCE, budgets, consoles."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from holon_ctx.cli.inputs import regular_input
from holon_ctx.errors import InputError
from holon_ctx.ledger.importer import import_jsonl
from holon_ctx.ledger.memory import MemoryStore
from holon_ctx.ledger.sqlite import SqliteStore
from holon_ctx.ledger.store import LedgerStore

if TYPE_CHECKING:
    from holon_ctx.compaction import GovernedControl
from holon_ctx.ledger.transcripts import TranscriptFormat, import_any, sniff_ledger

__all__ = [
    "add_source_args",
    "console",
    "open_control_source",
    "open_source",
    "positive_int",
]


def positive_int(text: str) -> int:
    """argparse type for budgets: a positive integer, with a one-line error otherwise."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def add_source_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", nargs="?", metavar="SOURCE",
                        help="a ledger JSONL file or a chat transcript / agent trajectory "
                             "(read into memory)")
    parser.add_argument("--db", metavar="PATH", help="a holon-ctx SQLite ledger")
    parser.add_argument("--from", dest="source_format", default="auto",
                        choices=["auto", *(f.value for f in TranscriptFormat)],
                        help="the format of a SOURCE file (default: detect it)")


def open_db(path: str, *, must_exist: bool) -> SqliteStore:
    p = Path(path)
    if must_exist and not p.exists():
        raise InputError("no such database file", source=path)
    if p.exists() and not os.access(p, os.R_OK):
        raise InputError("database file is not readable", source=path)
    return SqliteStore(p)


def open_source(args: argparse.Namespace) -> LedgerStore:
    """The store named by SOURCE or --db (exactly one of them)."""
    source: str | None = getattr(args, "source", None)
    db: str | None = getattr(args, "db", None)
    if (source is None) == (db is None):
        raise InputError("give exactly one SOURCE: a ledger JSONL file or --db PATH")
    if db is not None:
        return open_db(db, must_exist=True)
    assert source is not None
    if not Path(source).exists():
        raise InputError("no such file", source=source)
    if _looks_like_sqlite(source):
        return open_db(source, must_exist=True)
    store = MemoryStore()
    # A pipe or device is copied first (capped): detection and parsing each read it.
    fmt = getattr(args, "source_format", "auto")
    with regular_input(source) as path:
        if fmt == TranscriptFormat.LEDGER or (fmt == "auto" and sniff_ledger(path)):
            import_jsonl(path, store)
        else:
            # A chat transcript or agent trajectory, detected by name and content unless --from
            # says (docs/import.md).
            import_any(path, store, fmt)
    return store


def _looks_like_sqlite(path: str) -> bool:
    if not Path(path).is_file():
        return False  # a pipe's head must not be consumed here; a database is a regular file
    try:
        with open(path, "rb") as f:
            return f.read(16) == b"SQLite format 3\x00"
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", source=path) from None


def console(*, plain: bool = False, stderr: bool = False, width: int | None = None) -> Console:
    """A rich console: colour only on a terminal, none with --plain or NO_COLOR."""
    return Console(
        file=sys.stderr if stderr else sys.stdout,
        no_color=plain or None,
        color_system=None if plain else "auto",
        highlight=False,
        width=width,
        soft_wrap=False,
    )



def open_control_source(store: LedgerStore) -> GovernedControl | None:
    """Governed control state for ``store`` when it is a SQLite ledger that was compacted."""
    from holon_ctx.compaction import GovernedControl, has_continuity_state  # noqa: PLC0415
    from holon_ctx.continuity import ContinuityStore  # noqa: PLC0415

    if not isinstance(store, SqliteStore) or not has_continuity_state(store.path):
        return None
    return GovernedControl(ContinuityStore(store.path))
