"""``holon-ctx import``, ``export``, ``stats``, ``--version`` and ``--help``: the happy paths and the pipe."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from holon_ctx import __version__
from holon_ctx.cli.main import main
from holon_ctx.ledger.sqlite import SqliteStore

LEDGER = (
    '{"v":1,"type":"turn","id":"t1","seq":1,"trigger":"operator_input","work_item_id":"wi1"}\n'
    '{"v":1,"type":"message","id":"m1","turn_id":"t1","role":"operator","text":"把 CI 修好 🚀"}\n'
    '{"v":1,"type":"tool","id":"x1","turn_id":"t1","tool_name":"shell","status":"ok",'
    '"exit_code":0,"output":"3 passed"}\n'
    '{"v":1,"type":"turn","id":"t2","seq":2,"trigger":"external_event","anchor_turn_id":"t1"}\n'
    '{"v":1,"type":"external_event","id":"e1","turn_id":"t2","source":"ci","text":"green"}\n'
)
MORE = (
    '{"v":1,"type":"turn","id":"t3","seq":3,"trigger":"provider_retry"}\n'
    '{"v":1,"type":"brief","id":"b1","turn_id":"t3","kind":"result","text":"CI is green."}\n'
)
CANONICAL = (
    '{"v":1,"type":"turn","id":"t1","origin":"operator","trust":"trusted_operator","seq":1,'
    '"trigger":"operator_input","work_item_id":"wi1"}\n'
    '{"v":1,"type":"message","id":"m1","origin":"operator","trust":"trusted_operator",'
    '"turn_id":"t1","role":"operator","text":"把 CI 修好 🚀"}\n'
    '{"v":1,"type":"tool","id":"x1","origin":"tool","trust":"untrusted_external","turn_id":"t1",'
    '"tool_name":"shell","status":"ok","exit_code":0,"output":"3 passed"}\n'
    '{"v":1,"type":"turn","id":"t2","origin":"external","trust":"untrusted_external","seq":2,'
    '"trigger":"external_event","anchor_turn_id":"t1"}\n'
    '{"v":1,"type":"external_event","id":"e1","origin":"external","trust":"untrusted_external",'
    '"turn_id":"t2","source":"ci","text":"green"}\n'
)
ROOT = Path(__file__).resolve().parent.parent


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def detected(path: Path) -> str:
    """The notice ``import`` writes to stderr when it recognises a ledger by itself."""
    return f"holon-ctx: read {path} as ledger (ledger JSONL by its name or first line)\n"


@pytest.fixture
def ledger_file(tmp_path: Path) -> Path:
    path = tmp_path / "day.jsonl"
    path.write_text(LEDGER, encoding="utf-8")
    return path


def test_import_reports_what_it_stored(
    ledger_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """import prints one summary line on stdout and stores every record."""
    db = tmp_path / "l.db"
    assert run(["import", str(ledger_file), "--db", str(db)], capsys) == (
        0, f"imported 5 records from {ledger_file} into {db} (2 turns, 5 records in the ledger)\n",
        detected(ledger_file))
    store = SqliteStore(db)
    assert [r.id for r in store.iter_records()] == ["t1", "m1", "x1", "t2", "e1"]
    store.close()


def test_second_import_appends(
    ledger_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Importing another file into the same database appends after what is there."""
    db = tmp_path / "l.db"
    more = tmp_path / "more.jsonl"
    more.write_text(MORE, encoding="utf-8")
    run(["import", str(ledger_file), "--db", str(db)], capsys)
    code, out, _ = run(["import", str(more), "--db", str(db)], capsys)
    assert (code, out) == (
        0, f"imported 2 records from {more} into {db} (3 turns, 7 records in the ledger)\n")


def test_export_to_stdout_and_file_is_canonical(
    ledger_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """export writes the canonical JSONL (provenance filled) to stdout or to -o FILE."""
    db = tmp_path / "l.db"
    run(["import", str(ledger_file), "--db", str(db)], capsys)
    code, out, err = run(["export", "--db", str(db)], capsys)
    assert (code, err) == (0, "")
    assert out == CANONICAL
    target = tmp_path / "out.jsonl"
    assert run(["export", "--db", str(db), "-o", str(target)], capsys) == (0, "", "")
    assert target.read_text(encoding="utf-8") == CANONICAL


def _table(text: str) -> dict[str, list[str]]:
    """The rows of rich tables as ``{first cell: other cells}``."""
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in re.split("[│┃]", line)[1:-1]]
        if cells:
            rows[cells[0]] = cells[1:]
    return rows


