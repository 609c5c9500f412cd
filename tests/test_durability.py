"""Durability of the SQLite store across processes: killed writers and concurrent readers.

Both tests run a real writer in a separate Python process. The first SIGKILLs it in the middle of a
large import (after half the file has been appended inside the open transaction) and checks that
reopening the database finds every earlier batch and nothing of the interrupted one. The second
reads from this process while the writer appends, and checks that it only ever sees whole batches.
"""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from holon_ctx.ledger.importer import import_jsonl
from holon_ctx.ledger.sqlite import SqliteStore

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="uses SIGKILL")

ROOT = Path(__file__).resolve().parent.parent


def write_batch(path: Path, tag: str, first_seq: int, n_records: int, per_turn: int = 10) -> Path:
    """``n_records`` valid lines: a turn every ``per_turn`` lines, each followed by its messages."""
    lines = []
    seq = first_seq
    turn = ""
    for i in range(n_records):
        if i % per_turn == 0:
            turn = f"{tag}-t{seq}"
            lines.append(f'{{"v":1,"type":"turn","id":"{turn}","seq":{seq},"trigger":"timer"}}')
            seq += 1
        else:
            lines.append(f'{{"v":1,"type":"message","id":"{tag}-m{i}","turn_id":"{turn}",'
                         f'"role":"assistant","text":"第 {i} 步：the build passed 🚀 after retry {i}"}}')
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


KILLED_WRITER = """
import os, sys, time
from pathlib import Path
from holon_ctx.ledger.importer import import_jsonl
from holon_ctx.ledger.sqlite import SqliteStore

db, marker, big, *batches = sys.argv[1:]
store = SqliteStore(db)
for batch in batches:
    import_jsonl(batch, store)
print("committed", os.path.getsize(db + "-wal"), flush=True)
half = os.path.getsize(big) // 2
seen = 0

def on_bytes(n):
    global seen
    seen += n
    if seen > half:
        if not os.path.exists(marker):
            Path(marker).write_text("half of the batch is appended, uncommitted")
        time.sleep(0.001)  # keep the transaction open until the parent kills us

import_jsonl(big, store, on_bytes=on_bytes)
print("finished", flush=True)
"""


