"""Export → import → export is byte-identical, on both stores, for generated ledgers and streams."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from strategies import ledgers, opens_turn, plain_streams, to_jsonl

from holon_ctx.ledger.codec import provenance_defaults
from holon_ctx.ledger.importer import export_jsonl, import_jsonl
from holon_ctx.ledger.memory import MemoryStore
from holon_ctx.ledger.records import ExternalEvent, Message, Record, TaskResult, Turn
from holon_ctx.ledger.sqlite import SqliteStore
from holon_ctx.ledger.store import LedgerStore

STORES: dict[str, Callable[[], LedgerStore]] = {
    "memory": MemoryStore,
    "sqlite": lambda: SqliteStore(":memory:"),
}


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory shared by every example of a module (Hypothesis reruns one test many times)."""
    return tmp_path_factory.mktemp("roundtrip")


def _export(store: LedgerStore) -> bytes:
    out = io.BytesIO()
    export_jsonl(store, out)
    store.close()
    return out.getvalue()


def _import(data: bytes, path: Path, make: Callable[[], LedgerStore]) -> LedgerStore:
    path.write_bytes(data)
    store = make()
    import_jsonl(path, store)
    return store


def _filled(record: Record) -> Record:
    origin, trust = provenance_defaults(record)
    return msgspec.structs.replace(record, origin=origin, trust=trust)


@settings(max_examples=60)
@given(records=ledgers(1, 10))
def test_export_import_export_is_byte_identical(records: list[Record], scratch: Path) -> None:
    """Importing a generated ledger and exporting it gives the same bytes from either store, twice."""
    first = _import(to_jsonl(records), scratch / "in.jsonl", STORES["memory"])
    exported = _export(first)
    for make in STORES.values():
        again = _export(_import(exported, scratch / "again.jsonl", make))
        assert again == exported


@settings(max_examples=40)
@given(records=ledgers(1, 8))
def test_export_keeps_every_field_and_fills_provenance(records: list[Record], scratch: Path) -> None:
    """The export holds exactly the appended records, each with its origin and trust stated."""
    for make in STORES.values():
        exported = _export(_import(to_jsonl(records), scratch / "in.jsonl", make))
        decoded = [msgspec.json.decode(raw, type=Record) for raw in exported.splitlines()]
        assert decoded == [_filled(r) for r in records]


@settings(max_examples=60)
@given(stream=plain_streams(1, 16))
def test_plain_stream_imports_with_derived_turns(stream: list[Record], scratch: Path) -> None:
    """A stream without turn ids gets one turn per opening event, and then round-trips exactly."""
    exported = b""
    for make in STORES.values():
        store = _import(to_jsonl(stream), scratch / "plain.jsonl", make)
        records = list(store.iter_records())
        turns = [r for r in records if isinstance(r, Turn)]
        openers = [r for r in stream if opens_turn(r)]
        assert [t.id for t in turns] == [f"t.{r.id}" for r in openers]
        assert [t.seq for t in turns] == list(range(len(openers)))
        assert [t.trigger for t in turns] == [
            {Message: "operator_input", ExternalEvent: "external_event",
             TaskResult: "task_result"}[type(r)] for r in openers]
        # Each record attaches to the turn its latest opener derived, or opens its own.
        owner = None
        for rec in stream:
            if opens_turn(rec):
                owner = f"t.{rec.id}"
            stored = store.get(f"{type(rec).__struct_config__.tag}:{rec.id}")
            assert stored is not None
            assert getattr(stored.record, "turn_id", None) == (None if _unowned(rec) else owner)
        assert len(records) == len(stream) + len(openers)
        again = _export(store)
        assert exported in (b"", again)
        exported = again
    for make in STORES.values():
        assert _export(_import(exported, scratch / "again.jsonl", make)) == exported


def _unowned(record: Record) -> bool:
    """Work items, waits, environment and pins without turn_id stay outside any turn."""
    return type(record).__struct_config__.tag in {"work_item", "wait", "environment", "pin"}


def test_canonical_line_shape(tmp_path: Path) -> None:
    """Export writes v first, then type, then fields in declaration order, defaults left out."""
    src = tmp_path / "in.jsonl"
    src.write_text(
        '{"trigger":"operator_input","seq":3,"id":"t1","type":"turn","v":1}\n'
        '{"text":"你好 👋","role":"operator","turn_id":"t1","id":"m1","type":"message"}\n',
        encoding="utf-8")
    assert _export(_import(src.read_bytes(), src, MemoryStore)) == (
        b'{"v":1,"type":"turn","id":"t1","origin":"operator","trust":"trusted_operator",'
        b'"seq":3,"trigger":"operator_input"}\n'
        b'{"v":1,"type":"message","id":"m1","origin":"operator","trust":"trusted_operator",'
        b'"turn_id":"t1","role":"operator","text":"\xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\x91\x8b"}\n')


def test_unknown_fields_are_read_past_and_not_preserved(tmp_path: Path) -> None:
    """Forward compatibility: a line with fields its kind does not have (a runtime's own
    ``x-…``, any JSON, or a later release's ``cost``, ``priority``; in a todo too) imports with
    every known field as written; the export drops the unknown ones. (A field that looks like a
    misspelt one is refused: tests/test_codec.py.)"""
    src = tmp_path / "in.jsonl"
    unknown = (b'{"v":1,"type":"turn","id":"t1","seq":1,"trigger":"timer","x-priority":"high",'
               b'"cost":3,"x-runtime":{"host":"a"},"label":"tick"}\n'
               b'{"type":"work_item","id":"w1","work_item_id":"wi","turn_id":"t1",'
               b'"objective":"ship","todos":[{"text":"a","owner":"sam"},{"text":"b","done":true}],'
               b'"priority":2}\n')
    known = (b'{"type":"turn","id":"t1","seq":1,"trigger":"timer","label":"tick"}\n'
             b'{"type":"work_item","id":"w1","work_item_id":"wi","turn_id":"t1",'
             b'"objective":"ship","todos":[{"text":"a"},{"text":"b","done":true}]}\n')
    exported = _export(_import(unknown, src, MemoryStore))
    assert exported == _export(_import(known, src, MemoryStore))
    assert b'"label":"tick"' in exported
    assert b'"done":true' in exported


def test_missing_version_reads_as_v1(tmp_path: Path) -> None:
    """A line without ``v`` is read as version 1, and the export states ``"v":1``."""
    src = tmp_path / "in.jsonl"
    src.write_bytes(b'{"type":"turn","id":"t1","seq":1,"trigger":"x-deploy"}\r\n')
    assert _export(_import(src.read_bytes(), src, MemoryStore)) == (
        b'{"v":1,"type":"turn","id":"t1","origin":"runtime","trust":"runtime_fact",'
        b'"seq":1,"trigger":"x-deploy"}\n')
