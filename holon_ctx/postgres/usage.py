"""Usage observations in PostgreSQL, beside the session's ledger (see :mod:`holon_ctx.ledger.usage`).

The SQLite store's table with ``sid`` in front (schema version 5): ``holon_usage`` (sid, seq,
model, turn, observation as msgspec JSON), indexed by model and by turn. Each write is one
autocommitted INSERT; a session reads only its own rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from holon_ctx.ledger.usage import WINDOW, Observation
from holon_ctx.postgres.session import MISSING, SessionHandle

__all__ = ["PostgresUsageStore"]

_decode = msgspec.json.Decoder(Observation).decode
_encode = msgspec.json.encode


class PostgresUsageStore:
    """``UsageStore`` of a session: ``PostgresUsageStore(url_or_connection, session=KEY)``, or
    ``PostgresStore.usage_store()`` for one on the ledger's connection (closing it leaves a
    connection passed in open)."""

    def __init__(self, source: str | Any, *, session: str, create: bool = True) -> None:
        self._h = SessionHandle(source, session, create=create)

    def add(self, observation: Observation) -> None:
        self._h.rows("INSERT INTO holon_usage (sid, model, turn, observation) VALUES "
                     "(%(sid)s, %(model)s, %(turn)s, %(body)s)",
                     {"model": observation.model, "turn": observation.turn,
                      "body": _encode(observation)})

    def recent(self, model: str, limit: int = WINDOW) -> list[Observation]:
        rows = self._h.ahead("usage", model, limit)  # a request's read ahead (ahead.py)
        if rows is MISSING:
            rows = self._h.rows("SELECT observation FROM holon_usage WHERE sid=%(sid)s AND "
                                "model=%(model)s ORDER BY seq DESC LIMIT %(n)s",
                                {"model": model, "n": max(limit, 0)})
        return [_decode(bytes(raw)) for (raw,) in reversed(rows)]

    def of_turns(self, turns: Sequence[str]) -> list[Observation]:
        wanted = list(dict.fromkeys(turns))
        if not wanted:
            return []
        rows = self._h.rows("SELECT observation FROM holon_usage WHERE sid=%(sid)s AND "
                            "turn = ANY(%(turns)s) ORDER BY seq", {"turns": wanted})
        return [_decode(bytes(raw)) for (raw,) in rows]

    def close(self) -> None:
        self._h.close()
