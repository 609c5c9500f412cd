"""PostgreSQL ledgers for the benchmarks: loaded once into a cache database, cloned per run.

``cached_session(n_turns)`` loads the projection ledger of ``n_turns`` turns (bench/projection_gen,
seed 0: the same records as the SQLite benchmarks) into session ``projection-<n>`` of the cache
database ``holon_bench_v<schema version>`` (made on first use; ``HOLON_BENCH_POSTGRES`` names
another server). One cache per schema version: a branch with a newer schema must not migrate the
cache that other checkouts on the same server still read with the older one. A session is
renamed to its final key only once it is complete, so an interrupted load is redone.
``clone(url, src, dst)`` copies a session's ledger server-side (``INSERT … SELECT``), so a benchmark
that appends works on its own copy and the cache stays as it was.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import psycopg
from projection_gen import append_turns, turns

from holon_ctx.ledger.records import Record, Turn
from holon_ctx.postgres import SCHEMA_VERSION, PostgresStore, delete_session

__all__ = ["bench_url", "cached_session", "clone", "drop", "next_turns"]

ADMIN_URL = os.environ.get("HOLON_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")
_LEDGER_TABLES = ("holon_records", "holon_turns", "holon_token_counts", "holon_work_item_states",
                  "holon_wait_states", "holon_calls")


def bench_url() -> str:
    name = f"holon_bench_v{SCHEMA_VERSION}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        if admin.execute("SELECT 1 FROM pg_database WHERE datname=%s", (name,)).fetchone() is None:
            admin.execute(f'CREATE DATABASE "{name}"')
    return urlsplit(ADMIN_URL)._replace(path=f"/{name}").geturl()


def cached_session(n_turns: int) -> str:
    """The key of the complete session holding the ``n_turns``-turn projection ledger."""
    url, key = bench_url(), f"projection-{n_turns}"
    store = PostgresStore(url, session=key)
    if not store.created:
        store.close()
        return key
    store.close()
    delete_session(url, key)
    loading = f"loading-{n_turns}-{os.getpid()}"
    store = PostgresStore(url, session=loading)
    started = time.perf_counter()
    append_turns(store, n_turns)
    store.connection.execute("ANALYZE")
    store.connection.execute("UPDATE holon_sessions SET key=%s WHERE key=%s", (key, loading))
    print(f"loaded {n_turns} turns into PostgreSQL in {time.perf_counter() - started:.1f} s")
    store.close()
    return key


def clone(url: str, src: str, dst: str) -> None:
    """Copy session ``src``'s ledger into a new session ``dst`` (server-side)."""
    with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
        (src_sid, end), = conn.execute("SELECT sid, end_pos FROM holon_sessions WHERE key=%s",
                                       (src,)).fetchall()
        (dst_sid,), = conn.execute("INSERT INTO holon_sessions (key, end_pos) VALUES (%s, %s) "
                                   "RETURNING sid", (dst, end)).fetchall()
        for table in _LEDGER_TABLES:
            cols = [c for (c,) in conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name=%s "
                "AND table_schema=current_schema() AND column_name <> 'sid' "
                "ORDER BY ordinal_position", (table,))]
            listed = ", ".join(cols)
            conn.execute(f"INSERT INTO {table} (sid, {listed}) SELECT %s, {listed} FROM {table} "
                         "WHERE sid=%s", (dst_sid, src_sid))


def drop(url: str, key: str) -> None:
    delete_session(url, key)


def next_turns(n_turns: int, count: int) -> list[list[Record]]:
    """The records of the ``count`` turns that would follow the ``n_turns``-turn ledger, per turn
    (the generator is deterministic, so these continue exactly the cached ledgers)."""
    groups: list[list[Record]] = []
    for record in itertools.islice(_after(turns(n_turns + count), n_turns), None):
        if isinstance(record, Turn):
            groups.append([])
        groups[-1].append(record)
    return groups


def _after(records: Iterator[Record], n_turns: int) -> Iterator[Record]:
    seen = 0
    for record in records:
        if isinstance(record, Turn):
            seen += 1
        if seen > n_turns:
            yield record
