"""Bad input to demo, preview, explain, diff and stats: one clear line on stderr, exit status 2."""

from __future__ import annotations

import builtins
import errno
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from holon_ctx.cli.main import main

SMALL = Path(__file__).parent / "golden" / "small.jsonl"

#: Each command in the shape that takes a SOURCE, with everything but the source filled in.
COMMANDS: dict[str, list[str]] = {
    "preview": ["preview", "{src}", "--budget", "700"],
    "explain": ["explain", "{src}", "--budget", "700", "turn:t1"],
    "diff": ["diff", "{src}", "--budget", "700", "--budget", "2000"],
    "stats": ["stats", "{src}", "--budget", "700"],
}


def run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse reports bad flags this way
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def assert_one_line_error(code: int, err: str, *needles: str) -> None:
    assert code == 2, err
    assert err.count("\n") == 1, err
    assert err.startswith("holon-ctx: error: "), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err, err


def with_source(command: str, src: str) -> list[str]:
    return [a.replace("{src}", src) for a in COMMANDS[command]]


@pytest.fixture(scope="module")
def small_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("db") / "small.db"
    assert main(["import", str(SMALL), "--db", str(db)]) == 0
    return db


@pytest.mark.parametrize("command", COMMANDS)
def test_missing_file(capsys: pytest.CaptureFixture[str], tmp_path: Path, command: str) -> None:
    """A SOURCE that does not exist names the file."""
    missing = str(tmp_path / "nope.jsonl")
    code, out, err = run(capsys, with_source(command, missing))
    assert_one_line_error(code, err, missing, "no such file")
    assert out == ""


@pytest.mark.parametrize("command", COMMANDS)
def test_unreadable_source(capsys: pytest.CaptureFixture[str], tmp_path: Path, command: str) -> None:
    """A SOURCE that cannot be read (here a directory, which even root cannot read as a file)."""
    code, _, err = run(capsys, with_source(command, str(tmp_path)))
    assert_one_line_error(code, err, str(tmp_path), "cannot read")


