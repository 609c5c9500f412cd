"""Two ``holon-ctx import`` runs into one database that does not exist yet (issue 10, item 1).

A failed import used to unlink the database, WAL and SHM it had "created", after another import had
committed into that very file: the winner reported success and nothing was left. Now a new database
is built privately and published with a no-clobber link (RFC 0006), so a failure removes only its own
private file. The first test forces the interleaving that lost data; the second races real
processes a few rounds and checks that every import that reported success is in the database.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ledger_procs import child_env, ledger_ids

from holon_ctx.cli import ledger_cmds
from holon_ctx.cli.main import main


def _ledger(path: Path, tag: str, first_seq: int, turns: int) -> Path:
    lines = []
    for k in range(turns):
        seq = first_seq + k
        lines.append(f'{{"v":1,"type":"turn","id":"{tag}t{seq}","seq":{seq},"trigger":"timer"}}')
        lines.append(f'{{"v":1,"type":"message","id":"{tag}m{seq}","turn_id":"{tag}t{seq}",'
                     f'"role":"assistant","text":"step {seq} of {tag}"}}')
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _import_cli(src: Path, db: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "holon_ctx", "import", str(src), "--db", str(db)],
                          capture_output=True, text=True, env=child_env(), timeout=120, check=False)



def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if ".new-" in p.name)


def test_a_failed_import_keeps_what_another_import_committed_meanwhile(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """B starts first on a new path; A imports the same ledger and commits; B then fails on a
    duplicate id. A's database (file, and the records in it) survives B's failure."""
    src = _ledger(tmp_path / "day.jsonl", "", 0, 20)
    db = tmp_path / "race.db"
    real = ledger_cmds.import_jsonl
    other: list[subprocess.CompletedProcess[str]] = []

    def interleaved(path: Any, store: Any, **kwargs: Any) -> int:
        if not other:  # only while B's first attempt is under way
            other.append(_import_cli(src, db))
        return real(path, store, **kwargs)

    monkeypatch.setattr(ledger_cmds, "import_jsonl", interleaved)
    code = main(["import", str(src), "--db", str(db)])
    err = capsys.readouterr().err
    assert other[0].returncode == 0, other[0].stderr
    assert "imported 40 records" in other[0].stdout
    assert code == 2
    assert "duplicate id: turn:t0 is already in the ledger" in err
    assert db.exists()
    assert ledger_ids(db) == [f"{k}{s}" for s in range(20) for k in "tm"]
    assert _leftovers(tmp_path) == []


def test_imports_that_fit_together_both_land_when_they_race_for_a_new_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The loser of the race for the name imports again into the winner's database, as if it had
    started second: with distinct ids and later turns, both imports are in the ledger."""
    first = _ledger(tmp_path / "a.jsonl", "a.", 0, 5)
    second = _ledger(tmp_path / "b.jsonl", "b.", 100, 5)
    db = tmp_path / "race.db"
    real = ledger_cmds.import_jsonl
    other: list[subprocess.CompletedProcess[str]] = []

    def interleaved(path: Any, store: Any, **kwargs: Any) -> int:
        if not other:
            other.append(_import_cli(first, db))
        return real(path, store, **kwargs)

    monkeypatch.setattr(ledger_cmds, "import_jsonl", interleaved)
    assert main(["import", str(second), "--db", str(db)]) == 0
    assert other[0].returncode == 0, other[0].stderr
    assert "(10 turns, 20 records in the ledger)" in capsys.readouterr().out
    assert ledger_ids(db) == [f"{t}{k}{s}" for t, base in (("a.", 0), ("b.", 100))
                        for s in range(base, base + 5) for k in "tm"]
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("round_", range(2))
def test_racing_imports_lose_nothing_that_was_reported(tmp_path: Path, round_: int) -> None:
    """Two real processes import the same file into one new path at once: exactly one succeeds
    (the other names the duplicate), and the database holds the winner's records."""
    src = _ledger(tmp_path / "day.jsonl", "", 0, 200)
    db = tmp_path / "race.db"
    cmd = [sys.executable, "-m", "holon_ctx", "import", str(src), "--db", str(db)]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=child_env()) for _ in range(2)]
    results = [(p.wait(timeout=120), *p.communicate()) for p in procs]
    codes = sorted(code for code, _, _ in results)
    assert codes == [0, 2], results
    loser = next(err for code, _, err in results if code == 2)
    assert "duplicate id" in loser, loser
    assert "Traceback" not in loser
    assert len(ledger_ids(db)) == 400
    assert _leftovers(tmp_path) == []


def test_a_failed_import_into_a_new_path_leaves_no_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Alone, a failed import still leaves nothing: neither the database nor its private build."""
    src = tmp_path / "bad.jsonl"
    src.write_text('{"v":1,"type":"turn","id":"t1","seq":1,"trigger":"timer"}\n{"oops"\n',
                   encoding="utf-8")
    assert main(["import", str(src), "--db", str(tmp_path / "new.db")]) == 2
    assert capsys.readouterr().err.startswith(f"holon-ctx: error: {src}:2: ")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl"]
