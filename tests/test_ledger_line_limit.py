"""A ledger line holds at most MAX_LINE_BYTES, on the append path as on the JSONL reader.

The reader refuses a longer line, so a record appended through a store or a session helper that
encoded longer would make a ledger whose export does not import again. The append refuses it, with
the longest text field named, before counting its tokens; a record just under the limit is stored
and round-trips. The session helpers give a runtime the way out the error names: ``output_ref``.
"""

from __future__ import annotations

import io
from pathlib import Path

import msgspec
import pytest

import holon_ctx
from holon_ctx.errors import LedgerFormatError
from holon_ctx.ledger.codec import MAX_LINE_BYTES, encode_record, provenance_defaults
from holon_ctx.ledger.importer import export_jsonl, import_jsonl
from holon_ctx.ledger.memory import MemoryStore
from holon_ctx.ledger.records import Message, MessageRole, Tool, ToolStatus, Turn
from holon_ctx.ledger.sqlite import SqliteStore
from holon_ctx.ledger.store import LedgerStore

TURN = Turn(id="t1", seq=1, trigger="operator_input")


def _tool(output: str) -> Tool:
    return Tool(id="x1", turn_id="t1", tool_name="sh", status=ToolStatus.OK, output=output)


def _stored_size(output: str) -> int:
    """The line the store writes for ``_tool(output)``: provenance filled in, newline dropped."""
    record = _tool(output)
    origin, trust = provenance_defaults(record)
    return len(encode_record(msgspec.structs.replace(record, origin=origin, trust=trust))) - 1


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> LedgerStore:
    return MemoryStore() if request.param == "memory" else SqliteStore(tmp_path / "l.db")


def test_a_record_over_the_line_limit_is_refused_naming_its_field(store: LedgerStore) -> None:
    """One byte over the limit: the batch is refused whole, the output field named."""
    filler = "y" * MAX_LINE_BYTES
    over = filler[: len(filler) - (_stored_size(filler) - MAX_LINE_BYTES) + 1]
    assert _stored_size(over) == MAX_LINE_BYTES + 1
    with pytest.raises(LedgerFormatError) as caught:
        store.append([TURN, _tool(over)])
    assert caught.value.path == "$.output"
    assert f"over the {MAX_LINE_BYTES} byte limit" in str(caught.value)
    assert store.end_pos() == 0


def test_a_record_at_the_line_limit_is_stored_and_round_trips(store: LedgerStore,
                                                              tmp_path: Path) -> None:
    """Exactly at the limit: stored, exported, and imported again into a new ledger."""
    filler = "y" * MAX_LINE_BYTES
    fits = filler[: len(filler) - (_stored_size(filler) - MAX_LINE_BYTES)]
    assert _stored_size(fits) == MAX_LINE_BYTES
    assert store.append([TURN, _tool(fits)]) == 2
    exported = io.BytesIO()
    export_jsonl(store, exported)
    path = tmp_path / "out.jsonl"
    path.write_bytes(exported.getvalue())
    assert import_jsonl(path, MemoryStore()) == 2


def test_escaped_characters_count_as_their_escapes(store: LedgerStore) -> None:
    """A NUL is six bytes on the line (``\\u0000``): a text of few characters can be over."""
    text = "\x00" * (MAX_LINE_BYTES // 6 + 1)
    with pytest.raises(LedgerFormatError) as caught:
        store.append([TURN, Message(id="m1", turn_id="t1", role=MessageRole.OPERATOR, text=text)])
    assert caught.value.path == "$.text"


def test_the_session_helper_names_its_argument_and_appends_nothing() -> None:
    """tool_result with an oversized output: one InputError naming ``output``; the call still
    waits, and a bounded excerpt with ``output_ref`` is stored and projected."""
    session = holon_ctx.open_session(":memory:")
    session.operator_message("Run the build.")
    session.assistant_message("", tool_calls=[holon_ctx.ToolCall("c1", "make", "{}")])
    end = session.store.end_pos()
    with pytest.raises(holon_ctx.InputError) as caught:
        session.tool_result("c1", "y" * (MAX_LINE_BYTES + 1))
    assert str(caught.value).startswith("tool_result: output: the record's ledger line would be")
    assert session.store.end_pos() == end
    ref = session.tool_result("c1", "y" * 1000, output_ref="s3://logs/build-1.txt")
    stored = session.store.get(ref)
    assert stored is not None
    assert isinstance(stored.record, Tool)
    assert stored.record.output_ref == "s3://logs/build-1.txt"


def test_tool_run_takes_output_ref_and_mapping_arguments() -> None:
    """tool_run accepts arguments as a mapping, as ToolCall does (canonical JSON), and
    ``output_ref``; an empty ``output_ref`` is refused by name."""
    session = holon_ctx.open_session(":memory:")
    session.operator_message("Check the disk.")
    ref = session.tool_run("df", {"path": "/", "human": True}, "93% used",
                           output_ref="/var/log/df.txt")
    stored = session.store.get(ref)
    assert stored is not None
    assert isinstance(stored.record, Tool)
    assert stored.record.args_preview == '{"human": true, "path": "/"}'
    assert stored.record.output_ref == "/var/log/df.txt"
    with pytest.raises(holon_ctx.InputError) as empty:
        session.tool_run("df", "/", "x", output_ref="")
    assert str(empty.value) == "tool_run: output_ref: must not be empty"
    with pytest.raises(holon_ctx.InputError) as number:
        session.tool_run("df", 42, "x")
    assert str(number.value) == "tool_run: arguments: expected a JSON string or a mapping, got int"


def test_an_imported_line_is_measured_as_it_would_be_exported(tmp_path: Path) -> None:
    """A JSONL line within the reader's limit that leaves out origin and trust, whose exported
    form (with them) would be over, is refused naming the file, the line and the field."""
    head = b'{"type":"message","id":"m1","turn_id":"t1","role":"assistant","text":"'
    body = head + b"y" * (MAX_LINE_BYTES - len(head) - 2) + b'"}'
    assert len(body) == MAX_LINE_BYTES
    src = tmp_path / "near.jsonl"
    src.write_bytes(b'{"type":"turn","id":"t1","seq":1,"trigger":"operator_input"}\n' + body + b"\n")
    store = MemoryStore()
    with pytest.raises(LedgerFormatError) as caught:
        import_jsonl(src, store)
    assert str(caught.value).startswith(f"{src}:2: $.text: the record's ledger line would be ")
    assert store.end_pos() == 0
