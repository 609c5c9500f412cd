"""JSON input cut short (a crash mid-write, a partial copy) is one line naming file, line and field.

The decoder says only "Input data was truncated", with no offset: every reader used to print
``x.json: invalid JSON: Input data was truncated``, without the line the standard asks for.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from holon_ctx.cli.main import main
from holon_ctx.ledger.jsoninput import CUT_SHORT
from holon_ctx.ledger.jsonlocate import open_path

MARK = "\u2063cut-here"

TRANSCRIPT: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a careful release agent."},
    {"role": "user", "content": "Tag v1.2 and tell me the CI state."},
    {"role": "assistant", "content": "Checking the pipeline."},
    {"role": "user", "content": f"{MARK} and then the rest of a long message"},
    {"role": "assistant", "content": "Done."},
]

READERS = [
    ["import", "{src}", "--db", "{tmp}/out.db"],
    ["stats", "{src}"],
    ["preview", "{src}", "--budget", "4000", "--plain"],
    ["project", "{src}", "--budget", "4000"],
    ["replay", "{src}", "--budget", "4000"],
    ["diff", "{src}", "--budget", "4000", "--budget", "3000"],
]


def _cut(text: str, at: int) -> tuple[bytes, int]:
    """``text`` cut at character ``at``, and the line of the last character kept."""
    kept = text[:at].encode("utf-8")
    return kept, kept.rstrip().count(b"\n") + 1


@pytest.mark.parametrize("argv", READERS, ids=[a[0] for a in READERS])
def test_a_transcript_cut_inside_a_value_names_its_line_and_field(
        argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every command that reads a transcript names the line where the file ends and the field
    left open there; exit 2, nothing on stdout, no database left behind."""
    text = json.dumps(TRANSCRIPT, indent=2, ensure_ascii=False)
    raw, line = _cut(text, text.index(MARK) + 4)
    src = tmp_path / "chat.json"
    src.write_bytes(raw)
    code = main([a.format(src=src, tmp=tmp_path) for a in argv])
    out = capsys.readouterr()
    assert (code, out.out) == (2, "")
    assert out.err == f"holon-ctx: error: {src}:{line}: $[3].content: {CUT_SHORT}\n"
    assert not (tmp_path / "out.db").exists()