def test_stats_table_from_db_and_from_jsonl(
    ledger_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """stats shows turns, records and tokens by kind and by trust, for --db and for a JSONL file."""
    db = tmp_path / "l.db"
    run(["import", str(ledger_file), "--db", str(db)], capsys)
    code, from_db, err = run(["stats", "--db", str(db)], capsys)
    assert (code, err) == (0, "")
    code, from_file, err = run(["stats", str(ledger_file)], capsys)
    assert (code, err) == (0, "")
    assert from_db == from_file
    assert "ledger: 2 turns, 5 records" in " ".join(from_db.split())
    assert "\x1b" not in from_db
    rows = _table(from_db)
    assert rows["kind"] == ["records", "tokens"]
    assert rows["turn"] == ["2", "0"]
    assert rows["message"] == ["1", "10"]
    assert rows["tool"] == ["1", "3"]
    assert rows["external_event"] == ["1", "2"]
    assert rows["trusted_operator"] == ["10"]
    assert rows["untrusted_external"] == ["5"]


def test_version_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    """--version prints the version; --help lists the ledger commands; both exit 0."""
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out == f"holon-ctx {__version__}\n"
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    help_text = capsys.readouterr().out
    assert help_text.startswith("usage: holon-ctx [-h] [--version] COMMAND ...\n")
    for command in ("import", "export", "stats"):
        assert f"\n    {command} " in help_text


def test_no_command_prints_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    """Without a command, holon-ctx prints its help and exits with status 2."""
    code, out, err = run([], capsys)
    assert (code, err) == (2, "")
    assert out.startswith("usage: holon-ctx")


@pytest.mark.parametrize(("argv", "message"), [
    (["import", "{tmp}/nope.jsonl", "--db", "{tmp}/l.db"], "{tmp}/nope.jsonl: no such file"),
    (["export", "--db", "{tmp}/nope.db"], "{tmp}/nope.db: no such database file"),
    (["stats"], "give exactly one SOURCE: a ledger JSONL file or --db PATH"),
    (["stats", "{tmp}/day.jsonl", "--db", "{tmp}/l.db"],
     "give exactly one SOURCE: a ledger JSONL file or --db PATH"),
    (["stats", "--db", "{tmp}/foreign.db"],
     "{tmp}/foreign.db: an SQLite database, but not a holon-ctx ledger"),
    (["import", "{tmp}/day.jsonl", "--db", "{tmp}/foreign.db"],
     "{tmp}/foreign.db: an SQLite database, but not a holon-ctx ledger"),
], ids=["import-missing-file", "export-missing-db", "stats-no-source", "stats-two-sources",
        "stats-foreign-db", "import-into-foreign-db"])
def test_usage_errors_are_one_line(
    argv: list[str], message: str, ledger_file: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Wrong paths and sources exit 2 with one 'holon-ctx: error:' line and no traceback."""
    with sqlite3.connect(tmp_path / "foreign.db") as db:
        db.execute("CREATE TABLE notes (body TEXT)")
    tmp = str(tmp_path)
    code, out, err = run([a.format(tmp=tmp) for a in argv], capsys)
    assert (code, out) == (2, "")
    assert err == f"holon-ctx: error: {message.format(tmp=tmp)}\n"


def _env_without_colour_overrides() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in {"FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"}}
    env["TERM"] = "xterm-256color"
    env["COLORTERM"] = "truecolor"
    return env


def test_python_m_holon_ctx_help_matches_the_console_script(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``python -m holon_ctx --help`` runs the same parser as the console script."""
    proc = subprocess.run([sys.executable, "-m", "holon_ctx", "--help"], capture_output=True,
                          text=True, cwd=ROOT, env=_env_without_colour_overrides(), check=False)
    with pytest.raises(SystemExit):
        main(["--help"])
    assert (proc.returncode, proc.stderr) == (0, "")
    assert " ".join(proc.stdout.split()) == " ".join(capsys.readouterr().out.split())


def test_stats_in_a_pipe_has_no_escape_codes(ledger_file: Path, tmp_path: Path) -> None:
    """In a pipe, even with a colour-capable TERM, stats writes plain text with no ANSI codes."""
    db = tmp_path / "l.db"
    env = _env_without_colour_overrides()
    subprocess.run([sys.executable, "-m", "holon_ctx", "import", str(ledger_file), "--db", str(db)],
                   capture_output=True, cwd=ROOT, env=env, check=True)
    proc = subprocess.run([sys.executable, "-m", "holon_ctx", "stats", "--db", str(db)],
                          capture_output=True, cwd=ROOT, env=env, check=False)
    assert (proc.returncode, proc.stderr) == (0, b"")
    assert b"\x1b" not in proc.stdout
    assert _table(proc.stdout.decode())["message"] == ["1", "10"]