def test_writer_killed_mid_import_keeps_committed_batches_only(tmp_path: Path) -> None:
    """SIGKILL during an import: integrity ok, earlier batches intact, nothing of the killed one."""
    db = tmp_path / "ledger.db"
    marker = tmp_path / "halfway"
    batches = [write_batch(tmp_path / f"b{k}.jsonl", f"b{k}", 1000 * k, 700) for k in range(3)]
    big = write_batch(tmp_path / "big.jsonl", "big", 10_000, 40_000)
    child = subprocess.Popen(
        [sys.executable, "-c", KILLED_WRITER, str(db), str(marker), str(big), *map(str, batches)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_child_env())
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert child.poll() is None, child.communicate()
        assert time.monotonic() < deadline, "writer never reached the middle of the import"
        time.sleep(0.005)
    wal_at_kill = (tmp_path / "ledger.db-wal").stat().st_size
    child.send_signal(signal.SIGKILL)
    out, _ = child.communicate(timeout=30)
    assert child.returncode == -signal.SIGKILL
    assert "finished" not in out
    wal_committed = int(out.split()[1])
    # Half the batch had reached the WAL file uncommitted: recovery really had to discard it.
    assert wal_at_kill > wal_committed

    with sqlite3.connect(db) as raw:
        assert raw.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert raw.execute("SELECT count(*) FROM records WHERE ref LIKE '%:big-%'").fetchone() == (0,)
    store = SqliteStore(db)
    assert store.end_pos() == 3 * 700
    assert store.stats().turns == 3 * 70
    assert [r.id for r in store.iter_records()] == [
        line.split('"id":"')[1].split('"')[0]
        for b in batches for line in b.read_text(encoding="utf-8").splitlines()]
    assert store.get("message:big-1") is None
    assert store.turn("big-t10000") is None
    # The database is writable again: the interrupted batch can simply be imported anew.
    assert import_jsonl(big, store) == 40_000
    store.close()


APPENDING_WRITER = """
import sys, time
from holon_ctx.ledger.records import Message, MessageRole, Turn
from holon_ctx.ledger.sqlite import SqliteStore

db, batches, batch_size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
store = SqliteStore(db)
print("ready", flush=True)
for b in range(batches):
    turn = Turn(id=f"t{b}", seq=b, trigger="scheduler_tick")
    messages = [Message(id=f"m{b}.{i}", turn_id=turn.id, role=MessageRole.ASSISTANT,
                        text=f"batch {b} message {i} 批次") for i in range(batch_size - 1)]
    store.append([turn, *messages])
    time.sleep(0.01)
print("done", flush=True)
"""


def test_reader_in_another_process_sees_only_whole_batches(tmp_path: Path) -> None:
    """While a writer process appends 50-record batches, every count this reader sees is whole."""
    db = tmp_path / "ledger.db"
    n_batches, batch_size = 60, 50
    writer = subprocess.Popen(
        [sys.executable, "-c", APPENDING_WRITER, str(db), str(n_batches), str(batch_size)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_child_env())
    assert writer.stdout is not None
    assert writer.stdout.readline() == "ready\n"
    reader = SqliteStore(db)
    seen: list[int] = []
    while True:
        running = writer.poll() is None
        end = reader.end_pos()
        records = len(list(reader.iter_records()))
        turns = reader.stats().turns
        latest = reader.latest_turn(end)
        seen.extend((end, records, turns * batch_size))
        if latest is not None:
            # The newest visible turn always comes with all of its messages.
            seq = latest.record.seq  # type: ignore[union-attr]
            assert len(reader.records_of_turns(seq, seq, end)) == batch_size - 1
        if not running:
            break
    out, err = writer.communicate(timeout=30)
    assert (writer.returncode, out, err) == (0, "done\n", "")
    assert all(n % batch_size == 0 for n in seen), sorted(set(seen))
    assert len(set(seen)) >= 5, "the reader never overlapped the writer"
    assert reader.end_pos() == n_batches * batch_size
    reader.close()


SYNCING_WRITER = """
import sys
from holon_ctx.ledger.records import Turn
from holon_ctx.ledger.sqlite import SqliteStore

store = SqliteStore(sys.argv[1], durable=sys.argv[2] == "1")
assert store.durable is (sys.argv[2] == "1")
for i in range(20):
    store.append([Turn(id=f"t{i}", seq=i + 1, trigger="timer")])
store.close()
"""


def _disk_syncs(tmp_path: Path, durable: bool) -> int:
    """The fsync/fdatasync calls of a process making 20 one-record appends (strace counts)."""
    out = tmp_path / f"strace-{durable}.txt"
    db = tmp_path / f"syncs-{durable}.db"
    done = subprocess.run(
        ["strace", "-f", "-c", "-e", "trace=fsync,fdatasync", "-o", str(out), sys.executable,
         "-c", SYNCING_WRITER, str(db), "1" if durable else "0"],
        check=False, env=_child_env(), capture_output=True, text=True, timeout=120)
    if done.returncode != 0 and "ptrace" in done.stderr:
        pytest.skip(f"strace cannot trace here: {done.stderr.strip()[:200]}")
    assert done.returncode == 0, done.stderr
    assert len(SqliteStore(db).records_between(0, 100)) == 20
    calls = 0
    for line in out.read_text().splitlines():
        fields = line.split()
        if fields and fields[-1] in ("fsync", "fdatasync"):
            calls += int(fields[3])
    return calls


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace to count disk syncs")
def test_a_durable_store_waits_for_the_disk_at_every_commit(tmp_path: Path) -> None:
    # durable=True: every acknowledged append is on disk (synchronous=FULL syncs the WAL at each
    # commit); the default syncs only at checkpoints and on close (synchronous=NORMAL).
    durable, default = _disk_syncs(tmp_path, True), _disk_syncs(tmp_path, False)
    assert durable >= 20
    assert default < 20
