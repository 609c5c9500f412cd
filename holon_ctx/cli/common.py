"""Helpers every command shares: opening a SOURCE, budgets, consoles.

``--db`` is turned into stores here and nowhere else: a path is a SQLite file, a
``postgresql://`` URL is a database of many sessions, of which ``--session-key`` picks one
(docs/postgres.md). :func:`open_db` opens the ledger; :func:`open_episodes` and
:func:`open_continuity` open the episode and governed stores beside it, whichever kind it is.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Final

from rich.console import Console

from holon_ctx import LedgerStore, UnknownModelWarning
from holon_ctx.cli._api import ModelProfile, database_path_problem, model_profile, sqlite_file
from holon_ctx.cli.inputs import no_such_file, regular_input
from holon_ctx.cli.terminal import SafeConsole
from holon_ctx.errors import InputError
from holon_ctx.lowlevel import MemoryStore, SqliteStore, TokenCounter, import_jsonl
from holon_ctx.postgres import PostgresStore, describe, is_postgres_url

if TYPE_CHECKING:
    from holon_ctx.continuity import ContinuityStore
    from holon_ctx.lowlevel import EpisodeStore, GovernedControl
from holon_ctx.cli._api import not_a_database, sniff_ledger
from holon_ctx.errors import quote_value
from holon_ctx.lowlevel import TranscriptFormat, import_any

__all__ = [
    "FORMAT_OPTION",
    "add_model_arg",
    "add_session_key_options",
    "add_source_args",
    "check_session_key",
    "console",
    "control_source",
    "counter_of",
    "db_name",
    "model_of",
    "open_continuity",
    "open_db",
    "open_episodes",
    "open_source",
    "positive_int",
    "remove_empty_session",
]

#: How an import's errors tell the user to name a format (``{}`` is the format): the CLI's flag,
#: passed as the library's ``option=`` (its own default names its argument, ``format=``).
FORMAT_OPTION: Final = "--from {}"


def positive_int(text: str) -> int:
    """argparse type for budgets: a positive integer, with a one-line error otherwise."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {quote_value(text)}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {quote_value(text)}")
    return value


def add_source_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", nargs="?", metavar="SOURCE",
                        help="a ledger JSONL file or a chat transcript / agent trajectory "
                             "(read into memory)")
    parser.add_argument("--db", metavar="PATH|URL",
                        help="a holon-ctx SQLite ledger, or a postgresql:// URL (with --session-key)")
    parser.add_argument("--from", dest="source_format", default="auto",
                        choices=["auto", *(f.value for f in TranscriptFormat)],
                        help="the format of a SOURCE file (default: detect it)")


def add_model_arg(parser: argparse.ArgumentParser) -> None:
    """``--model NAME``, for the commands that count a request as a runtime would send it."""
    parser.add_argument("--model", metavar="NAME", default=None,
                        help="count tokens as this model's provider does (e.g. gpt-4o, "
                             "claude-sonnet-4-5): its tokenizer and framing (docs/providers.md)")


def model_of(args: argparse.Namespace) -> ModelProfile:
    """The ``--model`` profile (the default without one). An unknown name is said in one line
    on stderr, as the CLI says everything, and counted with the stated default."""
    known = getattr(args, "_model_profile", None)
    if isinstance(known, ModelProfile):
        return known  # said once per command
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UnknownModelWarning)
        profile = model_profile(getattr(args, "model", None), where="--model")
    for warning in caught:
        sys.stderr.write(f"holon-ctx: warning: {warning.message}\n")
    args._model_profile = profile
    return profile


def counter_of(args: argparse.Namespace) -> TokenCounter | None:
    """The counter ``--model`` asks for (None without one: each store's own)."""
    if getattr(args, "model", None) is None:
        return None
    return model_of(args).counter()


def add_session_key_options(parser: argparse.ArgumentParser) -> None:
    """Give every (sub)command that takes ``--db`` a ``--session-key`` too (called once, by the
    parser builder, so commands need not declare it)."""
    options = {s for action in parser._actions for s in action.option_strings}
    if "--db" in options and "--session-key" not in options:
        parser.add_argument("--session-key", metavar="KEY",
                            help="with a postgresql:// --db: the session whose ledger to use")
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                add_session_key_options(sub)


def db_name(db: str, session: str | None) -> str:
    """How messages name a database: the path, or the server, database and session (no password)."""
    return f"{describe(db)} session {quote_value(session)}" if is_postgres_url(db) else db


#: ``scheme://`` at the start of a --db: a URL, not a file path (the library's open_session
#: asks ledger/dbpath.url_scheme; the CLI's API stays short, so the one pattern is here again).
_URL: Final = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def check_session_key(path: str, session: str | None) -> None:
    """A --db that is not a postgresql:// URL is a SQLite file path: one that reads as a URL of
    another kind (``mysql://``, SQLAlchemy's ``postgresql+psycopg://``, ``sqlite:///x.db``)
    would otherwise be taken for a path and fail on a directory named ``mysql:``, so it is
    refused by its scheme. A session key goes with a postgresql:// --db only: with a SQLite
    file (one ledger) it would be dropped without a word. Both before anything is made."""
    if not is_postgres_url(path) and (url := _URL.match(path)):
        # Named by its scheme only: the rest of a URL may hold a password.
        raise InputError(f"a {url.group()} URL is not a database holon-ctx opens: it takes a "
                         "postgresql:// URL or the path of a SQLite file", source="--db")
    if session and not is_postgres_url(path):
        raise InputError("--session-key applies to a postgresql:// --db only", source=path)