def test_unreadable_file_mode(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A file without read permission names the file and says why. Root reads a file whatever
    its mode, so as root the refusal the kernel would give anyone else is made where files are
    opened (``open``), and the path is the same one a user meets."""
    src = tmp_path / "locked.jsonl"
    shutil.copy(SMALL, src)
    src.chmod(0)
    if os.geteuid() == 0:
        real_open = io.open

        def refuse(file: object, *args: object, **kwargs: object) -> object:
            if isinstance(file, str | os.PathLike) and os.fspath(file) == str(src):
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(src))
            return real_open(file, *args, **kwargs)  # type: ignore[call-overload]

        monkeypatch.setattr(io, "open", refuse)
        monkeypatch.setattr(builtins, "open", refuse)
    code, _, err = run(capsys, with_source("preview", str(src)))
    assert_one_line_error(code, err, str(src), os.strerror(errno.EACCES))


@pytest.mark.parametrize("command", COMMANDS)
def test_database_that_is_not_sqlite(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                     command: str) -> None:
    """--db on a file that is not a database says so."""
    bogus = tmp_path / "bogus.db"
    bogus.write_bytes(b"this is not a database\n" * 100)
    argv = with_source(command, "x")
    argv[1:2] = ["--db", str(bogus)]
    code, _, err = run(capsys, argv)
    assert_one_line_error(code, err, str(bogus), "not a usable holon-ctx database")


def corrupt_copy(db: Path, tmp_path: Path, first_page: int) -> Path:
    """A copy of a real ledger database with every page from ``first_page`` on damaged."""
    target = tmp_path / "corrupt.db"
    shutil.copy(db, target)
    data = bytearray(target.read_bytes())
    page = int.from_bytes(data[16:18], "big") or 65536
    for offset in range((first_page - 1) * page, len(data), 7):
        data[offset] = 0xA5
    target.write_bytes(bytes(data))
    return target


# Page 2 holds the schema tables (the damage shows when the store opens); from page 4 on the
# store opens fine and the damage shows mid-read, inside the command.
@pytest.mark.parametrize("first_page", [2, 4])
@pytest.mark.parametrize("command", COMMANDS)
def test_corrupt_database(capsys: pytest.CaptureFixture[str], tmp_path: Path, small_db: Path,
                          command: str, first_page: int) -> None:
    """A ledger database with damaged pages fails with one line naming it, wherever it shows."""
    bad = corrupt_copy(small_db, tmp_path, first_page)
    argv = with_source(command, "x")
    argv[1:2] = ["--db", str(bad)]
    code, out, err = run(capsys, argv)
    assert_one_line_error(code, err, str(bad), "not a usable holon-ctx database")
    assert out == ""


@pytest.mark.parametrize("budget", ["0", "-5", "abc", "1.5", ""])
@pytest.mark.parametrize("command", ["preview", "explain", "diff", "stats"])
def test_budget_not_a_positive_integer(capsys: pytest.CaptureFixture[str], command: str,
                                       budget: str) -> None:
    """--budget must be a positive integer; the message quotes what was given."""
    argv = with_source(command, str(SMALL))
    argv[argv.index("--budget") + 1] = budget
    code, _, err = run(capsys, argv)
    assert code == 2
    assert err.count("\n") == 1, err
    assert f"expected a positive integer, got {budget!r}" in err


def test_demo_budget_not_a_positive_integer(capsys: pytest.CaptureFixture[str]) -> None:
    """`demo --budget 0` is refused before anything is built."""
    code, _, err = run(capsys, ["demo", "--budget", "0"])
    assert code == 2
    assert "expected a positive integer, got '0'" in err


def test_budget_too_small_for_pinned_refs(capsys: pytest.CaptureFixture[str]) -> None:
    """A budget that cannot hold the pinned references says how many tokens they need."""
    code, _, err = run(capsys, ["preview", str(SMALL), "--budget", "20"])
    assert_one_line_error(code, err, "budget too small", "only 20 available")


@pytest.mark.parametrize("ref", ["turn:t999", "tool:nope", "episode:e1", "t999"])
def test_unknown_ref(capsys: pytest.CaptureFixture[str], ref: str) -> None:
    """explain of a ref the ledger does not hold names the ref."""
    code, out, err = run(capsys, ["explain", str(SMALL), "--budget", "700", ref])
    assert_one_line_error(code, err, "unknown ref")
    assert out == ""


@pytest.mark.parametrize("command", ["preview", "explain", "diff"])
def test_unknown_turn(capsys: pytest.CaptureFixture[str], command: str) -> None:
    """--at a turn the ledger does not hold names the turn."""
    argv = with_source(command, str(SMALL))
    argv += ["--at", "t999"] if command != "diff" else ["--at", "t1", "--at", "t999"]
    code, _, err = run(capsys, argv)
    assert_one_line_error(code, err, "unknown ref 'turn:t999'")


@pytest.mark.parametrize("command", COMMANDS)
def test_jsonl_line_that_does_not_parse(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                        command: str) -> None:
    """A broken JSONL line is reported with file and line number."""
    src = tmp_path / "broken.jsonl"
    lines = SMALL.read_text().splitlines()
    lines[2] = lines[2][:-7]  # cut the closing of the JSON object
    src.write_text("\n".join(lines) + "\n")
    code, _, err = run(capsys, with_source(command, str(src)))
    assert_one_line_error(code, err, f"{src}:3: ", "invalid JSON")


def test_explain_needs_one_ref(capsys: pytest.CaptureFixture[str]) -> None:
    """explain with no REF, or with extra operands, says what it expected."""
    code, _, err = run(capsys, ["explain", str(SMALL), "--budget", "700"])
    assert_one_line_error(code, err, "SOURCE (or --db PATH) and one REF")
    code, _, err = run(capsys, ["explain", str(SMALL), "--budget", "700", "turn:t1", "turn:t2"])
    assert_one_line_error(code, err, "one REF")


def test_diff_needs_two_projections(capsys: pytest.CaptureFixture[str]) -> None:
    """diff with one budget and at most one turn cannot compare anything."""
    code, _, err = run(capsys, ["diff", str(SMALL), "--budget", "700"])
    assert_one_line_error(code, err, "give --budget twice")


def test_errors_are_one_line_in_a_real_process(tmp_path: Path) -> None:
    """Run as a process, a corrupt database and a bad line still print one line and exit 2."""
    src = tmp_path / "broken.jsonl"
    src.write_text('{"v":1,"type":"turn","id":"t1","seq":1,"trigger":"operator_input"}\n{oops\n')
    for argv in (["preview", str(src), "--budget", "700"],
                 ["explain", "--db", str(tmp_path / "none.db"), "--budget", "700", "turn:t1"]):
        proc = subprocess.run([sys.executable, "-m", "holon_ctx", *argv], capture_output=True,
                              text=True, timeout=60, check=False)
        assert proc.returncode == 2
        assert proc.stderr.count("\n") == 1, proc.stderr
        assert "Traceback" not in proc.stderr
        assert proc.stdout == ""

