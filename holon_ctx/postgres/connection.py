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

from holon_ctx.errors import InputError, StoreError, first_line, quote_value
from holon_ctx.extras import install_command

if TYPE_CHECKING:
    import psycopg

__all__ = ["URL_PREFIXES", "connect", "describe", "errors_as_store_errors", "is_postgres_url",
           "psycopg_module", "store_error", "url_problem"]

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


def _parts(url: str) -> tuple[str, str, str]:
    """``url`` as scheme (with ``://``), authority (``user:password@hosts``) and the rest."""
    scheme, _, rest = url.partition("://")
    # libpq looks for the user's '@' up to the first '/' only: a '?' before it is the password's
    # (``u:pa?ss@h``), not the query's start, which would quote the password as a host or port.
    user_end = rest.split("/", 1)[0].rfind("@") + 1
    hosts = re.split(r"[/?]", rest[user_end:], maxsplit=1)[0]
    authority = rest[:user_end] + hosts
    return f"{scheme}://", authority, rest[len(authority):]


def _slashed_password(authority: str, rest: str) -> int | None:
    """Where the ``@`` ending a user's part that holds a ``/`` is in ``rest`` (None: there is
    none). libpq ends its search for the ``@`` at the first ``/``, so ``u:pa/ss@h/db`` is the
    host ``u``, port ``pa`` and database ``ss@h/db``: each message quoting one showed the
    password."""
    # Up to the first '=': an '@' in a query's value (``application_name=a@b``) is not one.
    head = rest.split("=", 1)[0]
    return head.rindex("@") if "@" not in authority and "@" in head else None


def _redacted(url: str) -> str:
    """``url`` as written, without its password or query (which may hold ``password=``)."""
    scheme, authority, rest = _parts(url)
    if (cut := _slashed_password(authority, rest)) is not None:
        authority, rest = authority + rest[:cut + 1], rest[cut + 1:]
    if "@" in authority:
        userinfo, hosts = authority.rsplit("@", 1)
        authority = f"{userinfo.split(':', 1)[0]}@{hosts}"
    return scheme + authority + rest.split("?", 1)[0]


def _passwords(url: str) -> list[str]:
    """The passwords ``url`` holds as written: after ``USER:`` and in a ``password=`` parameter."""
    _, authority, rest = _parts(url)
    found = [authority.rsplit("@", 1)[0].partition(":")[2]] if "@" in authority else []
    found += re.findall(r"[?&]password=([^&]*)", rest)
    return [p for p in found if p]


def _port_problem(port: str) -> str | None:
    if port == "":
        return None  # libpq's default port, as "host:" means
    if not (port.isascii() and port.isdigit()) or not 0 < int(port) < 65536:
        return f"port {quote_value(port)} is not a number from 1 to 65535"
    return None


def url_problem(url: str) -> str | None:
    """Why ``url`` is not a usable PostgreSQL URL, or None.

    libpq's parser takes some text no one means: ``postgresql://:::@`` is an empty user with the
    password ``::`` on the default host, so it connected to localhost; ``host:abc`` came back as
    a host that "cannot be resolved"; ``host:99999`` as a bad connection. Those are refused here
    in plain words, before any connection: an ``@`` with no user before it, a port that is not
    1-65535, a host with a space or a bare ``:`` (an IPv6 address goes in brackets). What libpq
    means by a part left out (``postgresql:///db``: the local socket and the login's user) is
    kept. The password is never quoted."""
    _, authority, rest = _parts(url)
    if _slashed_password(authority, rest) is not None:
        return ("an '@' after the host: a '/' in a user name or password is written %2F (and an "
                "'@' in a database name %40)")
    if "@" in authority:
        userinfo, authority = authority.rsplit("@", 1)
        if not userinfo.split(":", 1)[0]:
            return ("no user name before '@' (the form is postgresql://USER[:PASSWORD]@HOST"
                    "[:PORT]/DATABASE; leave out 'USER@' to log in as the current user)")
    for host in authority.split(",") if authority else []:
        if any(c.isspace() or not c.isprintable() for c in host):
            return f"host {quote_value(host)} holds a space or a control character"
        if host.startswith("["):
            _, bracket, after = host[1:].partition("]")
            if not bracket or (after and not after.startswith(":")):
                return f"host {quote_value(host)}: an IPv6 address is written [ADDRESS]:PORT"
            port: str | None = after[1:] if after else None
        else:
            _, colon, port = host.partition(":")
            if ":" in port:
                return (f"host {quote_value(host)} is not HOST:PORT (an IPv6 address goes in "
                        "brackets: [::1]:5432)")
            port = port if colon else None
        problem = None if port is None else _port_problem(port)
        if problem:
            return problem
    try:
        from psycopg.conninfo import conninfo_to_dict  # noqa: PLC0415

        info = conninfo_to_dict(url)
    except ImportError:
        return None  # said when connecting, with the extra to install
    except Exception as exc:  # libpq's parser (ValueError, psycopg's ProgrammingError)
        # libpq quotes the whole URL in some messages ('… in URI: "postgresql://u:pw@…"'):
        # the password must not reach the error.
        reason = re.sub(r'\s*in URI: ".*$', "", first_line(exc))
        # It quotes a value it could not decode too, whole: 'unexpected spaces found in "…"'.
        secrets = _passwords(url)
        reason = re.sub(r'"([^"]*)"', lambda m: "the password" if any(
            p in m.group(1) for p in secrets) else m.group(0), reason)
        return f"not a usable PostgreSQL URL: {reason}"
    for port in str(info.get("port") or "").split(","):  # ?port=… too
        if problem := _port_problem(port):
            return problem
    return None


def describe(url: str) -> str:
    """``postgresql://user@host:port/dbname``: what errors and listings call a database (no
    password, no other parameters); a URL :func:`url_problem` refuses, as written (redacted)."""
    if url_problem(url) is not None:
        return _redacted(url)
    try:
        from psycopg.conninfo import conninfo_to_dict  # noqa: PLC0415

        info = conninfo_to_dict(url)
    except Exception:
        return _redacted(url)
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
    problem = url_problem(url)
    if problem is not None:
        raise InputError(problem, source=where)
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
