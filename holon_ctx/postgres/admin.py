"""Database-level operations by URL: migrate the schema, list and delete sessions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from holon_ctx.postgres.connection import connect, describe, psycopg_module, store_error

# The schema module's functions by name, not the package's `schema` attribute: importing
# holon_ctx.postgres from here was a cycle (the package imports this module; RFC 0028).
from holon_ctx.postgres.schema import SCHEMA_VERSION, SessionInfo, ensure_schema, schema_version
from holon_ctx.postgres.schema import delete_session as delete_session_rows
from holon_ctx.postgres.schema import list_sessions as list_session_rows

__all__ = ["delete_session", "list_sessions", "migrate"]

_T = TypeVar("_T")


def _with_connection(url: str, fn: Callable[[Any, str], _T]) -> _T:
    psycopg = psycopg_module()
    where = describe(url)
    conn = connect(url)
    try:
        return fn(conn, where)
    except psycopg.Error as exc:
        raise store_error(where, exc) from None
    finally:
        conn.close()


def migrate(url: str) -> tuple[int, int]:
    """Create or upgrade the schema; ``(version before, version now)``."""
    return _with_connection(url, lambda c, w: (ensure_schema(c, w), SCHEMA_VERSION))


def list_sessions(url: str) -> list[SessionInfo]:
    """Every session in the database, by key (an unmigrated database has none)."""
    def run(conn: Any, where: str) -> list[SessionInfo]:
        if schema_version(conn, where) == 0:
            return []
        return list_session_rows(conn)
    return _with_connection(url, run)


def delete_session(url: str, key: str, *, only_if_empty: bool = False) -> bool:
    """Delete one session's ledger, episodes and governed state; False when there is none (or,
    with ``only_if_empty``, when it holds records)."""
    def run(conn: Any, where: str) -> bool:
        if schema_version(conn, where) == 0:
            return False
        return delete_session_rows(conn, key, only_if_empty=only_if_empty)
    return _with_connection(url, run)
