"""The round-trip counter the PostgreSQL tests and benchmarks use (tests/pg_round_trips.py).

It counts what a round trip costs, whatever the machine's timing: a pipeline is one, however its
answers are split between psycopg's waits (an answer the server sends early, an answer read
while the client flushes); a second exchange, or a fetch inside a pipeline before its sync, is a
second one. Each timing is made to happen, not hoped for: the server sends a large answer as
soon as its output buffer fills, and a "late" wait function comes back to the socket only once
the pipeline's answer is there (a client descheduled on a loaded machine).
"""

from __future__ import annotations

import select
from collections.abc import Generator, Iterator
from typing import Any

import pytest
from pg_round_trips import RoundTrips
from psycopg.waiting import Ready, Wait

#: Far larger than the server's output buffer (8 kB): sent before the pipeline's sync.
_LARGE = "SELECT repeat('x', 262144)"
#: Bounds every wait below (none should come near it).
_PATIENCE_S = 30.0


@pytest.fixture
def conn(pg_url: str) -> Iterator[Any]:
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as connection:
        yield connection


def _readable(conn: Any) -> bool:
    return bool(select.select([conn.pgconn.socket], [], [], _PATIENCE_S)[0])


def test_a_statement_is_one_round_trip_and_two_are_two(conn: Any) -> None:
    """Outside a pipeline every statement waits for its answer."""
    trips = RoundTrips(conn)
    conn.execute("SELECT 1").fetchall()
    assert trips.count == 1
    conn.execute("SELECT 2").fetchall()
    assert trips.count == 2


def test_a_pipeline_answered_early_is_one_round_trip(conn: Any) -> None:
    """The server sends the first statement's large answer before the pipeline's sync; the
    second statement's wait reads it (the socket is readable before it is sent), the exit's wait
    the rest. One round trip: the client never waited for an answer before sending everything.
    Counted per wait that read (the counter before), it was two."""
    trips = RoundTrips(conn)
    with conn.pipeline():
        first = conn.execute(_LARGE)
        assert _readable(conn), "the server sent the large answer before the sync"
        second = conn.execute("SELECT 2")
    assert len(first.fetchall()[0][0]) == 262144
    assert second.fetchall() == [(2,)]
    assert trips.count == 1


def test_a_fetch_inside_a_pipeline_is_a_second_round_trip(conn: Any) -> None:
    """A fetch before the pipeline's sync waits for the answers so far (a flush request), and
    the sync at the exit waits again: two round trips, whether or not the first answer came
    early."""
    for first_statement in ("SELECT 1", _LARGE):
        trips = RoundTrips(conn)
        with conn.pipeline():
            conn.execute(first_statement).fetchall()
            second = conn.execute("SELECT 2")
        assert second.fetchall() == [(2,)]
        assert trips.count == 2, first_statement


def _late(conn: Any) -> Any:
    """A wait function that, once the pipeline's sync is sent, comes back to the socket only
    when the answer is there: the read-or-write wait of the exit then reads the whole answer,
    and no read wait follows."""
    fd = conn.pgconn.socket
    wanted_after_sync: list[int] = []

    def sync_sent() -> bool:
        pipeline = conn._pipeline
        return bool(pipeline is not None and not pipeline.command_queue
                    and pipeline.result_queue and pipeline.result_queue[-1] is None)

    def wait(gen: Generator[Any, Any, Any], *_args: Any, **_kwargs: Any) -> Any:
        try:
            wanted = next(gen)
            while True:
                if sync_sent():
                    wanted_after_sync.append(wanted)
                    if wanted == Wait.RW:
                        assert _readable(conn)
                rlist = [fd] if wanted & Wait.R else []
                wlist = [fd] if wanted & Wait.W else []
                r, w, _ = select.select(rlist, wlist, [], _PATIENCE_S)
                ready = (Ready.R if r else 0) | (Ready.W if w else 0)
                wanted = gen.send(Ready(ready))
        except StopIteration as stop:
            return stop.value
    wait.wanted_after_sync = wanted_after_sync  # type: ignore[attr-defined]
    return wait


def test_an_answer_read_while_the_pipeline_flushes_is_a_round_trip(conn: Any) -> None:
    """A late client reads the pipeline's whole answer in the exit's read-or-write wait and
    never waits for reading alone: still one round trip (counting read waits only, it was
    none)."""
    late = conn.wait = _late(conn)
    trips = RoundTrips(conn)
    with conn.pipeline():
        one = conn.execute("SELECT 1")
        two = conn.execute("SELECT 2")
    assert (one.fetchall(), two.fetchall()) == ([(1,)], [(2,)])
    assert Wait.RW in late.wanted_after_sync
    assert Wait.R not in late.wanted_after_sync, "the answer was read while flushing"
    assert trips.count == 1