def open_db(path: str, *, must_exist: bool, session: str | None = None,
            counter: TokenCounter | None = None) -> LedgerStore:
    """The ledger at ``path`` (a SQLite file, or a session of a PostgreSQL database: made when
    ``must_exist`` is False), counting with ``counter`` (default: cl100k)."""
    if is_postgres_url(path):
        if not session:
            raise InputError("a postgresql:// --db needs --session-key KEY (`holon-ctx db "
                             "sessions --db URL` lists the sessions)", source=describe(path))
        return PostgresStore(path, session=session, create=not must_exist, counter=counter)
    check_session_key(path, session)
    p = Path(path)
    if must_exist and not p.exists():
        problem = database_path_problem(p, new=False)
        raise InputError(problem or "no such database file", source=path)
    if p.exists() and not os.access(p, os.R_OK):
        raise InputError("database file is not readable", source=path)
    kind = not_a_database(p)
    if kind is not None:
        # The commonest slip: a ledger or transcript file given as --db. Reading it needs no
        # database at all.
        raise InputError(f"{kind}, not a database: pass it as SOURCE, without --db (e.g. "
                         f"`holon-ctx preview {path} --budget 8192`), or import it into a "
                         f"database with `holon-ctx import {path} --db NEW.db`", source=path)
    return SqliteStore(p, counter)


def open_source(args: argparse.Namespace) -> LedgerStore:
    """The store named by SOURCE or --db (exactly one of them)."""
    source: str | None = getattr(args, "source", None)
    db: str | None = getattr(args, "db", None)
    if (source is None) == (db is None):
        raise InputError("give exactly one SOURCE: a ledger JSONL file or --db PATH")
    counter = counter_of(args)
    if db is not None:
        return open_db(db, must_exist=True, session=getattr(args, "session_key", None),
                       counter=counter)
    assert source is not None
    if not Path(source).exists():
        raise no_such_file(source)
    if _looks_like_sqlite(source):
        return open_db(source, must_exist=True, counter=counter)
    store = MemoryStore(counter)
    # A pipe or device is copied first (capped): detection and parsing each read it.
    fmt = getattr(args, "source_format", "auto")
    with regular_input(source) as path:
        if fmt == TranscriptFormat.LEDGER or (fmt == "auto" and sniff_ledger(path)):
            import_jsonl(path, store)
        else:
            # A chat transcript or agent trajectory, detected by name and content unless --from
            # says (docs/import.md).
            import_any(path, store, fmt, option=FORMAT_OPTION)
    return store


def _looks_like_sqlite(path: str) -> bool:
    # Asked of SQLite, not read from the header: reading a database this process has open
    # releases its connections' locks (sqlite_file). A pipe or a device is never one (its head
    # must not be consumed here); a file SQLite cannot tell about opens as one and says why.
    return sqlite_file(path) is not False


def console(*, plain: bool = False, stderr: bool = False, width: int | None = None) -> Console:
    """A rich console: colour only on a terminal, none with --plain or NO_COLOR; text made safe."""
    return SafeConsole(
        file=sys.stderr if stderr else sys.stdout,
        no_color=plain or None,
        color_system=None if plain else "auto",
        highlight=False,
        width=width,
        soft_wrap=False,
    )



def remove_empty_session(db: str, session: str) -> None:
    """Remove the PostgreSQL session a failed first import made, only while it holds no record:
    another import may have committed to it meanwhile (RFC 0006; SQLite files: cli/dbfiles.py)."""
    from holon_ctx.postgres import delete_session  # noqa: PLC0415

    delete_session(db, session, only_if_empty=True)


def open_episodes(store: LedgerStore, *, create: bool) -> EpisodeStore | None:
    """The episode store beside a database ledger; None for an in-memory one, and when ``create``
    is False and nothing was archived yet."""
    from holon_ctx.cli._api import StoresBeside  # noqa: PLC0415

    return StoresBeside(store).episodes(create=create)


def open_continuity(store: LedgerStore, *, create: bool = True) -> ContinuityStore | None:
    """The governed store beside a database ledger; None for an in-memory one, and when ``create``
    is False and no compaction sealed an envelope yet."""
    from holon_ctx.cli._api import StoresBeside  # noqa: PLC0415

    return StoresBeside(store).continuity(create=create)


@contextmanager
def control_source(store: LedgerStore) -> Iterator[GovernedControl | None]:
    """Governed control state for ``store`` when it is a database ledger that was compacted,
    closed on leaving. Closed, not left to the collector: an unclosed SQLite connection closing
    later checkpoints the ledger's write-ahead log, so a read-only command would rewrite the
    database file after it returned."""
    from holon_ctx.lowlevel import GovernedControl  # noqa: PLC0415

    continuity = open_continuity(store, create=False)
    try:
        yield None if continuity is None else GovernedControl(continuity)
    finally:
        if continuity is not None:
            continuity.close()
