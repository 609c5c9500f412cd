"""Hostile input: deep nesting, lone surrogates, endless and special files (issue 10, items 5, 6, 9).

Each is one located line, exit status 2, no traceback, and nothing written.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from ledger_procs import child_env

from holon_ctx.cli import inputs
from holon_ctx.cli.main import main
from holon_ctx.ledger.jsoninput import MAX_JSON_DEPTH

TURN = '{"v":1,"type":"turn","id":"t1","seq":1,"trigger":"timer"'


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


# -- item 5: nesting ----------------------------------------------------------------------------
DEEP = 5000


@pytest.mark.parametrize(("name", "content", "where"), [
    ("ledger.jsonl", f'{TURN},"x":{_nested(DEEP)}}}\n', f":1: JSON nested deeper than "
                                                          f"{MAX_JSON_DEPTH} levels (at byte "),
    ("openai.json", json.dumps({"messages": [{"role": "user", "content": "hi"}]})[:-2]
     + f',"extra":{_nested(DEEP)}}}]}}', f":1: JSON nested deeper than {MAX_JSON_DEPTH} levels"),
    ("anthropic.json", '{"system": "s",\n"messages": [{"role": "user", "content": [{"type": '
                       f'"text", "text": "hi", "x": {_nested(DEEP)}}}]}}]}}',
     f":2: JSON nested deeper than {MAX_JSON_DEPTH} levels"),
    ("bare.json", _nested(DEEP), f":1: JSON nested deeper than {MAX_JSON_DEPTH} levels"),
], ids=["ledger", "openai", "anthropic", "bare"])
@pytest.mark.parametrize("command", ["import", "project"])
def test_deep_nesting_is_one_located_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          name: str, content: str, where: str,
                                          command: str) -> None:
    src = tmp_path / name
    src.write_text(content, encoding="utf-8")
    argv = ([command, str(src), "--db", str(tmp_path / "x.db")] if command == "import"
            else [command, str(src), "--budget", "1000"])
    code, out, err = _run(argv, capsys)
    assert (code, out) == (2, "")
    assert err.startswith(f"holon-ctx: error: {src}{where}")
    assert err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]


def test_nesting_up_to_the_limit_is_accepted(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """A runtime's own field may nest (it is read past); exactly the limit is fine, brackets in strings
    do not count."""
    src = tmp_path / "ok.jsonl"
    src.write_text(f'{TURN},"x-x":{_nested(MAX_JSON_DEPTH - 1)},"label":"{"[" * 500}"}}\n',
                   encoding="utf-8")
    assert _run(["import", str(src), "--db", str(tmp_path / "x.db")], capsys)[0] == 0


# -- item 9: lone surrogates ---------------------------------------------------------------------
@pytest.mark.parametrize(("escape", "message"), [
    ("\\ud800", "invalid JSON: the escape \\ud800 is half of a UTF-16 surrogate pair (it must be "
                "followed by a low surrogate \\udc00-\\udfff); text must be valid Unicode"),
    ("\\uDBFFx", "invalid JSON: the escape \\uDBFF is half of a UTF-16 surrogate pair (it must be "
                 "followed by a low surrogate \\udc00-\\udfff); text must be valid Unicode"),
    ("\\udc00", "invalid JSON: the escape \\udc00 is the low half of a UTF-16 surrogate pair "
                "without its high half; text must be valid Unicode"),
])
def test_a_lone_surrogate_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                   escape: str, message: str) -> None:
    ledger = tmp_path / "l.jsonl"
    ledger.write_text(f'{TURN},"label":"ok 🚀"}}\n{TURN[:-1]}2","label":"a{escape}b"}}\n',
                      encoding="utf-8")
    chat = tmp_path / "c.json"
    chat.write_text(f'[{{"role": "user",\n "content": "a{escape}"}}]', encoding="utf-8")
    for src, line in ((ledger, 2), (chat, 2)):
        code, out, err = _run(["import", str(src), "--db", str(tmp_path / "x.db")], capsys)
        assert (code, out, err) == (2, "", f"holon-ctx: error: {src}:{line}: {message}\n")
    # A valid pair (\ud83d\ude80 is 🚀), and an escaped backslash before "ud800", are fine.
    fine = tmp_path / "fine.jsonl"
    fine.write_text(f'{TURN},"label":"\\ud83d\\ude80 \\\\ud800"}}\n', encoding="utf-8")
    assert _run(["import", str(fine), "--db", str(tmp_path / "y.db")], capsys)[0] == 0


# -- item 6: endless and special files -----------------------------------------------------------
def _limited() -> None:
    # Should the cap ever be lost, fail in this child instead of exhausting the machine.
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
@pytest.mark.parametrize("argv", [["import", "/dev/zero", "--db", "{db}"],
                                  ["import", "/dev/zero", "--db", "{db}", "--from", "openai"],
                                  ["project", "/dev/zero", "--budget", "100"],
                                  ["stats", "/dev/zero"]],
                         ids=["import", "import-openai", "project", "stats"])
def test_dev_zero_is_refused_at_once(tmp_path: Path, argv: list[str]) -> None:
    db = tmp_path / "z.db"
    done = subprocess.run([sys.executable, "-m", "holon_ctx",
                           *[a.replace("{db}", str(db)) for a in argv]],
                          capture_output=True, text=True, timeout=120, env=child_env(),
                          preexec_fn=_limited, check=False)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == ("holon-ctx: error: /dev/zero: not ledger JSONL, a JSON transcript or "
                           "a holon-ctx database: the input starts with byte 0x00\n")
    assert list(tmp_path.iterdir()) == []


def _feed(fifo: Path, data: bytes, *, endless: bool = False) -> threading.Thread:
    def run() -> None:
        try:
            with fifo.open("wb") as f:
                f.write(data)
                while endless:
                    f.write(data)
        except BrokenPipeError:
            pass  # the reader stopped, as it should

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_an_endless_pipe_stops_at_the_cap(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inputs, "MAX_STREAM_BYTES", 1 << 20)
    fifo = tmp_path / "endless"
    os.mkfifo(fifo)
    feeder = _feed(fifo, f"{TURN}}}\n".encode(), endless=True)
    code, out, err = _run(["import", str(fifo), "--db", str(tmp_path / "x.db")], capsys)
    feeder.join(timeout=30)
    assert (code, out) == (2, "")
    assert err == (f"holon-ctx: error: {fifo}: input larger than the 1048576 byte limit for a "
                   "pipe, FIFO or device (stopped reading there)\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["endless"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.parametrize("command", ["import", "project"])
def test_a_pipe_is_detected_and_read_whole(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           command: str) -> None:
    """Detection reads the head, the parser the whole: a pipe used to lose its head to the first."""
    fifo = tmp_path / "in"
    os.mkfifo(fifo)
    lines = "".join(f'{{"v":1,"type":"turn","id":"t{k}","seq":{k},"trigger":"timer"}}\n'
                    for k in range(3000))
    feeder = _feed(fifo, lines.encode())
    argv = ([command, str(fifo), "--db", str(tmp_path / "x.db")] if command == "import"
            else [command, str(fifo), "--budget", "2000", "--json"])
    code, out, err = _run(argv, capsys)
    feeder.join(timeout=30)
    assert code == 0, err
    if command == "import":
        assert out == f"imported 3000 records from {fifo} into {tmp_path / 'x.db'} (3000 turns, " \
                      "3000 records in the ledger)\n"
    else:
        assert json.loads(out)["current_turn"] == "turn:t2999"


def test_a_bad_line_in_a_pipe_is_named_by_the_pipe(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    if not hasattr(os, "mkfifo"):
        pytest.skip("needs FIFOs")
    fifo = tmp_path / "in.jsonl"
    os.mkfifo(fifo)
    feeder = _feed(fifo, f"{TURN}}}\n{TURN}\n".encode())
    code, _, err = _run(["import", str(fifo), "--db", str(tmp_path / "x.db")], capsys)
    feeder.join(timeout=30)
    assert code == 2
    assert err.startswith(f"holon-ctx: error: {fifo}:2: ")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.parametrize("opener", ["cli --db", "open_session"])
def test_a_fifo_given_as_the_database_is_not_read_for_a_transcript(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], opener: str) -> None:
    """A FIFO where the database belongs is refused as a database, its head never read: looking
    for a ledger or transcript in it read it (with no writer, that open blocked for ever)."""
    import holon_ctx

    fifo = tmp_path / "agent.db"
    os.mkfifo(fifo)
    # A writer with a transcript, so that a read of the FIFO's head finds one (and ends).
    feeder = _feed(fifo, b'[{"role": "user", "content": "hi"}]\n')
    if opener == "cli --db":
        code, out, err = _run(["stats", "--db", str(fifo)], capsys)
        assert (code, out) == (2, "")
        assert err.startswith(f"holon-ctx: error: {fifo}: ")
        assert err.count("\n") == 1
        assert "transcript" not in err
    else:
        with pytest.raises(holon_ctx.HolonCtxError) as raised:
            holon_ctx.open_session(fifo).close()
        assert "transcript" not in str(raised.value)
    feeder.join(timeout=30)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agent.db"]
