"""Where a SQLite ledger file may be: the checks that name a path's problem before SQLite does
("unable to open database file" names neither the directory nor what to do)."""

from __future__ import annotations

from pathlib import Path
from typing import Final

from holon_ctx.errors import quote_value

__all__ = ["database_path_problem", "missing_directory"]


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