@pytest.mark.parametrize("after", [b"\n", b"\r\n", b"\n\n"])
def test_a_transcript_cut_inside_a_string_then_a_newline_is_named_cut_short(
        after: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A file cut inside a string and then ended with a newline (an editor saving it, a copy
    that adds one) is the same cut: it was 'invalid JSON: JSON is malformed: invalid character
    (byte N)', neither field nor cut said, as a ledger line's was before."""
    text = json.dumps(TRANSCRIPT, indent=2, ensure_ascii=False)
    raw, line = _cut(text, text.index(MARK) + 4)
    src = tmp_path / "chat.json"
    src.write_bytes(raw + after)
    assert main(["stats", str(src)]) == 2
    assert capsys.readouterr().err == f"holon-ctx: error: {src}:{line}: $[3].content: {CUT_SHORT}\n"


def test_a_transcript_cut_between_messages_names_the_last_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Cut between two elements, no field is open: the line is where the text ends."""
    text = json.dumps(TRANSCRIPT, indent=2, ensure_ascii=False)
    raw, line = _cut(text.rstrip(), text.rindex("{"))  # after the comma that ends message 3
    src = tmp_path / "chat.json"
    src.write_bytes(raw + b"\n\n")  # trailing blank lines do not move the line named
    assert main(["stats", str(src)]) == 2
    assert capsys.readouterr().err == f"holon-ctx: error: {src}:{line}: {CUT_SHORT}\n"


def test_a_ledger_line_cut_mid_file_names_the_open_field(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A JSONL line cut inside its text (a later line follows) was "invalid character (byte N)",
    the newline that ended it; it is now named as cut short, with the field left open."""
    src = tmp_path / "ledger.jsonl"
    src.write_text(
        '{"type":"turn","id":"t1","seq":1,"trigger":"operator_input"}\n'
        '{"type":"message","id":"m1","turn_id":"t1","role":"operator","text":"deploy the\n'
        '{"type":"turn","id":"t2","seq":2,"trigger":"timer"}\n', encoding="utf-8")
    assert main(["stats", str(src)]) == 2
    assert capsys.readouterr().err == f"holon-ctx: error: {src}:2: $.text: {CUT_SHORT}\n"


def test_a_ledger_cut_in_its_last_line_names_the_open_field(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "ledger.jsonl"
    src.write_text(
        '{"type":"turn","id":"t1","seq":1,"trigger":"operator_input"}\n'
        '{"type":"message","id":"m1","turn_id":"t1","role":"operator","text":"deploy the',
        encoding="utf-8")
    assert main(["stats", str(src)]) == 2
    assert capsys.readouterr().err == (
        f"holon-ctx: error: {src}:2: $.text: truncated last line (no newline at end and not "
        "complete JSON)\n")


def test_a_bad_price_table_names_its_line(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """``replay --price FILE`` said ``not a JSON price table (… line 3 column 1 (char 34))``:
    the decoder's words, not ``file:line``."""
    ledger = tmp_path / "l.jsonl"
    ledger.write_text('{"type":"turn","id":"t1","seq":1,"trigger":"operator_input"}\n',
                      encoding="utf-8")
    prices = tmp_path / "p.json"
    prices.write_text('{"name": "x",\n "cache_read": 0.1,\n', encoding="utf-8")
    assert main(["replay", str(ledger), "--budget", "4000", "--price", str(prices)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"holon-ctx: error: {prices}:3: not a JSON price table: ")
    assert err.count("\n") == 1


# -- open_path on any document: the marker is put at a known path, the text cut inside it --------

_SCALARS = st.none() | st.booleans() | st.integers() | st.text(max_size=8)
_FILLER = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=3)
                       | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=8)


@st.composite
def _marked(draw: st.DrawFn) -> tuple[Any, str]:
    """A JSON value holding the one string that starts with MARK, and the JSON path to it."""
    value: Any = MARK + draw(st.text(max_size=5))
    steps: list[str] = []
    for _ in range(draw(st.integers(0, 5))):
        if draw(st.booleans()):
            before = draw(st.lists(_FILLER, max_size=3))
            after = draw(st.lists(_FILLER, max_size=3))
            value = [*before, value, *after]
            steps.append(f"[{len(before)}]")
        else:
            key = draw(st.text(max_size=6).filter(lambda k: "." not in k and "[" not in k))
            others = draw(st.dictionaries(st.text(max_size=5).filter(lambda k, key=key: k != key),
                                          _FILLER, max_size=3))
            items = list(others.items())
            at = draw(st.integers(0, len(items)))
            value = dict([*items[:at], (key, value), *items[at:]])
            steps.append(f".{key}")
    return value, "$" + "".join(reversed(steps))


@settings(max_examples=200, deadline=None)
@given(_marked(), st.sampled_from([None, 1, 2]), st.booleans(), st.integers(1, 9))
def test_open_path_is_the_path_of_the_value_the_cut_falls_in(
        marked: tuple[Any, str], indent: int | None, ascii_only: bool, into: int) -> None:
    document, path = marked
    text = json.dumps(document, indent=indent, ensure_ascii=ascii_only)
    start = text.index(json.dumps(MARK, ensure_ascii=ascii_only)[:-1])
    assert open_path(text[:start + into].encode("utf-8")) == path


def test_import_md_quotes_the_cut_transcript_case(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """docs/import.md shows the error of the first test's file, as printed for ``cut.json``."""
    text = json.dumps(TRANSCRIPT, indent=2, ensure_ascii=False)
    raw, _ = _cut(text, text.index(MARK) + 4)
    src = tmp_path / "cut.json"
    src.write_bytes(raw)
    assert main(["stats", str(src)]) == 2
    printed = capsys.readouterr().err.replace(str(src), "cut.json")
    doc = (Path(__file__).resolve().parents[1] / "docs" / "import.md").read_text("utf-8")
    assert f"\n{printed}" in doc
