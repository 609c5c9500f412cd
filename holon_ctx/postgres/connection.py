"""Connecting to PostgreSQL: the lazy psycopg import, redacted names, one-line errors.

psycopg is an optional dependency (the ``postgres`` extra): nothing imports it until a
``postgresql://`` URL is opened, so the core installs and runs without it. Every psycopg error
that reaches a caller is turned into a :class:`~holon_ctx.errors.StoreError` of one line that
names the server and database, never the password.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final

from holon_ctx.errors import StoreError
from holon_ctx.extras import install_command

if TYPE_CHECKING:
    import psycopg

__all__ = ["URL_PREFIXES", "connect", "describe", "errors_as_store_errors", "is_postgres_url",
           "psycopg_module", "store_error"]

URL_PREFIXES: Final = ("postgresql://", "postgres://")
#: Seconds to wait for the server before saying it is unreachable (libpq waits forever otherwise).
CONNECT_TIMEOUT: Final = 10


def is_postgres_url(text: str) -> bool:
    return text.startswith(URL_PREFIXES)


def psycopg_module() -> ModuleType:
    """psycopg, imported on first use; a one-line error naming the extra when it is missing."""
    try:
        import psycopg  # noqa: PLC0415 - optional dependency, imported only when used
    except ImportError:
        raise StoreError("PostgreSQL support needs the 'postgres' extra (psycopg is not "
                         f"installed): {install_command('postgres')}") from None
    return psycopg


def describe(url: str) -> str:
    """``postgresql://user@host:port/dbname``: what errors and listings call a database (no
    password, no other parameters)."""
    try:
        from psycopg.conninfo import conninfo_to_dict  # noqa: PLC0415

        info = conninfo_to_dict(url)
    except Exception:
        return re.sub(r"(://[^:/@]*):[^@/]*@", r"\1@", url.split("?", maxsplit=1)[0])
    user = f"{info['user']}@" if info.get("user") else ""
    host = str(info.get("host") or "localhost")
    port = f":{info['port']}" if info.get("port") else ""
    return f"postgresql://{user}{host}{port}/{info.get('dbname') or ''}"


def _reason(exc: BaseException) -> str:
    """The useful line of a psycopg error: the server's message, without libpq's framing."""
    text = " ".join(str(exc).split("\n")[0:1]).strip() or type(exc).__name__
    if "FATAL:" in text:
        text = text.split("FATAL:", 1)[1]
    elif " failed: " in text:
        text = text.rsplit(" failed: ", 1)[1]
    text = text.removeprefix("connection failed:").strip()
    return " ".join(text.split()).rstrip(".")


def store_error(where: str, exc: BaseException, what: str = "") -> StoreError:
    return StoreError(f"{where}: {what + ': ' if what else ''}{_reason(exc)}")


def connect(url: str, *, durable: bool = True) -> psycopg.Connection[Any]:
    """An autocommit connection (writes open explicit transactions); StoreError when the server
    cannot be reached or refuses (bad database, bad credentials).

    ``durable=False``: this connection's commits are acknowledged before the server flushes them
    to disk (``synchronous_commit = off``), as the SQLite ledger's are (``synchronous=NORMAL``):
    a crash of the runtime loses nothing; a crash of the server or the machine may lose the last
    fraction of a second of commits — always the newest ones, in commit order, never a
    corruption (RFC 0026). A flush costs a few milliseconds per commit on ordinary disks."""
    pg = psycopg_module()
    where = describe(url)
    try:
        conn: psycopg.Connection[Any] = pg.connect(
            url, autocommit=True, connect_timeout=CONNECT_TIMEOUT,
            application_name="holon-ctx")
        if not durable:
            conn.execute("SET synchronous_commit TO off")
    except pg.Error as exc:
        raise store_error(where, exc, "cannot connect") from None
    except ValueError as exc:  # a malformed URL (libpq's parser)
        raise store_error(where, exc, "not a usable PostgreSQL URL") from None
    return conn


@contextmanager
def errors_as_store_errors(where: str) -> Iterator[None]:
    """Turn any psycopg error raised inside into a one-line StoreError naming ``where``."""
    pg = psycopg_module()
    try:
        yield
    except pg.Error as exc:
        raise store_error(where, exc) from None
