"""PostgreSQL stores for fleets of agents: many sessions' ledgers, episodes and governed state in
one database (RFC 0009, docs/postgres.md).

Needs the ``postgres`` extra (psycopg 3); importing this package does not import psycopg, opening a
store does. Every store of a session is opened with the same session key::

    ledger = PostgresStore("postgresql://host/db", session="agent-42")
    episodes = PostgresEpisodeStore(ledger.connection, session="agent-42")
    governed = ContinuityStore(PostgresContinuityBackend(ledger.connection, session="agent-42"))
    replans = ledger.epoch_store()  # the session projection's state (holon_ctx.postgres.epochs)
"""

from __future__ import annotations

from holon_ctx.postgres.admin import delete_session, list_sessions, migrate
from holon_ctx.postgres.connection import describe, is_postgres_url
from holon_ctx.postgres.continuity import PostgresContinuityBackend
from holon_ctx.postgres.episodes import PostgresEpisodeStore
from holon_ctx.postgres.ledger import PostgresStore
from holon_ctx.postgres.schema import SCHEMA_VERSION, SessionInfo

# The package is the public surface (RFC 0028): its modules are internal, so every store a
# session needs is named here.
__all__ = ["SCHEMA_VERSION", "PostgresContinuityBackend", "PostgresEpisodeStore", "PostgresStore",
           "SessionInfo", "delete_session", "describe", "is_postgres_url", "list_sessions",
           "migrate"]
