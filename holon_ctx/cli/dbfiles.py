"""Writing into a SQLite ledger that may not exist yet, without ever removing a database in use.

The rule (RFC 0006): a command never deletes a database file at the path it was given. A failed
command may remove only a file it created itself *and that no other process can have opened*. So a
new database is built under a private name beside the destination (``NAME.new-PID-RANDOM``), and
published only once its work has committed, with ``link(2)``, which refuses to replace a file that
appeared meanwhile. On failure (an error, Ctrl-C, SIGTERM) only the private file goes.

If another command created the destination while this one worked (two imports into one new path),
the work is done again against that database, exactly as if this command had started second: both
succeed when their records fit together, or this one fails with nothing written, and the other's
records stay. That reads the input twice; a FIFO or pipe is copied first (:mod:`.inputs`).
"""

from __future__ import annotations

import os
import secrets
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from holon_ctx.cli._api import LOCK_SUFFIX, database_path_problem
from holon_ctx.cli.common import open_db
from holon_ctx.errors import InputError, StoreError
from holon_ctx.lowlevel import SqliteStore

__all__ = ["write_db"]

T = TypeVar("T")
#: The private build's files, its compaction lock among them (nobody else ever opened it).
_SUFFIXES = ("", "-wal", "-shm", "-journal", LOCK_SUFFIX)


class _Taken:
    """The destination appeared while the private database was being built."""


def write_db(path: str, work: Callable[[SqliteStore], T]) -> T:
    """Run ``work`` on the ledger at ``path``, creating it if needed (see the module docstring).

    ``work`` may run twice, so its input must be readable twice (``regular_input`` sees to that).
    """
    dest = Path(path)
    problem = database_path_problem(dest, new=True)
    if problem is not None:
        raise InputError(problem, source=path)
    if not dest.exists():
        result = _build_new(dest, work)
        if not isinstance(result, _Taken):
            return result
    store = open_db(path, must_exist=True)
    assert isinstance(store, SqliteStore)  # a path, never a postgresql:// URL (see ledger_cmds)
    try:
        return work(store)
    finally:
        store.close()


def _build_new(dest: Path, work: Callable[[SqliteStore], T]) -> T | _Taken:
    tmp = dest.with_name(f"{dest.name}.new-{os.getpid()}-{secrets.token_hex(4)}")
    try:
        # O_EXCL: the private name is ours alone, and an unwritable directory is one clear line.
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    except OSError as exc:
        raise InputError(f"cannot create the database: {exc.strerror}", source=str(dest)) from None
    try:
        store = SqliteStore(tmp)
        try:
            result = work(store)
        finally:
            store.close()
        _self_contained(tmp)
        return result if _publish(tmp, dest) else _Taken()
    except StoreError as exc:
        # Name the database the user asked for, not the private build.
        raise StoreError(str(exc).replace(str(tmp), str(dest))) from None
    except sqlite3.Error as exc:
        raise StoreError(f"{dest}: cannot write: {exc}") from None
    finally:
        for suffix in _SUFFIXES:
            Path(f"{tmp}{suffix}").unlink(missing_ok=True)


def _self_contained(path: Path) -> None:
    """Fold the WAL into the file: a WAL is named after its database, so it cannot be moved."""
    # Absolute: SQLite reads a relative name starting with "file:" as a URI (SqliteStore's
    # file_name says more), and would fold some other file's WAL.
    db = sqlite3.connect(os.path.abspath(path), isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode=DELETE")
    finally:
        db.close()


def _publish(tmp: Path, dest: Path) -> bool:
    """Give ``tmp`` the name ``dest`` unless a file of that name exists; False when one does."""
    try:
        os.link(tmp, dest)
    except FileExistsError:
        return False
    except OSError as exc:
        if dest.exists():
            return False
        # A file system without hard links: a plain rename, which could replace a file created in
        # the instant since the check above. Rare enough to accept; the ledger file systems we
        # know of (ext4, xfs, btrfs, apfs, tmpfs) all take the link.
        try:
            os.rename(tmp, dest)
        except OSError:
            raise InputError(f"cannot create the database: {exc.strerror}",
                             source=str(dest)) from None
    return True
