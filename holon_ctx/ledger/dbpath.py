"""Where a SQLite ledger file may be: the checks that name a path's problem before SQLite does
("unable to open database file" names neither the directory nor what to do), and whether a file
is a database at all, asked without opening it behind SQLite's back (:func:`sqlite_file`)."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Final

from holon_ctx.errors import quote_value

__all__ = ["database_path_problem", "missing_directory", "not_a_database_file", "sqlite_file",
           "url_scheme"]

#: ``scheme://`` at the start of a name: a URL, not a file path.
_URL: Final = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def url_scheme(name: str) -> str | None:
    """``"mysql://"`` for a name that starts like a URL, else None. A caller that opens
    postgresql:// URLs asks after taking those: any other URL given where a ledger is named
    (``mysql://``, SQLAlchemy's ``postgresql+psycopg://``, ``sqlite:///x.db``) would be taken
    for a SQLite path and fail on a directory named ``mysql:``, its password in the message."""
    found = _URL.match(name)
    return None if found is None else found.group()


#: The SQLite file header's size: every database file that holds anything is at least this.
_HEADER_BYTES = 100


def missing_directory(path: str | Path) -> str | None:
    """Why a database cannot be made at ``path`` because of its directory, or None: SQLite's
    own error ("unable to open database file") names neither the directory nor what to do."""
    if str(path) == ":memory:":
        return None
    parent = Path(path).parent
    if parent.is_dir():
        return None
    what = "is not a directory" if parent.exists() else "does not exist"
    return (f"the directory {quote_value(str(parent))} {what}: create it first (the database "
            "file is made in it)")


def not_a_database_file(path: str | Path) -> str | None:
    """Why the existing file at ``path`` cannot be a database, or None: a directory; one of 1 to 99 bytes is
    shorter than SQLite's header. SQLite itself takes a 1-byte file for an empty database and
    would write a ledger over it (a read-only command too); an empty file is a new database."""
    p = Path(path)
    if str(path) != ":memory:" and p.is_dir():
        # SQLite says only "unable to open database file".
        return "is a directory, not a database file"
    try:
        size = p.stat().st_size if str(path) != ":memory:" and p.is_file() else 0
    except OSError:
        return None
    if 0 < size < _HEADER_BYTES:
        return "not a usable holon-ctx database (file is not a database)"  # SQLite's words
    return None


#: Names the readers take for a ledger JSONL file or a transcript, never a database's.
_FILE_FORMAT_SUFFIXES: Final = (".jsonl", ".json")


def database_path_problem(path: str | Path, *, new: bool, directory: bool = True) -> str | None:
    """Why a database cannot be at ``path``: its directory (:func:`missing_directory`; not
    looked at with ``directory=False``, for a caller that makes it) and, for a ``new`` one, a
    name every reader would take for a ledger JSONL file or a transcript (``agent.jsonl`` would
    be SQLite bytes under a JSONL name); None when it can. An existing file is judged by its
    bytes elsewhere, not by its name."""
    problem = missing_directory(path) if directory else None
    p = Path(path)
    if problem or not new or str(path) == ":memory:" or p.exists() or not p.name.lower(
            ).endswith(_FILE_FORMAT_SUFFIXES):
        return problem
    return (f"a new ledger database would be SQLite under a {p.suffix} name, which readers take "
            "for ledger JSONL or a transcript: name it .db (ledger JSONL is what export writes)")


def sqlite_file(path: str | Path) -> bool | None:
    """Whether the file at ``path`` is an SQLite database, asked of SQLite itself: True when
    SQLite reads it as one; False when SQLite says it is not one (or it is empty, or not a
    regular file), so a regular file's bytes may be read (not a FIFO's: its open blocks with no
    writer, and a read takes the bytes from their reader); None when SQLite could not tell (it
    cannot open the file, or its header is damaged).

    Why not read its header: closing any descriptor of a file releases every POSIX lock this
    process holds on it, those of SQLite connections open on it included (a second session on
    the same ledger, a runtime's own connection). The next process to close its last connection
    then takes the database for unused, checkpoints it and deletes its WAL, and every later
    commit of this process goes to the deleted WAL: acknowledged appends vanish, or the file
    reads as malformed (sqlite.org, "How To Corrupt An SQLite Database File", 2.2). SQLite
    shares its own descriptors of a file within a process and closes none under a lock.

    The connection is ``immutable``: it reads the main file only, takes no lock and opens no
    ``-wal`` or ``-shm`` file. A plain read-only one made both beside a WAL database that no
    connection had open and, read-only, could not remove them: a refused import left two files
    beside the ledger it refused. Only the header is read, which a checkpoint never changes in
    a way that makes a database read as another kind of file.
    """
    p = Path(path)
    try:
        # Shorter than the 100-byte header, a file is no database (SQLite reads a 1-byte file
        # as an empty one, and a transcript of "[" was refused as "an SQLite database").
        if not p.is_file() or p.stat().st_size < _HEADER_BYTES:
            return False
        db = sqlite3.connect(f"{p.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
    except (OSError, sqlite3.Error):
        return None
    try:
        db.execute("PRAGMA schema_version").fetchone()  # reads the header
    except sqlite3.Error as exc:
        return False if getattr(exc, "sqlite_errorname", "") == "SQLITE_NOTADB" else None
    finally:
        db.close()
    return True
