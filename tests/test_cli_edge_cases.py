"""Defects a user review found, each pinned by the behaviour the CLI now has."""

from __future__ import annotations

import sqlite3
from importlib import resources
from pathlib import Path

import pytest

from holon_ctx.cli.main import main

DEMO = resources.files("holon_ctx") / "data" / "demo.jsonl"


def _err_lines(capsys: pytest.CaptureFixture[str]) -> tuple[str, list[str]]:
    captured = capsys.readouterr()
    return captured.out, captured.err.strip().splitlines()


def test_export_to_an_unwritable_path_is_one_line(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """`export -o` into a missing directory or onto a directory: one located line, exit 2."""
    db = tmp_path / "l.db"
    with resources.as_file(DEMO) as path:
        assert main(["import", str(path), "--db", str(db)]) == 0
    capsys.readouterr()
    for target in (tmp_path / "missing" / "x.jsonl", tmp_path):
        assert main(["export", "--db", str(db), "-o", str(target)]) == 2
        _, err = _err_lines(capsys)
        assert len(err) == 1
        assert err[0].startswith(f"holon-ctx: error: {target}: cannot write: ")


@pytest.mark.parametrize("argv", [["import", "DEMO", "--db", "DB"],
                                  ["project", "--db", "DB", "--budget", "100"],
                                  ["stats", "--db", "DB"]])
def test_a_foreign_sqlite_file_is_left_byte_identical(tmp_path: Path, argv: list[str],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """A refused database is not touched, not even switched to WAL."""
    db = tmp_path / "other.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE foo (x)")
    con.commit()
    con.close()
    before = db.read_bytes()
    with resources.as_file(DEMO) as path:
        args = [str(path) if a == "DEMO" else str(db) if a == "DB" else a for a in argv]
        assert main(args) == 2
    _, err = _err_lines(capsys)
    assert err == [f"holon-ctx: error: {db}: an SQLite database, but not a holon-ctx ledger"]
    assert db.read_bytes() == before


@pytest.mark.parametrize("argv", [["stats", "FILE"], ["import", "FILE", "--db", "NEW"],
                                  ["preview", "--db", "FILE", "--budget", "500", "--no-pager"],
                                  ["stats", "--db", "FILE"]])
@pytest.mark.parametrize("text", ["[", "x"])
def test_a_one_byte_file_is_never_taken_for_a_database(
        tmp_path: Path, argv: list[str], text: str, capsys: pytest.CaptureFixture[str]) -> None:
    """SQLite reads a 1-byte file as an empty database: a truncated transcript (``[``) was
    refused as "an SQLite database", and as SOURCE or ``--db`` a read-only command wrote a
    69 KB ledger over it. It is read as the file it is, or refused, and left as it was."""
    short = tmp_path / "short.json"
    short.write_text(text)
    new = tmp_path / "new.db"
    args = [str(short) if a == "FILE" else str(new) if a == "NEW" else a for a in argv]
    assert main(args) == 2
    _, err = _err_lines(capsys)
    assert len(err) == 1
    assert "an SQLite database" not in err[0]
    assert short.read_text() == text
    assert not new.exists()


def test_stats_with_a_budget_that_cannot_project_prints_nothing(
        capsys: pytest.CaptureFixture[str]) -> None:
    """`stats --budget 1` fails before printing: stdout stays empty, one error line."""
    with resources.as_file(DEMO) as path:
        assert main(["stats", str(path), "--budget", "1"]) == 2
    out, err = _err_lines(capsys)
    assert out == ""
    assert len(err) == 1
    assert "budget too small" in err[0]


def test_a_ledger_without_turns_says_so(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """Projecting a ledger that holds only an environment record names the problem plainly."""
    src = tmp_path / "env.jsonl"
    src.write_text('{"v":1,"type":"environment","id":"e1","workspace":"/w"}\n', encoding="utf-8")
    assert main(["project", str(src), "--budget", "500"]) == 2
    _, err = _err_lines(capsys)
    assert err == ["holon-ctx: error: the ledger has no turns to project (it holds no turn "
                   "record yet)"]


def test_episode_show_names_a_bad_id_once(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """A malformed episode id gets the same message with or without archived episodes."""
    db = tmp_path / "l.db"
    with resources.as_file(DEMO) as path:
        assert main(["import", str(path), "--db", str(db)]) == 0
    capsys.readouterr()
    assert main(["episodes", "show", "--db", str(db), "episode:nope"]) == 2
    _, err = _err_lines(capsys)
    assert err == ["holon-ctx: error: expected an episode id like e3-9 or episode:e3-9, "
                   "got 'episode:nope'"]


def test_preview_refuses_a_width_too_narrow_to_lay_out(capsys: pytest.CaptureFixture[str]) -> None:
    """--width below 40 columns is a usage error, not 750 lines of one-word wrapping."""
    with resources.as_file(DEMO) as path, pytest.raises(SystemExit) as exit_info:
        main(["preview", str(path), "--budget", "2000", "--width", "5"])
    assert exit_info.value.code == 2
    _, err = _err_lines(capsys)
    assert err[-1].endswith("expected a width of at least 40 columns, got '5'")


CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpora" / "swe-trajectories"


@pytest.mark.skipif(not CORPUS.is_dir(), reason=f"corpus not found at {CORPUS}")
def test_two_transcripts_share_a_database_with_id_prefixes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--id-prefix` keeps ids apart; the same transcript again without one would collide."""
    db = str(tmp_path / "two.db")
    traj = str(CORPUS / "sympy__sympy-23534.traj.json")
    assert main(["import", traj, "--db", db, "--id-prefix", "a."]) == 0
    assert main(["import", traj, "--db", db, "--id-prefix", "b."]) == 0
    capsys.readouterr()
    assert main(["import", traj, "--db", db, "--id-prefix", "a."]) == 2
    _, err = _err_lines(capsys)
    assert err == [f"holon-ctx: error: {traj}: $.id: duplicate id: environment:a.e1 is already "
                   "in the ledger"]
    with resources.as_file(DEMO) as path:
        assert main(["import", str(path), "--db", db, "--id-prefix", "c."]) == 2
    _, err = _err_lines(capsys)
    assert err[-1].endswith("--id-prefix applies to transcripts; ledger JSONL keeps its own ids")
