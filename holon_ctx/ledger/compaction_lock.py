"""One compaction at a time per ledger, across processes (RFC 0020).

A compaction reads the ledger and the archive, writes episodes, governed facts, five journal
steps and an envelope, each its own committed write (the crash-recovery protocol of
``continuity/compaction.py`` relies on that). Two runtimes compacting one ledger at once used to
race: both journaled the same step (a UNIQUE error), or one stamped its writes with a time read
before the other's writes (``clock went backwards``). So a compaction holds the ledger's
*compaction lock* from its first read to its last write; appends and requests never take it, so
they go on while a compaction runs.

* SQLite: an exclusive ``flock`` on ``<database>-compaction.lock`` beside the file. Not the
  database file itself: SQLite holds POSIX locks on it, and closing any other descriptor of that
  file would drop them. The lock file is never deleted (deleting a lock file races with its next
  holder); the kernel releases the lock when its holder exits, however it exits.
* PostgreSQL: a session-level advisory lock on the store's connection, keyed by the session:
  released on unlock or when the connection ends.
* Any other store lives in one process: a lock per store object.

A lock that does not come free within the ledger's lock timeout raises :class:`StoreError`.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Final, Protocol

from holon_ctx.errors import StoreError

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: SQLite's own locks are all there is
    fcntl = None  # type: ignore[assignment]

__all__ = ["LOCK_SUFFIX", "SameFileWriter", "appends_held", "file_lock", "process_lock",
           "wait_for"]

#: Appended to a SQLite database's path for its compaction lock file.
LOCK_SUFFIX: Final = "-compaction.lock"
_FIRST_WAIT: Final = 0.005
_LONGEST_WAIT: Final = 0.05
_local_locks: weakref.WeakKeyDictionary[object, threading.Lock] = weakref.WeakKeyDictionary()
_local_guard = threading.Lock()


def wait_for(try_once: Callable[[], bool], timeout: float, what: str) -> None:
    """Call ``try_once`` until it returns True, waiting longer each time; StoreError after
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    pause = _FIRST_WAIT
    while not try_once():
        if time.monotonic() >= deadline:
            raise StoreError(f"{what}: another compaction of this ledger held the lock for "
                             f"more than {timeout:g} s (wait longer with "
                             "HOLON_CTX_LOCK_TIMEOUT=SECONDS)")
        time.sleep(pause)
        pause = min(pause * 2, _LONGEST_WAIT)


@contextmanager
def file_lock(database: str, timeout: float) -> Iterator[None]:
    """The compaction lock of the SQLite database at ``database`` (module docstring)."""
    if fcntl is None:  # pragma: no cover - see the import
        yield
        return
    path = database + LOCK_SUFFIX
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise StoreError(f"{path}: cannot open the compaction lock file: {exc.strerror}") from None

    def try_once() -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True
    try:
        wait_for(try_once, timeout, database)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


@contextmanager
def process_lock(store: object) -> Iterator[None]:
    """The compaction lock of a store that lives in this process only (memory stores)."""
    with _local_guard:
        lock = _local_locks.get(store)
        if lock is None:
            lock = _local_locks[store] = threading.Lock()
    with lock:
        yield


class SameFileWriter(Protocol):
    """A store that writes to a SQLite file in transactions of its own (the episode store, the
    governed store's SQLite backend): what ``SqliteStore.appends_held`` needs of it."""

    def database_file(self) -> str | None:
        """The database file its writes go to (None: in memory)."""

    def write_transaction(self) -> AbstractContextManager[None]:
        """One write transaction, holding the file's write lock from its start to its commit;
        the store's writes inside it join it."""


@contextmanager
def appends_held(ledger: Any, fallback: int | None = None, *,
                 writer: object = None) -> Iterator[int]:
    """The position a compaction's archive run or control snapshot is stamped with: the ledger's
    end, read where appends wait until the block's writes (``writer``'s) are committed (RFC
    0020, "Several runtimes"). A request asked before the commit read an end at or below it, so
    it and a rebuild at its position agree on the state: a rebuild counts the state from the
    stamp on, where the request was not. Stamped with an end read earlier, a request at a later
    position that read before the commit missed the state a rebuild there states.

    A store that can hold its appends does (``appends_held(writer)``: PostgreSQL the session
    row's lock; SQLite the file's one write lock, taken by ``writer``'s own transaction when it
    writes to the ledger's file) and yields the end; one that cannot (any other store, a SQLite
    writer on another file) gives ``fallback`` (the end the compaction read) or its end now."""
    hold = getattr(ledger, "appends_held", None)
    if callable(hold):
        with hold(writer) as end:
            if end is not None:
                yield int(end)
                return
    yield ledger.end_pos() if fallback is None else fallback
