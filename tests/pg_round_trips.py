"""Counting a psycopg connection's round trips, for the tests and benchmarks of RFC 0026.

A round trip is the client waiting for the server to answer everything it has asked so far.
psycopg runs every exchange through the connection's ``wait``; an exchange counts once when it
read from the server *and* ends with every answer asked for received:

- outside pipeline mode, each exchange (a statement; a transaction's BEGIN and COMMIT each) asks
  and is answered in one ``wait``: one round trip, however many reads its answer took;
- in pipeline mode, the statements are sent one ``wait`` each and answered after the pipeline's
  sync (or a flush request: a fetch inside the block), in the ``wait`` that sends it: one round
  trip per sync or fetch, whichever ``wait`` the answers happen to be read in. The server sends
  a statement's answer early once it fills its output buffer (about 8 kB: a few large rows), and
  the ``wait`` of a statement sent after that reads it while the rest is still to be answered;
  counted per ``wait`` that read, that pipeline was two round trips on a loaded machine and one
  on an idle one (``tests/test_postgres_read_ahead.py`` flaked with 2).

A read is a read wait, or a read-or-write wait (a pipeline flushing) that came back readable: a
late client reads the whole answer there, before it ever waits for reading alone.

Whether answers are outstanding is psycopg's pipeline queue (``conn._pipeline.result_queue``,
not public API): the counter refuses a connection without it rather than count otherwise.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from psycopg.waiting import Ready, Wait

__all__ = ["RoundTrips"]


class RoundTrips:
    """``RoundTrips(conn).count``: the round trips ``conn`` made since."""

    def __init__(self, conn: Any) -> None:
        if not hasattr(conn, "_pipeline"):
            raise TypeError("RoundTrips needs psycopg's Connection._pipeline (psycopg >= 3.1)")
        self.count = 0
        inner = conn.wait

        def answered() -> bool:
            # Nothing asked is still unanswered: not in a pipeline, or its queue is empty.
            pipeline = conn._pipeline
            return pipeline is None or not pipeline.result_queue

        def counted(gen: Generator[Any, Any, Any]) -> Generator[Any, Any, Any]:
            ready: Any = None
            read = False
            try:
                while True:
                    wanted = gen.send(ready)
                    ready = yield wanted
                    read = read or wanted == Wait.R or (
                        wanted == Wait.RW and ready is not None
                        and bool(Ready(int(ready)) & Ready.R))
            except StopIteration as stop:
                return stop.value
            finally:
                # An exchange that raised (an error answered) counts as one that returned.
                if read and answered():
                    self.count += 1

        def wait(gen: Generator[Any, Any, Any], *args: Any, **kwargs: Any) -> Any:
            return inner(counted(gen), *args, **kwargs)

        conn.wait = wait
