"""docs/ledger-format.md stays true: its examples import as described and its tables match the code."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from holon_ctx.cli.main import main
from holon_ctx.ledger.codec import _ALLOWED_TRUST, _ORIGIN_TRUST, _TRIGGER_ORIGIN
from holon_ctx.ledger.importer import export_jsonl, import_jsonl
from holon_ctx.ledger.memory import MemoryStore
from holon_ctx.ledger.records import KNOWN_TRIGGERS, Record, RecordBase, Turn, WaitStatus, WorkItemStatus
from holon_ctx.ledger.sqlite import SqliteStore

DOC = Path(__file__).resolve().parent.parent / "docs" / "ledger-format.md"
TEXT = DOC.read_text(encoding="utf-8")


def section(heading: str) -> str:
    """The markdown between ``heading`` and the next heading of the same or a higher level."""
    level = heading.split(" ", 1)[0]
    start = TEXT.index(f"\n{heading}\n")
    rest = TEXT[start + len(heading) + 2:]
    end = re.search(rf"^#{{1,{len(level)}}} ", rest, re.MULTILINE)
    return rest[: end.start() if end else len(rest)]


def jsonl_block(text: str) -> str:
    """The one fenced ```jsonl block in ``text``."""
    blocks = re.findall(r"^```jsonl\n(.*?)^```$", text, re.MULTILINE | re.DOTALL)
    assert len(blocks) == 1
    return str(blocks[0])


def table_rows(text: str) -> list[list[str]]:
    """The body rows of the first markdown table in ``text``, cells stripped of backticks."""
    lines = [ln for ln in text.splitlines() if ln.startswith("|")]
    return [[c.strip().strip("`") for c in ln.strip("|").split("|")] for ln in lines[2:]]


def test_complete_example_imports_as_described(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The worked example imports through the CLI into the ledger the page describes."""
    example = jsonl_block(section("## A complete example"))
    src = tmp_path / "example.jsonl"
    src.write_text(example, encoding="utf-8")
    db = tmp_path / "l.db"
    assert main(["import", str(src), "--db", str(db)]) == 0
    assert capsys.readouterr().out.endswith("(7 turns, 26 records in the ledger)\n")

    store = SqliteStore(db)
    end = store.end_pos()
    stats = store.stats()
    assert (stats.turns, stats.records) == (7, 26)
    assert set(stats.records_by_kind) == {
        "turn", "message", "brief", "task_result", "tool", "external_event", "work_item", "wait",
        "environment", "pin"}
    ci = store.work_item_state("wi-ci", end)
    assert ci is not None
    assert (ci.status, ci.transitions, ci.blocker, ci.completion_report) == (
        WorkItemStatus.DONE, 3, None, "CI green, build 88 in production")
    docs = store.work_item_state("wi-docs", end)
    assert docs is not None
    assert (docs.status, docs.completion_report) == (WorkItemStatus.DONE, "docs/deploy.zh.md written")
    assert store.open_waits(end) == []
    wait = store.get("wait:wt2")
    assert wait is not None
    assert (wait.record.status, wait.record.resolved_by) == (  # type: ignore[union-attr]
        WaitStatus.RESOLVED, "external_event:e1")
    provenance = {r.ref: (r.record.origin, r.record.trust) for r in store.records_of_turns(0, 9, end)}
    assert provenance["external_event:e1"] == ("external", "untrusted_external")
    assert provenance["brief:b1"] == ("assistant", "model_output")
    assert (store.turn("t7").record.origin, store.turn("t7").record.trust) == (  # type: ignore[union-attr]
        "operator", "trusted_operator")
    assert [p.record.target for p in store.pins(end, 5)] == ["message:m1"]  # type: ignore[union-attr]
    assert store.latest_environment(end).ref == "environment:env1"  # type: ignore[union-attr]
    store.close()


def test_complete_example_round_trips(tmp_path: Path) -> None:
    """Exporting the imported example and importing that again gives the same bytes."""
    src = tmp_path / "example.jsonl"
    src.write_text(jsonl_block(section("## A complete example")), encoding="utf-8")
    first, again = MemoryStore(), MemoryStore()
    import_jsonl(src, first)
    out = io.BytesIO()
    export_jsonl(first, out)
    src.write_bytes(out.getvalue())
    import_jsonl(src, again)
    out_again = io.BytesIO()
    export_jsonl(again, out_again)
    assert out_again.getvalue() == out.getvalue()


def test_plain_stream_example_derives_two_turns(tmp_path: Path) -> None:
    """The plain-stream example imports as the two derived turns the page names."""
    src = tmp_path / "plain.jsonl"
    src.write_text(jsonl_block(section("### Plain event streams: derived turns")), encoding="utf-8")
    store = MemoryStore()
    assert import_jsonl(src, store) == 6
    turns = [r for r in store.iter_records() if isinstance(r, Turn)]
    assert [(t.id, t.seq, t.trigger) for t in turns] == [
        ("t.m1", 0, "operator_input"), ("t.e1", 1, "external_event")]
    owners = {r.ref: r.record.turn_id for r in store.records_of_turns(0, 1, store.end_pos())}  # type: ignore[union-attr]
    assert owners == {"message:m1": "t.m1", "tool:x1": "t.m1", "brief:b1": "t.m1",
                      "external_event:e1": "t.e1"}


def test_provenance_table_matches_the_codec() -> None:
    """The origin → default trust → allowed trusts table is the codec's, row for row."""
    rows = table_rows(section("## Provenance"))
    documented = {o: (d, {t.strip().strip("`") for t in allowed.split(",")}) for o, d, allowed in rows}
    assert documented == {o.value: (_ORIGIN_TRUST[o].value, {t.value for t in _ALLOWED_TRUST[o]})
                          for o in _ALLOWED_TRUST}


def test_trigger_table_matches_the_codec() -> None:
    """Every known trigger is documented once, with the origin it defaults to."""
    rows = table_rows(section("## Triggers"))
    assert {r[0]: r[1] for r in rows} == {t: _TRIGGER_ORIGIN[t].value for t in KNOWN_TRIGGERS}
    assert len(rows) == len(KNOWN_TRIGGERS)


@pytest.mark.parametrize("record_type", list(Record.__args__), ids=lambda t: t.__struct_config__.tag)  # type: ignore[attr-defined]
def test_field_tables_list_every_field_in_export_order(record_type: type[RecordBase]) -> None:
    """Each record type's table lists its own fields, in the order export writes them."""
    tag = record_type.__struct_config__.tag
    heading = next(h for h in re.findall(r"^### .*$", TEXT, re.MULTILINE) if h.startswith(f"### `{tag}`"))
    own = [f for f in record_type.__struct_fields__ if f not in RecordBase.__struct_fields__]
    assert [row[0] for row in table_rows(section(heading))] == own
