"""A JSON transcript's error names its line: ``FILE:LINE: $.path: problem``, like ledger JSONL's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from test_errors_say_what_to_do import _broken_transcripts
from test_transcripts import located

import holon_ctx
from holon_ctx.cli.main import main
from holon_ctx.errors import InputError, LedgerFormatError
from holon_ctx.ledger import transcripts
from holon_ctx.ledger.transcripts import read_transcript

ROOT = Path(__file__).resolve().parents[1]
#: The brief's example: the bad value is on line 3.
BAD_CONTENT = b'[\n {"role":"user","content":"hi"},\n {"role":"assistant","content":5}\n]\n'


def test_the_cli_names_file_line_and_path_and_exits_2(tmp_path: Path) -> None:
    """The real command: exit status 2, one line on stderr, no traceback, no database made."""
    src = tmp_path / "t.json"
    src.write_bytes(BAD_CONTENT)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "holon_ctx", "import", "t.json", "--db", "t.db"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == ("holon-ctx: error: t.json:3: $[1].content: expected a string or an "
                           "array, got integer\n")
    assert not (tmp_path / "t.db").exists()


def test_the_library_error_carries_the_line(tmp_path: Path) -> None:
    """read_transcript and Session.import_history raise LedgerFormatError with .line set."""
    src = tmp_path / "t.json"
    src.write_bytes(BAD_CONTENT)
    with pytest.raises(LedgerFormatError) as caught:
        read_transcript(src)
    error = caught.value
    assert (error.source, error.line, error.path) == (str(src), 3, "$[1].content")
    assert error.message == "expected a string or an array, got integer"
    with holon_ctx.open_session(":memory:") as session:
        with pytest.raises(LedgerFormatError) as caught:
            session.import_history(src)
        assert (caught.value.line, caught.value.path) == (3, "$[1].content")
        assert session.store.end_pos() == 0


def _line(tmp_path: Path, raw: bytes, fmt: str = "auto", name: str = "t.json") -> tuple[
        int | None, str | None]:
    src = tmp_path / name
    src.write_bytes(raw)
    with pytest.raises(LedgerFormatError) as caught:
        read_transcript(src, fmt)
    assert str(caught.value).startswith(f"{src}:{caught.value.line}: " if caught.value.line
                                        else f"{src}: ")
    return caught.value.line, caught.value.path


def _pretty(data: Any) -> bytes:
    return json.dumps(data, indent=2).encode()


SWE_BAD = {"trajectory_format": "mini-swe-agent-1", "messages": [
    {"role": "system", "content": "sys"},
    {"role": "user", "content": "<pr_description>\nfix it\n</pr_description>"},
    {"role": "assistant", "content": "THOUGHT\n```bash\nls\n```"},
    {"role": "user", "content": "<returncode>0</returncode>\n<output>\n</output>"},
    {"role": "tool", "content": "x"}]}


@pytest.mark.parametrize(("raw", "fmt", "name", "where"), [
    # {"messages": [...]}, pretty: the second message's content is line 9
    (_pretty({"messages": [{"role": "user", "content": "hi"},
                           {"role": "assistant", "content": 5}]}), "openai", "t.json",
     (9, "$.messages[1].content")),
    # anthropic content blocks: the block without a tool_use_id, on its own line
    (b'{"system": "s", "messages": [\n{"role": "user", "content": [\n'
     b'  {"type": "text", "text": "a"},\n  {"type": "tool_result"}]}]}', "anthropic", "t.json",
     (4, "$.messages[0].content[1].tool_use_id")),
    # swe-traj: the fifth message's role
    (_pretty(SWE_BAD), "auto", "run.traj.json", (21, "$.messages[4].role")),
    # the whole document on one line
    (json.dumps({"messages": [{"role": "user", "content": "hi"}, {"role": "tool"}]}).encode(),
     "openai", "t.json", (1, "$.messages[1].tool_call_id")),
    # CRLF line ends count as one line each
    (BAD_CONTENT.replace(b"\n", b"\r\n"), "openai", "t.json", (3, "$[1].content")),
    # a key spelt with escapes: con\u0074ent is content
    (b'[{"role": "user",\n  "con\\u0074ent": 7}]', "openai", "t.json", (2, "$[0].content")),
    # a duplicate key: the decoder keeps the last, and so does the line
    (b'[{"role": "user", "content": [],\n  "content": 7}]', "openai", "t.json",
     (2, "$[0].content")),
    # a missing field: the object that lacks it
    (b'[\n {"role": "user", "content": "hi"},\n\n {"content": "?"}]', "openai", "t.json",
     (4, "$[1].role")),
    # $ (format not detectable): where the document starts
    (b'\n\n{"chat": []}', "auto", "t.json", (3, "$")),
], ids=["messages-object", "anthropic-block", "swe-traj", "one-line", "crlf", "escaped-key",
        "duplicate-key", "missing-field", "document"])
def test_each_shape_names_the_line_of_its_value(tmp_path: Path, raw: bytes, fmt: str, name: str,
                                                where: tuple[int, str]) -> None:
    """Bare lists, objects, content blocks, trajectories; one-line, CRLF, escaped and
    duplicate keys, a missing field and the document itself."""
    assert _line(tmp_path, raw, fmt, name) == where


def test_a_bom_is_refused_at_line_1(tmp_path: Path) -> None:
    """The reader refuses a byte-order mark (line 1) before any path is looked up."""
    assert _line(tmp_path, b"\xef\xbb\xbf" + BAD_CONTENT, "openai") == (1, None)


def test_a_path_the_text_does_not_have_keeps_the_error_as_it_was(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """If the path cannot be followed in the text, the error is the one raised: no line."""
    def reader(data: Any, builder: Any) -> list[Any]:
        raise LedgerFormatError("no such thing", source=builder.source, path="$[7].nowhere")

    monkeypatch.setitem(transcripts._READERS, transcripts.TranscriptFormat.OPENAI, reader)
    src = tmp_path / "t.json"
    src.write_bytes(BAD_CONTENT)
    with pytest.raises(LedgerFormatError) as caught:
        read_transcript(src, "openai")
    assert (caught.value.line, str(caught.value)) == (None, f"{src}: $[7].nowhere: no such thing")


def test_an_in_memory_history_has_no_line(capsys: pytest.CaptureFixture[str]) -> None:
    """A history given as a Python list has no text: the error names the path only."""
    with holon_ctx.open_session(":memory:") as session, pytest.raises(InputError) as caught:
        session.import_history([{"role": "user", "content": "hi"},
                                {"role": "assistant", "content": 5}])
    assert str(caught.value) == ("import_history: $[1].content: expected a string or an array, "
                                 "got integer")


def test_the_cli_line_for_a_source_read_into_memory(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """A transcript given as SOURCE (stats, project) is read the same way and names its line."""
    src = tmp_path / "t.json"
    src.write_bytes(BAD_CONTENT)
    assert main(["stats", str(src), "--from", "openai"]) == 2
    assert capsys.readouterr().err == (f"holon-ctx: error: {src}:3: $[1].content: expected a "
                                       "string or an array, got integer\n")


@settings(max_examples=60, deadline=None)
@given(_broken_transcripts())
def test_every_reader_error_names_the_line_of_its_path(case: tuple[str, Any]) -> None:
    """Whichever field of whichever message is junk, in a bare list or under ``messages``, the
    error names a line, and it is the line of the path's value (its object's, when missing)."""
    fmt, data = case
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "t.json"
        src.write_text(json.dumps(data, indent=1), encoding="utf-8")
        error: LedgerFormatError | None = None
        try:
            read_transcript(src, fmt)
        except LedgerFormatError as exc:
            error = exc
    if error is None:
        return  # the junk happened to be acceptable
    assert error.path is not None
    assert error.line == located(data, error.path), (error, data)
