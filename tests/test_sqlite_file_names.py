"""A SQLite ledger whose relative name starts with ``file:`` is that file, not a URI.

SQLite built with URI names on reads ``file:x.db`` as a URI even with ``uri=False``: ``import
--db file:x.db`` built its database in ``x.db.new-…`` (a stray file left behind), published the
empty private file under ``file:x.db``, and said it had imported every record.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from holon_ctx.cli.main import main
from holon_ctx.lowlevel import SqliteStore

LEDGER = (b'{"type":"turn","id":"t1","seq":1,"trigger":"operator_input"}\n'
          b'{"type":"message","id":"m1","turn_id":"t1","role":"operator","text":"ship it"}\n')


def test_import_into_a_file_colon_name_keeps_the_records_there(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    Path("run.jsonl").write_bytes(LEDGER)
    assert main(["import", "run.jsonl", "--db", "file:x.db"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file:x.db", "run.jsonl"]
    store = SqliteStore(tmp_path / "file:x.db")
    assert store.stats().records == 2
    store.close()
    capsys.readouterr()
    assert main(["stats", "--db", "file:x.db"]) == 0
    assert "ledger: 1 turn, 2 records" in " ".join(capsys.readouterr().out.split())


def test_the_library_opens_the_file_it_is_named(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = SqliteStore("file:y.db")
    store.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file:y.db"]
