"""Counting a psycopg connection's round trips, for the tests and benchmarks of RFC 0026.

A round trip is a wait for the server's answer. psycopg runs every exchange through the
connection's ``wait``; an exchange that had to block for data to read (in a read wait, or in a
pipeline's read-or-write wait that came back readable) waited for the server once (a pipeline
sends all its statements and reads all their answers in one such wait; a plain statement is one;
a transaction's BEGIN and COMMIT are one each).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from psycopg.waiting import Ready, Wait

__all__ = ["RoundTrips"]


class RoundTrips:
    """``RoundTrips(conn).count``: the round trips ``conn`` made since."""

    def __init__(self, conn: Any) -> None:
        self.count = 0
        inner = conn.wait

        def counted(gen: Generator[Any, Any, Any]) -> Generator[Any, Any, Any]:
            ready: Any = None
            waited = False
            try:
                while True:
                    wanted = gen.send(ready)
                    ready = yield wanted
                    # A pipeline waits for read *or* write (RW) while it flushes: an answer that
                    # arrives then is read in that wait, never in a read-only one (a loaded
                    # machine's timing), and is the same round trip.
                    read = wanted == Wait.R or (wanted == Wait.RW and ready is not None
                                                and bool(Ready(int(ready)) & Ready.R))
                    if read and not waited:
                        self.count += 1
                        waited = True
            except StopIteration as stop:
                return stop.value

        def wait(gen: Generator[Any, Any, Any], *args: Any, **kwargs: Any) -> Any:
            return inner(counted(gen), *args, **kwargs)

        conn.wait = wait
