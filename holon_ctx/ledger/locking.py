"""Waiting for SQLite's write lock, and saying who holds it when the wait runs out.

One writer at a time holds a SQLite database's write lock; others wait up to the *lock timeout*
(SQLite's busy timeout), then fail. The timeout is :data:`DEFAULT_LOCK_TIMEOUT` seconds unless the
caller passes one or ``HOLON_CTX_LOCK_TIMEOUT`` (seconds) is set, so a command-line user can wait
out a long import without any flag. When the wait runs out the caller gets a one-line
:class:`~holon_ctx.errors.StoreError` instead of ``sqlite3.OperationalError``.

Who holds the lock: SQLite does not say, but on Linux ``/proc/locks`` lists every POSIX lock with
its process id. In WAL mode the write lock is byte 120 of the ``-shm`` file (``WAL_WRITE_LOCK``);
in rollback mode it is the RESERVED byte of the database file (``0x40000001``). Elsewhere, or when
the holder cannot be seen, the error simply does not name it.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

from holon_ctx.errors import StoreError, quote_value

__all__ = [
    "DEFAULT_LOCK_TIMEOUT",
    "LOCK_TIMEOUT_ENV",
    "describe_lock_holder",
    "is_lock_error",
    "lock_error",
    "lock_timeout",
    "translate_lock_errors",
    "write_at_open",
]

#: Seconds a writer waits for another writer before giving up: long enough for most imports.
DEFAULT_LOCK_TIMEOUT: Final = 30.0
LOCK_TIMEOUT_ENV: Final = "HOLON_CTX_LOCK_TIMEOUT"
_WAL_WRITE_BYTE: Final = 120
_RESERVED_BYTE: Final = 0x40000001


def lock_timeout(given: float | None = None) -> float:
    """``given``, else ``$HOLON_CTX_LOCK_TIMEOUT``, else :data:`DEFAULT_LOCK_TIMEOUT` (seconds)."""
    if given is not None:
        if given < 0:
            raise StoreError(f"lock timeout must be >= 0 seconds, got {given}")
        return given
    text = os.environ.get(LOCK_TIMEOUT_ENV)
    if text is None or not text.strip():
        return DEFAULT_LOCK_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise StoreError(f"{LOCK_TIMEOUT_ENV}: expected a number of seconds >= 0, got {quote_value(text)}")
    return value


def is_lock_error(exc: BaseException) -> bool:
    """True for SQLite's "database is locked" / "database is busy" (``SQLITE_BUSY``)."""
    if not isinstance(exc, sqlite3.OperationalError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return (code & 0xFF) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    text = str(exc)
    return "database is locked" in text or "database is busy" in text


def lock_error(path: str, timeout: float) -> StoreError:
    """The one-line error for a write lock that did not come free within ``timeout`` seconds."""
    holder = describe_lock_holder(path)
    who = f" ({holder})" if holder else ""
    return StoreError(f"{path}: database is locked by another writer{who}; gave up after waiting "
                      f"{timeout:g} s (wait longer with {LOCK_TIMEOUT_ENV}=SECONDS)")


@contextmanager
def translate_lock_errors(path: str, timeout: float | None = None) -> Iterator[None]:
    """Turn a lock timeout raised inside the block into :func:`lock_error`."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        if not is_lock_error(exc):
            raise
        raise lock_error(path, lock_timeout(timeout)) from None


@contextmanager
def write_at_open(db: sqlite3.Connection, path: str) -> Iterator[None]:
    """``BEGIN IMMEDIATE … COMMIT`` for what a store writes as it opens (a schema migration, an
    index rebuilt from the records). SQLite rolls back by itself on a full disk or an I/O error,
    so ROLLBACK is issued only while a transaction is still open (its own "no transaction is
    active" hid the cause); a write that fails for another reason than the lock says it could
    not write: the database is not at fault, as "not a usable database" would say."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
        db.execute("COMMIT")
    except BaseException as exc:
        if db.in_transaction:
            db.execute("ROLLBACK")
        if isinstance(exc, sqlite3.OperationalError) and not is_lock_error(exc):
            raise StoreError(f"{path}: cannot write: {exc}") from None
        raise


def describe_lock_holder(path: str) -> str | None:
    """``"held by process 123: holon-ctx import …"`` when the holder can be seen, else None."""
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as f:
            table = f.read()
    except OSError:
        return None
    wanted: dict[tuple[int, int], int] = {}
    for name, byte in ((f"{path}-shm", _WAL_WRITE_BYTE), (path, _RESERVED_BYTE)):
        try:
            st = os.stat(name)
        except OSError:
            continue
        wanted[(st.st_dev, st.st_ino)] = byte
    for line in table.splitlines():
        fields = line.split()
        # "1: POSIX  ADVISORY  WRITE 3784 fe:00:1474576 120 120" (blocked waiters start with "->")
        if len(fields) < 8 or fields[1] == "->" or fields[1] not in ("POSIX", "OFDLCK"):
            continue
        pid_text, where, start, end = fields[4], fields[5], fields[6], fields[7]
        try:
            major, minor, inode = where.split(":")
            dev = os.makedev(int(major, 16), int(minor, 16))
            lock_byte = wanted.get((dev, int(inode)))
            if lock_byte is None or not (
                    int(start) <= lock_byte <= (1 << 63 if end == "EOF" else int(end))):
                continue
            pid = int(pid_text)
        except ValueError:
            continue
        if pid <= 0:
            return "held by another process"
        if pid == os.getpid():
            return "held by another connection in this process"
        return f"held by process {pid}{_command_of(pid)}"
    return None


def _command_of(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    words = [w.decode("utf-8", "replace") for w in raw.split(b"\0") if w]
    if not words:
        return ""
    text = " ".join([Path(words[0]).name, *words[1:]])
    # One line, and short: the command may be long and may hold anything.
    text = "".join(c if c.isprintable() else "?" for c in text)
    return ": " + (text if len(text) <= 100 else text[:99] + "…")
