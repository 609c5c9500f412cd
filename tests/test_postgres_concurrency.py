"""PostgreSQL under a fleet: concurrent appenders lose nothing, killed ones leave nothing.

Writers are real processes. In the stress test four of them append, for about two seconds, batches
to one shared session and each to a session of its own, while this process reads the shared one;
turns are derived (no ``turn_id``), so every batch's sequence number is allocated inside its
transaction. In the kill test a writer is SIGKILLed with half a large batch inserted.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from holon_ctx.ledger.records import Message, MessageRole, Turn
from holon_ctx.postgres import PostgresStore

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="uses SIGKILL")

ROOT = Path(__file__).resolve().parent.parent
BATCH = 5  # a derived turn, its operator message and three assistant messages
WRITERS = 4
SECONDS = 1.5


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


WRITER = """
import sys, time
from holon_ctx.ledger.records import Message, MessageRole
from holon_ctx.postgres import PostgresStore

url, shared, own, tag, seconds = sys.argv[1:6]
stores = [PostgresStore(url, session=shared), PostgresStore(url, session=own)]
print("ready", flush=True)
sys.stdin.readline()
deadline = time.monotonic() + float(seconds)
i = 0
while time.monotonic() < deadline:
    for store in stores:
        store.append([Message(id=f"{tag}-{i}", role=MessageRole.OPERATOR, text=f"task {i}"),
                      *(Message(id=f"{tag}-{i}.{k}", role=MessageRole.ASSISTANT, text=f"step {k}")
                        for k in range(3))])
    i += 1
print(i, flush=True)
"""


def _check_ledger(store: PostgresStore, batches: dict[str, int]) -> None:
    """Whole batches at consecutive positions, each writer's in its order, seqs 0..n-1."""
    records = list(store.iter_records())
    assert store.end_pos() == len(records) == BATCH * sum(batches.values())
    next_batch = dict.fromkeys(batches, 0)
    for start in range(0, len(records), BATCH):
        turn, *messages = records[start:start + BATCH]
        assert isinstance(turn, Turn)
        assert turn.seq == start // BATCH
        tag, _, number = turn.id.removeprefix("t.").rpartition("-")
        assert int(number) == next_batch[tag]
        next_batch[tag] += 1
        assert [m.id for m in messages] == [f"{tag}-{number}", *(f"{tag}-{number}.{k}"
                                                                 for k in range(3))]
        assert all(isinstance(m, Message) and m.turn_id == turn.id for m in messages)
    assert next_batch == batches


def test_concurrent_appends_lose_nothing(pg_url: str, pg_session_key: str) -> None:
    """Four processes append to one shared session and to their own at once; a reader sees only
    whole committed batches; afterwards every batch is there once, whole, in a valid ledger."""
    shared = pg_session_key + "-shared"
    writers = [subprocess.Popen(
        [sys.executable, "-c", WRITER, pg_url, shared, f"{pg_session_key}-own{w}", f"w{w}",
         str(SECONDS)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env=_env()) for w in range(WRITERS)]
    for w in writers:
        assert w.stdout is not None
        assert w.stdout.readline() == "ready\n", w.communicate()
    for w in writers:
        assert w.stdin is not None
        w.stdin.write("go\n")
        w.stdin.flush()
    reader = PostgresStore(pg_url, session=shared)
    seen: set[int] = set()
    while any(w.poll() is None for w in writers):
        end = reader.end_pos()
        seen.add(end)
        assert end % BATCH == 0
        latest = reader.latest_turn(end)
        if latest is not None:
            seq = latest.turn_seq
            assert seq is not None
            assert len(reader.records_of_turns(seq, seq, end)) == BATCH - 1
        time.sleep(0.02)
    batches = {}
    for number, w in enumerate(writers):
        out, err = w.communicate(timeout=30)
        assert w.returncode == 0, err
        batches[f"w{number}"] = int(out.strip())
    assert len(seen) >= 3, "the reader never overlapped the writers"
    _check_ledger(reader, batches)
    reader.close()
    for number in range(WRITERS):
        own = PostgresStore(pg_url, session=f"{pg_session_key}-own{number}", create=False)
        _check_ledger(own, {f"w{number}": batches[f"w{number}"]})
        own.close()


KILLED = """
import sys, time
from pathlib import Path
from holon_ctx.ledger.records import Message, MessageRole
from holon_ctx.postgres import PostgresStore

url, session, marker = sys.argv[1:4]
store = PostgresStore(url, session=session)

def records():
    for i in range(100_000):
        # Past the first 4,097 records, which an append reads ahead before it writes anything
        # (a batch that small is retried whole if its connection dies: RFC 0027).
        if i == 6000:
            Path(marker).write_text(str(store.connection.info.backend_pid))
            time.sleep(600)  # hold the transaction open until the parent kills us
        yield Message(id=f"big-{i}", role=MessageRole.OPERATOR if i % 10 == 0
                      else MessageRole.ASSISTANT, text=f"record {i}")

store.append(records())
print("finished", flush=True)
"""


def test_killed_writer_leaves_nothing_of_its_batch(pg_url: str, pg_session_key: str,
                                                   tmp_path: Path) -> None:
    """SIGKILL with about 6,000 records of a batch inserted (uncommitted): none of them survive, the
    session is not left locked, and appends continue at the committed end."""
    store = PostgresStore(pg_url, session=pg_session_key)
    store.append([Message(id=f"early-{i}", role=MessageRole.OPERATOR, text="hello")
                  for i in range(10)])
    before = list(store.iter_records())
    marker = tmp_path / "halfway"
    child = subprocess.Popen([sys.executable, "-c", KILLED, pg_url, pg_session_key, str(marker)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    deadline = time.monotonic() + 60
    while not marker.exists() or not marker.read_text():
        assert child.poll() is None, child.communicate()
        assert time.monotonic() < deadline, "the writer never reached the middle of its batch"
        time.sleep(0.01)
    pid = int(marker.read_text())
    conn = store.connection
    # The batch really wrote rows (its transaction holds a write lock on the records table) and
    # holds the session's append lock.
    assert conn.execute(
        "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE l.pid = %s "
        "AND c.relname = 'holon_records' AND l.mode = 'RowExclusiveLock'", (pid,)).fetchone()[0]
    import psycopg

    with pytest.raises(psycopg.errors.LockNotAvailable), conn.transaction():
        conn.execute("SELECT 1 FROM holon_sessions WHERE sid=%s FOR UPDATE NOWAIT",
                     (store.sid,))
    child.send_signal(signal.SIGKILL)
    out, _ = child.communicate(timeout=30)
    assert child.returncode == -signal.SIGKILL
    assert "finished" not in out
    # The server rolls the transaction back once it sees the connection drop.
    while conn.execute("SELECT count(*) FROM pg_stat_activity WHERE pid=%s",
                       (pid,)).fetchone()[0]:
        assert time.monotonic() < deadline, "the killed writer's backend never went away"
        time.sleep(0.01)
    assert list(store.iter_records()) == before
    assert conn.execute("SELECT count(*) FROM holon_records WHERE sid=%s AND ref LIKE %s",
                        (store.sid, "%big-%")).fetchone()[0] == 0
    assert store.append([Message(id="after", role=MessageRole.OPERATOR, text="again")]) == 2
    assert store.get("message:after").pos == len(before) + 1  # type: ignore[union-attr]
    store.close()
