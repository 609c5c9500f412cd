"""SIGTERM and SIGHUP clean up like Ctrl-C (issue 10, item 7).

``timeout 5 holon-ctx import fifo --db new.db`` used to leave a created, empty database with its
WAL and SHM behind (SIGINT already cleaned up). Each test starts a real ``holon-ctx import`` that
blocks on a FIFO nobody writes, waits until it has begun building the database, signals it, and
checks the status, the one-line message and that nothing but the FIFO is left.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ledger_procs import child_env

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs and POSIX signals")




@pytest.mark.parametrize(("signum", "status", "name"), [
    (signal.SIGTERM, 128 + signal.SIGTERM, "terminated (SIGTERM)"),
    (signal.SIGHUP, 128 + signal.SIGHUP, "terminated (SIGHUP)"),
    (signal.SIGINT, 130, "interrupted"),
])
def test_a_signal_while_reading_a_fifo_leaves_nothing(tmp_path: Path, signum: int, status: int,
                                                      name: str) -> None:
    fifo = tmp_path / "in.jsonl"
    os.mkfifo(fifo)
    db = tmp_path / "new.db"
    proc = subprocess.Popen([sys.executable, "-m", "holon_ctx", "import", str(fifo), "--db", str(db)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env())
    deadline = time.monotonic() + 60
    # The database (or its private build) exists once the import is about to read its input.
    while not [p for p in tmp_path.iterdir() if p.name.startswith("new.db")]:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the import never started"
        time.sleep(0.02)
    time.sleep(0.2)  # now blocked opening the FIFO
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == status, err
    assert (out, err) == ("", f"holon-ctx: {name}\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]
