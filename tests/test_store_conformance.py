"""One conformance suite for every LedgerStore, plus what only the SQLite store promises.

The ``store`` fixture yields each implementation in turn; every test above the SQLite section runs
against both. A fixed ledger pins exact answers (positions, limit_pos edges, folds), a naive
oracle written from the Protocol's docstrings checks generated ledgers, and both stores must give
identical answers on the same ledger.
"""

from __future__ import annotations

import inspect
import io
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import ledgers

from holon_ctx.errors import LedgerFormatError, StoreError
from holon_ctx.ledger.body import record_body
from holon_ctx.ledger.codec import provenance_defaults
from holon_ctx.ledger.facts import HIGH_INDEX_KEY, marks_high
from holon_ctx.ledger.importer import export_jsonl
from holon_ctx.ledger.memory import MemoryStore
from holon_ctx.ledger.records import (
    Brief,
    BriefKind,
    Environment,
    ExternalEvent,
    Message,
    MessageRole,
    Origin,
    Pin,
    Record,
    TaskResult,
    TaskStatus,
    Todo,
    Tool,
    ToolStatus,
    Trust,
    Turn,
    Wait,
    WaitStatus,
    WorkItem,
    WorkItemStatus,
    record_ref,
)
from holon_ctx.ledger.sqlite import _MIGRATIONS, SCHEMA_VERSION, SqliteStore
from holon_ctx.ledger.state import TurnInfo, WaitState, WorkItemState
from holon_ctx.ledger.store import LedgerStore, StoredRecord
from holon_ctx.postgres import PostgresStore
from holon_ctx.tokens import TokenCounter, default_counter


class CharCounter:
    """A fake TokenCounter: one token per character, so foreign counts are easy to tell apart."""

    identity = "fake:chars"

    def count(self, text: str) -> int:
        return len(text)

    def count_many(self, texts: list[str]) -> list[int]:
        return [len(t) for t in texts]

    def encode(self, text: str) -> list[int]:
        return [ord(c) for c in text]

    def decode(self, tokens: list[int]) -> str:
        return "".join(map(chr, tokens))


MakeStore = Callable[..., LedgerStore]


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MakeStore]:
    """A factory for fresh stores of one kind (SQLite ones in files under tmp_path, PostgreSQL
    ones as new sessions of the run's database)."""
    made: list[LedgerStore] = []
    pg_url = request.getfixturevalue("pg_url") if request.param == "postgres" else ""

    def make(counter: TokenCounter | None = None) -> LedgerStore:
        if request.param == "memory":
            store: LedgerStore = MemoryStore(counter)
        elif request.param == "postgres":
            store = PostgresStore(pg_url, session=f"{request.node.name}-{len(made)}",
                                  counter=counter)
        else:
            store = SqliteStore(tmp_path / f"l{len(made)}.db", counter)
        made.append(store)
        return store

    yield make
    for store in made:
        store.close()


@pytest.fixture
def store(make_store: MakeStore) -> LedgerStore:
    """MemoryStore(), SqliteStore(tmp_path / "l0.db") and a PostgresStore session in turn."""
    return make_store()


# -- a fixed ledger with known answers --------------------------------------------------------
LEDGER: list[Record] = [
    Environment(id="env0", workspace="/srv/agent", capabilities=["shell"], guidance="Be brief."),  # 0
    Turn(id="t1", seq=10, trigger="operator_input", work_item_id="wi1"),  # 1
    Message(id="m1", turn_id="t1", role=MessageRole.OPERATOR, text="修复 CI，然后部署 🚀"),  # 2
    WorkItem(id="w1", work_item_id="wi1", turn_id="t1", objective="fix CI",
             plan=["reproduce", "patch"], status=WorkItemStatus.ACTIVE),  # 3
    Wait(id="wt1", wait_id="ci", status=WaitStatus.OPEN, turn_id="t1", condition="CI green"),  # 4
    Tool(id="x1", turn_id="t1", tool_name="shell", status=ToolStatus.OK, exit_code=0,
         output="3 passed, 1 failed"),  # 5
    Turn(id="t2", seq=12, trigger="external_event", anchor_turn_id="t1", work_item_id="wi1"),  # 6
    ExternalEvent(id="e1", turn_id="t2", source="ci", text="CI passed", wait_id="ci"),  # 7
    Wait(id="wt2", wait_id="ci", status=WaitStatus.RESOLVED, turn_id="t2",
         resolved_by="external_event:e1"),  # 8
    Pin(id="p1", turn_id="t2", target="message:m1", note="the request"),  # 9
    Turn(id="t3", seq=13, trigger="scheduler_tick"),  # 10
    Brief(id="b1", turn_id="t3", kind=BriefKind.PROGRESS, text="deploying"),  # 11
    Wait(id="wt3", wait_id="review", status=WaitStatus.OPEN, condition="owner review"),  # 12
    WorkItem(id="w2", work_item_id="wi1", turn_id="t3", status=WorkItemStatus.DONE,
             todos=[Todo(text="deploy", done=True)], completion_report="deployed"),  # 13
    Turn(id="t4", seq=20, trigger="operator_override"),  # 14
    Message(id="m2", turn_id="t4", role=MessageRole.OPERATOR, text="stop the rollout"),  # 15
    Environment(id="env1", turn_id="t4", workspace="/srv/agent", guidance="Rollout frozen."),  # 16
    Pin(id="p2", turn_id="t4", target="tool:x1"),  # 17
    Turn(id="t5", seq=21, trigger="approval_decision"),  # 18
    TaskResult(id="r1", turn_id="t5", task_id="k1", status=TaskStatus.SUCCESS,
               summary="rollback done", spawned_by_turn_id="t4"),  # 19
]
END = len(LEDGER)


def refs(found: list[StoredRecord]) -> list[str]:
    return [r.ref for r in found]


def ref_of(found: StoredRecord | None) -> str | None:
    return None if found is None else found.ref


def filled(record: Record) -> Record:
    origin, trust = provenance_defaults(record)
    return msgspec.structs.replace(record, origin=origin, trust=trust)


def test_both_stores_implement_the_protocol(store: LedgerStore) -> None:
    """Each store is a runtime-checkable LedgerStore with the default counter's identity."""
    assert isinstance(store, LedgerStore)
    assert store.counter_identity == "tiktoken:cl100k_base"


def test_every_store_takes_the_protocols_parameters(store: LedgerStore) -> None:
    """Each method the LedgerStore protocol declares takes, in every store, the parameters the
    protocol gives it: the same names and kinds, and the protocol's defaults. Keyword-only stays
    keyword-only (``append(records, "x")`` is refused by every store, not taken as the source by
    one), and a caller that leaves out a defaulted argument gets the same behaviour from any
    store. A store may default what the protocol requires (``work_item_state``'s ``limit_pos``:
    the append path asks without one)."""
    def shape(method: Callable[..., Any]) -> list[inspect.Parameter]:
        return list(inspect.signature(method).parameters.values())

    declared = [n for n, _ in inspect.getmembers(LedgerStore, inspect.isfunction)
                if not n.startswith("_")]
    assert {"append", "append_lines", "work_item_state", "turns_before"} <= set(declared)
    for name in declared:
        got, want = shape(getattr(type(store), name)), shape(getattr(LedgerStore, name))
        assert [(p.name, p.kind) for p in got] == [(p.name, p.kind) for p in want], name
        assert [g.default for g, w in zip(got, want, strict=True) if w.default is not w.empty] \
            == [w.default for w in want if w.default is not w.empty], name
    with pytest.raises(TypeError):
        store.append([], "positional source")  # type: ignore[misc]


def test_append_returns_count_and_positions_follow_order(store: LedgerStore) -> None:
    """append stores records at positions 0..n-1 in order; end_pos is the next position."""
    assert store.end_pos() == 0
    assert store.append(LEDGER) == END
    assert store.end_pos() == END
    assert [store.get(record_ref(r)).pos for r in LEDGER] == list(range(END))  # type: ignore[union-attr]


def test_get_and_turn(store: LedgerStore) -> None:
    """get returns the stored record with provenance filled, its owner's seq and its token count."""
    store.append(LEDGER)
    counter = default_counter()
    got = store.get("message:m1")
    assert got == StoredRecord(pos=2, ref="message:m1", record=filled(LEDGER[2]),
                               tokens=counter.count("修复 CI，然后部署 🚀\n"), turn_seq=10)
    assert store.get("environment:env0") == StoredRecord(
        pos=0, ref="environment:env0", record=filled(LEDGER[0]),
        tokens=counter.count("Be brief.\n"), turn_seq=None)
    assert store.get("message:nope") is None
    assert store.get("turn:m1") is None
    assert store.turn("t2") == store.get("turn:t2")
    assert store.turn("t2").turn_seq == 12  # type: ignore[union-attr]
    assert store.turn("zz") is None


def test_next_turn_pos(store: LedgerStore) -> None:
    """next_turn_pos(seq) is the position of the first turn whose seq is strictly above seq."""
    store.append(LEDGER)
    assert [store.next_turn_pos(s) for s in (-1, 9, 10, 11, 12, 13, 19, 20, 21, 99)] == [
        1, 1, 6, 6, 10, 14, 14, 18, None, None]


def test_latest_turn_limit_pos_is_exclusive(store: LedgerStore) -> None:
    """latest_turn(limit_pos) sees only records at positions below limit_pos."""
    store.append(LEDGER)
    assert ref_of(store.latest_turn(0)) is None
    assert ref_of(store.latest_turn(1)) is None
    assert ref_of(store.latest_turn(2)) == "turn:t1"
    assert ref_of(store.latest_turn(14)) == "turn:t3"
    assert ref_of(store.latest_turn(15)) == "turn:t4"
    assert ref_of(store.latest_turn(END)) == "turn:t5"


def test_turns_before(store: LedgerStore) -> None:
    """turns_before gives up to count turns with a lower seq, newest first, below limit_pos."""
    store.append(LEDGER)
    assert refs(store.turns_before(21, 2, END)) == ["turn:t4", "turn:t3"]
    assert refs(store.turns_before(21, 10, END)) == ["turn:t4", "turn:t3", "turn:t2", "turn:t1"]
    assert refs(store.turns_before(99, 10, 10)) == ["turn:t2", "turn:t1"]
    assert refs(store.turns_before(13, 10, END)) == ["turn:t2", "turn:t1"]
    assert refs(store.turns_before(10, 5, END)) == []
    assert refs(store.turns_before(21, 1, END)) == ["turn:t4"]  # what a block's opener asks
    assert refs(store.turns_before(21, 0, END)) == []


def test_a_negative_count_reads_nothing(make_store: MakeStore) -> None:
    """"Up to ``count``" with a negative count is none, in every store: SQLite read ``LIMIT -1``
    as no limit at all (it answered every turn and pin) and PostgreSQL refuses it."""
    store, high = make_store(), make_store()
    store.append(LEDGER)
    high.append(HIGH_LEDGER)
    assert store.turns_before(99, -1, END) == []
    assert store.pins(END, -1) == []
    assert store.pins(END, -5) == []
    assert high.high_turns_before(99, -1, len(HIGH_LEDGER)) == []


def test_the_append_primitives_answer_between_batches(store: LedgerStore) -> None:
    """What the append path asks a store (writer.AppendBackend) answers from the ledger as
    committed, outside any batch: the next position, refs held, turns by id, the newest turn,
    and each wait's and work item's latest state."""
    backend: Any = store
    assert backend.next_pos() == 0
    assert backend.last_turn() is None
    assert backend.wait_state("ci") is None
    store.append(LEDGER)
    assert backend.next_pos() == END
    assert backend.has_ref("wait:wt2")
    assert not backend.has_ref("wait:nope")
    assert backend.find_turn("t2") == TurnInfo(id="t2", seq=12, pos=6, work_item_id="wi1")
    assert backend.find_turn("nope") is None
    assert backend.last_turn() == TurnInfo(id="t5", seq=21, pos=18, work_item_id=None)
    assert backend.wait_state("ci") == WaitState(
        wait_id="ci", ref="wait:wt2", pos=8, opened_ref="wait:wt1", status=WaitStatus.RESOLVED,
        condition="CI green", resolved_by="external_event:e1")
    assert backend.wait_state("review") == WaitState(
        wait_id="review", ref="wait:wt3", pos=12, opened_ref="wait:wt3",
        status=WaitStatus.OPEN, condition="owner review")
    assert backend.wait_state("nope") is None
    assert backend.work_item_state("wi1").ref == "work_item:w2"
    assert backend.work_item_state("nope") is None


def test_records_of_turns(store: LedgerStore) -> None:
    """records_of_turns gives non-turn records owned by turns in a closed seq range, by position."""
    store.append(LEDGER)
    assert refs(store.records_of_turns(10, 12, END)) == [
        "message:m1", "work_item:w1", "wait:wt1", "tool:x1", "external_event:e1", "wait:wt2",
        "pin:p1"]
    assert refs(store.records_of_turns(12, 12, 9)) == ["external_event:e1", "wait:wt2"]
    assert refs(store.records_of_turns(13, 20, END)) == [
        "brief:b1", "work_item:w2", "message:m2", "environment:env1", "pin:p2"]
    assert refs(store.records_of_turns(11, 11, END)) == []
    assert refs(store.records_of_turns(21, 99, 19)) == []
    assert refs(store.records_of_turns(21, 99, END)) == ["task_result:r1"]


#: Turns marked high or not, and a record appended later that marks an earlier turn high.
HIGH_LEDGER: list[Record] = [
    Turn(id="h1", seq=1, trigger="operator_input"),  # 0: high by its trigger
    Turn(id="h2", seq=2, trigger="scheduler_tick"),  # 1: nothing
    Tool(id="hx1", turn_id="h2", tool_name="sh", status=ToolStatus.OK, exit_code=0),  # 2
    Turn(id="h3", seq=3, trigger="task_result"),  # 3
    TaskResult(id="hr1", turn_id="h3", task_id="k", status=TaskStatus.FAILURE),  # 4: high
    Turn(id="h4", seq=4, trigger="timer"),  # 5
    Tool(id="hx2", turn_id="h2", tool_name="sh", status=ToolStatus.OK, exit_code=2),  # 6: h2 high
    Turn(id="h5", seq=5, trigger="x-hook"),  # 7
    Message(id="hm1", turn_id="h5", role=MessageRole.ASSISTANT, text="done"),  # 8: normal
]


def test_records_between(store: LedgerStore) -> None:
    """Every record with lo <= pos < hi, turns included, in append order, each as get() has it;
    bounds past either end are clipped, an empty or reversed range is empty."""
    store.append(LEDGER)
    whole = store.records_between(0, END)
    assert [r.pos for r in whole] == list(range(END))
    assert refs(whole) == [record_ref(r) for r in LEDGER]
    assert whole == [store.get(r.ref) for r in whole]
    assert refs(store.records_between(6, 10)) == ["turn:t2", "external_event:e1", "wait:wt2",
                                                  "pin:p1"]
    assert refs(store.records_between(10, 11)) == ["turn:t3"]
    assert store.records_between(5, 5) == []
    assert store.records_between(9, 3) == []
    assert refs(store.records_between(-4, 2)) == ["environment:env0", "turn:t1"]
    assert refs(store.records_between(18, END + 50)) == ["turn:t5", "task_result:r1"]
    assert store.records_between(END, END + 10) == []
    assert store.records_between(END + 5, END + 10) == []


def test_high_turns_before(store: LedgerStore) -> None:
    """Turns marked high by their trigger or a record, newest first, each as of the position of
    the record that marked it (a late record marks an earlier turn only from its position on)."""
    store.append(HIGH_LEDGER)
    end = len(HIGH_LEDGER)
    assert refs(store.high_turns_before(99, 10, end)) == ["turn:h3", "turn:h2", "turn:h1"]
    assert refs(store.high_turns_before(99, 2, end)) == ["turn:h3", "turn:h2"]
    assert refs(store.high_turns_before(3, 10, end)) == ["turn:h2", "turn:h1"]
    assert refs(store.high_turns_before(99, 10, 6)) == ["turn:h3", "turn:h1"]  # hx2 not yet
    assert refs(store.high_turns_before(99, 10, 4)) == ["turn:h1"]
    assert refs(store.high_turns_before(99, 10, 0)) == []
    assert refs(store.high_turns_before(1, 10, end)) == []
    assert refs(store.high_turns_before(99, 0, end)) == []
    turn = store.high_turns_before(99, 1, end)[0]
    assert turn == store.turn("h3")


def test_latest_operator_turn(store: LedgerStore) -> None:
    """The newest operator_input/operator_override turn below a seq; approvals do not count."""
    store.append(LEDGER)
    assert ref_of(store.latest_operator_turn(99, END)) == "turn:t4"
    assert ref_of(store.latest_operator_turn(20, END)) == "turn:t1"
    assert ref_of(store.latest_operator_turn(99, 14)) == "turn:t1"
    assert ref_of(store.latest_operator_turn(10, END)) is None
    assert ref_of(store.latest_operator_turn(99, 1)) is None


def test_work_item_state_folds_transitions(store: LedgerStore) -> None:
    """A work item's state is the fold of its transitions below limit_pos; unstated fields carry."""
    store.append(LEDGER)
    assert store.work_item_state("wi1", 3) is None
    assert store.work_item_state("wi1", 4) == WorkItemState(
        work_item_id="wi1", ref="work_item:w1", pos=3, first_ref="work_item:w1",
        objective="fix CI", plan=["reproduce", "patch"], status=WorkItemStatus.ACTIVE)
    assert store.work_item_state("wi1", END) == WorkItemState(
        work_item_id="wi1", ref="work_item:w2", pos=13, first_ref="work_item:w1",
        objective="fix CI", plan=["reproduce", "patch"], todos=[Todo(text="deploy", done=True)],
        status=WorkItemStatus.DONE, completion_report="deployed", transitions=2)
    assert store.work_item_state("nope", END) is None


def _reopened(store: LedgerStore, pg_url: str) -> LedgerStore:
    """Another store on the same ledger (the same file, the same PostgreSQL session): it holds
    no cache of what the first appended. A MemoryStore is its own ledger: itself."""
    if isinstance(store, SqliteStore):
        return SqliteStore(store.path)
    if isinstance(store, PostgresStore):
        return PostgresStore(pg_url, session=store.session)
    return store


def test_reads_without_a_limit_reach_past_the_first_positions(
        make_store: MakeStore, request: pytest.FixtureRequest) -> None:
    """A read asked with no limit (``work_item_state`` without ``limit_pos``, the append path's
    ``wait_state``) answers the newest state wherever it sits, read by the store that appended
    it and by another opened on the ledger afterwards. Every other test's ledger ends before
    position 20, so a "no limit" that was only a small number (``1 << 62`` written ``1 + 62``)
    answered the same there: here the states sit past positions 64 and 128."""
    store = make_store()
    pg_url = request.getfixturevalue("pg_url") if isinstance(store, PostgresStore) else ""
    filler = [Message(id=f"f{i}", turn_id="t1", role=MessageRole.ASSISTANT, text=f"step {i}")
              for i in range(130)]
    late = [WorkItem(id="w9", work_item_id="wi1", turn_id="t1", status=WorkItemStatus.BLOCKED),
            Wait(id="wt9", wait_id="ci", status=WaitStatus.OPEN, turn_id="t1",
                 condition="CI green again")]
    store.append([*LEDGER[:6], *filler[:60], late[0], *filler[60:], late[1]])
    end = 6 + 130 + 2
    assert store.end_pos() == end
    other = _reopened(store, pg_url)
    try:
        for reader in (store, other):
            state = reader.work_item_state("wi1")
            assert state is not None
            assert (state.ref, state.pos, state.status, state.transitions) == (
                "work_item:w9", 66, WorkItemStatus.BLOCKED, 2)
            assert reader.work_item_state("wi1") == reader.work_item_state("wi1", end)
            assert reader.work_item_state("wi1", 66) == reader.work_item_state("wi1", 4)
            backend: Any = reader
            assert backend.wait_state("ci").ref == "wait:wt9"
            assert backend.wait_state("ci").pos == end - 1
            assert [w.ref for w in reader.open_waits(end)] == ["wait:wt9"]
    finally:
        if other is not store:
            other.close()


def test_open_waits(store: LedgerStore) -> None:
    """open_waits lists waits whose latest transition below limit_pos is open, oldest first."""
    store.append(LEDGER)
    assert store.open_waits(4) == []
    assert store.open_waits(5) == [WaitState(wait_id="ci", ref="wait:wt1", pos=4,
                                             opened_ref="wait:wt1", status=WaitStatus.OPEN,
                                             condition="CI green")]
    assert store.open_waits(9) == []
    assert store.open_waits(END) == [WaitState(wait_id="review", ref="wait:wt3", pos=12,
                                               opened_ref="wait:wt3", status=WaitStatus.OPEN,
                                               condition="owner review")]


def test_a_counter_switched_mid_session_counts_every_read(store: LedgerStore) -> None:
    """After ``use_counter`` (a session for another model, RFC 0022) a read gives the new
    counter's counts, records appended before included; switching back gives the first
    counter's again, and switching to the counter in use changes nothing."""
    store.append(LEDGER)
    first = {r.ref: r.tokens for r in store.records_between(0, END)}
    switch: Any = store
    switch.use_counter(CharCounter())
    assert store.counter_identity == "fake:chars"
    assert [r.tokens for r in store.records_between(0, END)] == [
        len(record_body(r)) for r in LEDGER]
    assert store.get("message:m1").tokens == len("修复 CI，然后部署 🚀\n")  # type: ignore[union-attr]
    switch.use_counter(default_counter())
    assert {r.ref: r.tokens for r in store.records_between(0, END)} == first
    switch.use_counter(default_counter())
    assert {r.ref: r.tokens for r in store.records_between(0, END)} == first


def test_open_waits_asked_first_at_an_earlier_position(store: LedgerStore) -> None:
    """A store's first open_waits call may ask below the ledger's end: a wait open there and
    resolved later is open in the answer (the incremental set starts from the newest state)."""
    store.append(LEDGER)
    assert [w.wait_id for w in store.open_waits(5)] == ["ci"]
    assert [w.wait_id for w in store.open_waits(END)] == ["review"]


def test_open_waits_asked_first_on_an_empty_ledger(store: LedgerStore) -> None:
    """A store's first ``open_waits`` may come before anything is appended (a session's first
    request): a wait then opened at the ledger's first positions is listed by the next call.
    The incremental set starts from "no transition yet", not from a position past the ones the
    first records take (a start of 2 missed the wait at position 1)."""
    assert store.open_waits(0) == []
    store.append([Turn(id="t1", seq=1, trigger="operator_input"),
                  Wait(id="wt1", wait_id="ci", status=WaitStatus.OPEN, turn_id="t1",
                       condition="CI green")])
    assert [(w.wait_id, w.pos) for w in store.open_waits(2)] == [("ci", 1)]
    assert store.open_waits(1) == []


def test_latest_environment(store: LedgerStore) -> None:
    """latest_environment is the newest environment record below limit_pos."""
    store.append(LEDGER)
    assert ref_of(store.latest_environment(0)) is None
    assert ref_of(store.latest_environment(1)) == "environment:env0"
    assert ref_of(store.latest_environment(16)) == "environment:env0"
    assert ref_of(store.latest_environment(END)) == "environment:env1"


def test_pins(store: LedgerStore) -> None:
    """pins gives the newest count pins below limit_pos, oldest first."""
    store.append(LEDGER)
    assert refs(store.pins(END, 10)) == ["pin:p1", "pin:p2"]
    assert refs(store.pins(END, 1)) == ["pin:p2"]
    assert refs(store.pins(17, 5)) == ["pin:p1"]
    assert refs(store.pins(9, 5)) == []
    assert refs(store.pins(END, 0)) == []


def test_iter_records_and_stats(store: LedgerStore) -> None:
    """iter_records yields the ledger in order, provenance filled; stats add up per kind and trust."""
    store.append(LEDGER)
    assert list(store.iter_records()) == [filled(r) for r in LEDGER]
    counter = default_counter()
    tokens = [counter.count(record_body(r)) for r in LEDGER]
    by_kind: dict[str, int] = {}
    by_trust: dict[str, int] = {}
    for rec, n in zip(LEDGER, tokens, strict=True):
        kind = record_ref(rec).partition(":")[0]
        by_kind[kind] = by_kind.get(kind, 0) + n
        trust = provenance_defaults(rec)[1].value
        by_trust[trust] = by_trust.get(trust, 0) + n
    stats = store.stats()
    assert (stats.turns, stats.records, stats.counter) == (5, END, "tiktoken:cl100k_base")
    assert stats.records_by_kind == {"environment": 2, "turn": 5, "message": 2, "work_item": 2,
                                     "wait": 3, "tool": 1, "external_event": 1, "pin": 2,
                                     "brief": 1, "task_result": 1}
    assert stats.tokens_by_kind == by_kind
    assert stats.tokens_by_trust == by_trust


def test_empty_store_reads(store: LedgerStore) -> None:
    """Every read on an empty store answers 'nothing' rather than failing."""
    assert store.end_pos() == 0
    assert store.get("turn:t1") is None
    assert store.next_turn_pos(0) is None
    assert store.latest_turn(10) is None
    assert store.turns_before(10, 5, 10) == []
    assert store.records_of_turns(0, 99, 10) == []
    assert store.latest_operator_turn(99, 10) is None
    assert store.work_item_state("wi1", 10) is None
    assert store.open_waits(10) == []
    assert store.latest_environment(10) is None
    assert store.pins(10, 5) == []
    assert store.records_between(0, 10) == []
    assert list(store.iter_records()) == []
    stats = store.stats()
    assert (stats.turns, stats.records, stats.records_by_kind, stats.tokens_by_kind) == (0, 0, {}, {})


def _snapshot(store: LedgerStore) -> tuple[bytes, Any]:
    out = io.BytesIO()
    export_jsonl(store, out)
    return out.getvalue(), store.stats()


def _records_then(bad: Record) -> list[Record]:
    good = [Turn(id="t9", seq=30, trigger="timer"),
            Message(id="m9", turn_id="t9", role=MessageRole.ASSISTANT, text="tick")]
    return [*good, bad]


@pytest.mark.parametrize("bad", [
    Message(id="m9", turn_id="t9", role=MessageRole.ASSISTANT, text="again"),
    Message(id="m10", turn_id="t404", role=MessageRole.ASSISTANT, text="orphan"),
    Turn(id="t10", seq=1, trigger="timer"),
    Pin(id="p9", target="tool:none"),
], ids=["duplicate", "missing-turn", "seq-backwards", "pin-missing"])
def test_failed_batch_leaves_store_unchanged(store: LedgerStore, bad: Record) -> None:
    """A batch whose last record is invalid keeps nothing of itself; the store is as before."""
    store.append(LEDGER)
    before = _snapshot(store)
    with pytest.raises(LedgerFormatError):
        store.append(_records_then(bad))
    assert _snapshot(store) == before
    assert store.end_pos() == END
    assert store.get("turn:t9") is None
    # The store is still usable, and positions continue where they were.
    assert store.append(_records_then(Brief(id="b9", turn_id="t9", kind=BriefKind.ACK,
                                            text="ok"))) == 3
    assert store.get("brief:b9").pos == END + 2  # type: ignore[union-attr]


def test_exception_from_the_iterable_aborts_the_batch(store: LedgerStore) -> None:
    """If the caller's iterable raises mid-batch, nothing of the batch is kept."""
    store.append(LEDGER[:6])

    def gen() -> Iterator[Record]:
        yield Turn(id="t8", seq=11, trigger="timer")
        raise RuntimeError("runtime crashed")

    with pytest.raises(RuntimeError, match="runtime crashed"):
        store.append(gen())
    assert store.end_pos() == 6
    assert store.turn("t8") is None
    assert store.append(LEDGER[6:]) == END - 6


def test_later_batches_continue_the_ledger(store: LedgerStore) -> None:
    """A second batch sees the first: derived turns continue seq, turn-less records attach."""
    store.append(LEDGER)
    store.append([Brief(id="b7", kind=BriefKind.RESULT, text="late result"),
                  Message(id="m7", role=MessageRole.OPERATOR, text="next task")])
    assert store.get("brief:b7").record.turn_id == "t5"  # type: ignore[union-attr]
    derived = store.turn("t.m7")
    assert derived is not None
    assert derived.record == Turn(id="t.m7", seq=22, trigger="operator_input",
                                  origin=Origin.OPERATOR, trust=Trust.TRUSTED_OPERATOR)
    assert store.get("message:m7").turn_seq == 22  # type: ignore[union-attr]
    assert ref_of(store.latest_operator_turn(99, store.end_pos())) == "turn:t.m7"


def test_another_counter_counts_differently(make_store: MakeStore) -> None:
    """A store built with another counter stores that counter's counts and names it."""
    assert isinstance(CharCounter(), TokenCounter)
    store = make_store(CharCounter())
    store.append(LEDGER)
    assert store.counter_identity == "fake:chars"
    assert store.get("message:m1").tokens == len("修复 CI，然后部署 🚀\n")  # type: ignore[union-attr]
    assert store.stats().counter == "fake:chars"
    assert sum(store.stats().tokens_by_kind.values()) == sum(len(record_body(r)) for r in LEDGER)


# -- a naive oracle, written from the Protocol docstrings ----------------------------------------
@attrs.frozen
class Oracle:
    """The Protocol's reads by brute force over the stored rows."""

    rows: list[StoredRecord]

    def _turns(self, limit_pos: int) -> list[StoredRecord]:
        return [r for r in self.rows if isinstance(r.record, Turn) and r.pos < limit_pos]

    def latest_turn(self, limit_pos: int) -> str | None:
        turns = self._turns(limit_pos)
        return turns[-1].ref if turns else None

    def next_turn_pos(self, seq: int) -> int | None:
        later = [r.pos for r in self._turns(len(self.rows)) if r.turn_seq > seq]  # type: ignore[operator]
        return min(later) if later else None

    def turns_before(self, seq: int, count: int, limit_pos: int) -> list[str]:
        turns = [r for r in self._turns(limit_pos) if r.turn_seq < seq]  # type: ignore[operator]
        return [r.ref for r in sorted(turns, key=lambda r: -r.turn_seq)][:count]  # type: ignore[operator]

    def records_of_turns(self, lo: int, hi: int, limit_pos: int) -> list[str]:
        return [r.ref for r in self.rows if not isinstance(r.record, Turn) and r.pos < limit_pos
                and r.turn_seq is not None and lo <= r.turn_seq <= hi]

    def high_turns_before(self, seq: int, count: int, limit_pos: int) -> list[str]:
        """Turns any of whose records before limit_pos (the turn included) marks it high."""
        marked = {r.turn_seq for r in self.rows if r.pos < limit_pos and r.turn_seq is not None
                  and marks_high(r.record)}
        turns = [r for r in self._turns(limit_pos) if r.turn_seq < seq  # type: ignore[operator]
                 and r.turn_seq in marked]
        return [r.ref for r in sorted(turns, key=lambda r: -r.turn_seq)][:count]  # type: ignore[operator]

    def latest_operator_turn(self, before_seq: int, limit_pos: int) -> str | None:
        found = [r for r in self._turns(limit_pos) if r.turn_seq < before_seq  # type: ignore[operator]
                 and r.record.trigger in ("operator_input", "operator_override")]  # type: ignore[union-attr]
        return found[-1].ref if found else None

    def open_waits(self, limit_pos: int) -> list[tuple[str, str]]:
        latest: dict[str, StoredRecord] = {}
        for r in self.rows:
            if isinstance(r.record, Wait) and r.pos < limit_pos:
                latest[r.record.wait_id] = r
        opened = [r for r in latest.values() if r.record.status is WaitStatus.OPEN]  # type: ignore[union-attr]
        return [(r.record.wait_id, r.ref) for r in sorted(opened, key=lambda r: r.pos)]  # type: ignore[union-attr]

    def work_item(self, work_item_id: str, limit_pos: int) -> dict[str, Any] | None:
        """Each transition replaces the fields it states; an empty blocker clears it."""
        state: dict[str, Any] | None = None
        for r in self.rows:
            rec = r.record
            if isinstance(rec, WorkItem) and rec.work_item_id == work_item_id and r.pos < limit_pos:
                state = state or {"first_ref": r.ref, "transitions": 0, "objective": "",
                                  "plan": [], "todos": [], "status": WorkItemStatus.OPEN,
                                  "waits": [], "blocker": None, "completion_report": None}
                for name in _WI_FIELDS:
                    value = getattr(rec, name)
                    if value is not None:
                        state[name] = (value or None) if name == "blocker" else value
                state.update(ref=r.ref, pos=r.pos, transitions=state["transitions"] + 1)
        return state

    def records_between(self, lo_pos: int, hi_pos: int) -> list[StoredRecord]:
        return [r for r in self.rows if lo_pos <= r.pos < hi_pos]

    def latest_environment(self, limit_pos: int) -> str | None:
        envs = [r.ref for r in self.rows if isinstance(r.record, Environment) and r.pos < limit_pos]
        return envs[-1] if envs else None

    def pins(self, limit_pos: int, count: int) -> list[str]:
        pins = [r.ref for r in self.rows if isinstance(r.record, Pin) and r.pos < limit_pos]
        return pins[len(pins) - count:] if count else []


def _oracle_rows(records: list[Record]) -> list[StoredRecord]:
    counter = default_counter()
    seq_of = {r.id: r.seq for r in records if isinstance(r, Turn)}
    rows = []
    for pos, rec in enumerate(records):
        turn_id = getattr(rec, "turn_id", None)
        seq = rec.seq if isinstance(rec, Turn) else (None if turn_id is None else seq_of[turn_id])
        rows.append(StoredRecord(pos=pos, ref=record_ref(rec), record=filled(rec),
                                 tokens=counter.count(record_body(rec)), turn_seq=seq))
    return rows


_WI_FIELDS = ("objective", "plan", "todos", "status", "waits", "blocker", "completion_report")


def _wi_view(state: WorkItemState | None) -> dict[str, Any] | None:
    if state is None:
        return None
    view = {name: getattr(state, name) for name in _WI_FIELDS}
    view.update(first_ref=state.first_ref, ref=state.ref, pos=state.pos,
                transitions=state.transitions)
    return view


def _reads(store: LedgerStore | Oracle, records: list[Record], probes: list[int]) -> list[Any]:
    """Every read of the Protocol at every probed limit_pos, in a comparable form."""
    seqs = sorted({r.seq for r in records if isinstance(r, Turn)})
    work_items = sorted({r.work_item_id for r in records if isinstance(r, WorkItem)})
    out: list[Any] = []
    for s in [*seqs, seqs[0] - 1, seqs[-1] + 1]:
        out.append(("next_turn_pos", s, store.next_turn_pos(s)))
    for limit in probes:
        for s in [seqs[0], seqs[len(seqs) // 2], seqs[-1] + 1]:
            if isinstance(store, Oracle):
                out.append(("turns_before", s, limit, store.turns_before(s, 3, limit)))
                out.append(("high", s, limit, store.high_turns_before(s, 3, limit)))
                out.append(("op", s, limit, store.latest_operator_turn(s, limit)))
            else:
                out.append(("turns_before", s, limit, refs(store.turns_before(s, 3, limit))))
                out.append(("high", s, limit, refs(store.high_turns_before(s, 3, limit))))
                out.append(("op", s, limit, ref_of(store.latest_operator_turn(s, limit))))
        for lo, hi in [(seqs[0], seqs[-1]), (seqs[len(seqs) // 2], seqs[len(seqs) // 2])]:
            got = store.records_of_turns(lo, hi, limit)
            out.append(("records_of_turns", lo, hi, limit,
                        got if isinstance(store, Oracle) else refs(got)))  # type: ignore[arg-type]
        # Whole records (position, ref, record, tokens, turn): what a session walk reads.
        out.extend(("between", lo, hi, store.records_between(lo, hi))
                   for lo, hi in [(0, limit), (limit, len(records) + 3), (limit - 2, limit + 1)])
        if isinstance(store, Oracle):
            out.append(("latest_turn", limit, store.latest_turn(limit)))
            out.append(("env", limit, store.latest_environment(limit)))
            out.append(("pins", limit, store.pins(limit, 2)))
            out.append(("waits", limit, store.open_waits(limit)))
            out.extend(("wi", w, limit, store.work_item(w, limit)) for w in work_items)
        else:
            out.append(("latest_turn", limit, ref_of(store.latest_turn(limit))))
            out.append(("env", limit, ref_of(store.latest_environment(limit))))
            out.append(("pins", limit, refs(store.pins(limit, 2))))
            out.append(("waits", limit, [(w.wait_id, w.ref) for w in store.open_waits(limit)]))
            out.extend(("wi", w, limit, _wi_view(store.work_item_state(w, limit)))
                       for w in work_items)
    return out


_scratch = tempfile.TemporaryDirectory(prefix="holon-conformance-")
_n_files = iter(range(1 << 30))


def _both(records: list[Record]) -> tuple[MemoryStore, SqliteStore]:
    memory = MemoryStore()
    sqlite_store = SqliteStore(Path(_scratch.name) / f"g{next(_n_files)}.db")
    memory.append(records)
    sqlite_store.append(records)
    return memory, sqlite_store


@settings(max_examples=40)
@given(records=ledgers(1, 10), data=st.data())
def test_stores_agree_with_the_oracle_and_each_other(records: list[Record], data: st.DataObject) -> None:
    """On a generated ledger both stores answer every read exactly as the naive oracle does."""
    memory, sqlite_store = _both(records)
    oracle = Oracle(_oracle_rows(records))
    end = len(records)
    probes = sorted({0, end, *data.draw(st.lists(st.integers(0, end), max_size=4))})
    expected = _reads(oracle, records, probes)
    assert _reads(memory, records, probes) == expected
    assert _reads(sqlite_store, records, probes) == expected
    for row in oracle.rows:
        assert memory.get(row.ref) == sqlite_store.get(row.ref) == row
    assert memory.stats() == sqlite_store.stats()
    assert list(memory.iter_records()) == list(sqlite_store.iter_records()) == [
        row.record for row in oracle.rows]
    for w in {r.work_item_id for r in records if isinstance(r, WorkItem)}:
        assert memory.work_item_state(w, end) == sqlite_store.work_item_state(w, end)
    assert memory.open_waits(end) == sqlite_store.open_waits(end)
    sqlite_store.close()


_pg_sessions = iter(range(1 << 30))


@settings(max_examples=15)
@given(records=ledgers(1, 10), data=st.data())
def test_postgres_agrees_with_the_oracle(pg_url: str, records: list[Record],
                                         data: st.DataObject) -> None:
    """On a generated ledger the PostgreSQL store answers every read as the oracle and memory do."""
    memory = MemoryStore()
    memory.append(records)
    pg = PostgresStore(pg_url, session=f"oracle-{next(_pg_sessions)}")
    try:
        pg.append(records)
        end = len(records)
        probes = sorted({0, end, *data.draw(st.lists(st.integers(0, end), max_size=4))})
        oracle = Oracle(_oracle_rows(records))
        assert _reads(pg, records, probes) == _reads(oracle, records, probes)
        for row in oracle.rows:
            assert pg.get(row.ref) == row
        assert pg.stats() == memory.stats()
        assert list(pg.iter_records()) == [row.record for row in oracle.rows]
        for w in {r.work_item_id for r in records if isinstance(r, WorkItem)}:
            assert pg.work_item_state(w, end) == memory.work_item_state(w, end)
        assert pg.open_waits(end) == memory.open_waits(end)
    finally:
        pg.close()


# -- SQLite only ------------------------------------------------------------------------------
def _meta(path: Path) -> dict[str, str]:
    with sqlite3.connect(path) as db:
        return dict(db.execute("SELECT key, value FROM meta").fetchall())


def test_schema_version_is_recorded(tmp_path: Path) -> None:
    """A new database records the current schema version, and the key its high-turn index was
    built under, in its meta table."""
    SqliteStore(tmp_path / "l.db").close()
    assert _meta(tmp_path / "l.db") == {"schema_version": str(SCHEMA_VERSION),
                                        "high_index": HIGH_INDEX_KEY}


def test_every_version_has_a_migration() -> None:
    """There is a migration from each version below the current one, starting at 0 (empty)."""
    assert sorted(_MIGRATIONS) == list(range(SCHEMA_VERSION))


def test_empty_file_migrates_from_v0(tmp_path: Path) -> None:
    """An existing empty file (version 0) is migrated to the current schema and is usable."""
    path = tmp_path / "l.db"
    path.touch()
    store = SqliteStore(path)
    assert store.append(LEDGER) == END
    store.close()
    assert _meta(path) == {"schema_version": str(SCHEMA_VERSION), "high_index": HIGH_INDEX_KEY}


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    """A database from a newer holon-ctx raises StoreError instead of being misread."""
    path = tmp_path / "l.db"
    SqliteStore(path).close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION + 1),))
    with pytest.raises(StoreError) as info:
        SqliteStore(path)
    assert str(info.value) == (f"{path}: schema version {SCHEMA_VERSION + 1} is newer than this "
                               f"holon-ctx supports ({SCHEMA_VERSION}); upgrade holon-ctx")


def test_foreign_sqlite_database_is_refused(tmp_path: Path) -> None:
    """An SQLite file that is not a holon-ctx ledger raises StoreError and is left as it was."""
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE users (name TEXT)")
    with pytest.raises(StoreError) as info:
        SqliteStore(path)
    assert str(info.value) == f"{path}: an SQLite database, but not a holon-ctx ledger"
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT name FROM sqlite_master").fetchall() == [("users",)]


@pytest.mark.parametrize("content", [
    b"this is not a database at all, just text that is long enough " * 20,
    b"SQLite format 3\x00" + b"\xff" * 4080,
], ids=["text", "bad-header"])
def test_corrupt_file_is_refused(tmp_path: Path, content: bytes) -> None:
    """A file that is not a valid SQLite database raises StoreError naming the file."""
    path = tmp_path / "l.db"
    path.write_bytes(content)
    with pytest.raises(StoreError) as info:
        SqliteStore(path)
    assert str(info.value).startswith(f"{path}: not a usable holon-ctx database (")


def _fixed_reads(store: LedgerStore) -> list[Any]:
    return [*_reads(store, LEDGER, list(range(END + 1))),
            [store.get(record_ref(r)) for r in LEDGER], store.stats(), list(store.iter_records())]


def test_rebuild_derived_reproduces_reads(tmp_path: Path) -> None:
    """Dropping and rebuilding every derived table gives exactly the same answers."""
    store = SqliteStore(tmp_path / "l.db")
    store.append(LEDGER)
    before = _fixed_reads(store)
    for table in ("turns", "token_counts", "work_item_states", "wait_states", "high_turns"):
        store._db.execute(f"DELETE FROM {table}")
    assert _fixed_reads(store) != before
    store.rebuild_derived()
    assert _fixed_reads(store) == before
    store.close()


@pytest.mark.parametrize("stale", ["stale", "0000", HIGH_INDEX_KEY[:-1], HIGH_INDEX_KEY + "0"])
def test_high_index_is_rebuilt_when_its_key_changes(tmp_path: Path, stale: str) -> None:
    """An index built under other retention facts (another HIGH_INDEX_KEY, or none: a v1 file) is
    rebuilt from the records on open, giving the same answers as one kept at append time —
    whichever way the stale key sorts against today's (above, below, a prefix of it, longer)."""
    path = tmp_path / "l.db"
    store = SqliteStore(path)
    store.append(HIGH_LEDGER)
    expected = [refs(store.high_turns_before(99, 10, limit)) for limit in range(10)]
    store._db.execute("DELETE FROM high_turns")
    store._db.execute("UPDATE meta SET value=? WHERE key='high_index'", (stale,))
    store.close()
    again = SqliteStore(path)
    assert [refs(again.high_turns_before(99, 10, limit)) for limit in range(10)] == expected
    assert _meta(path)["high_index"] == HIGH_INDEX_KEY
    again.close()


def test_a_version_1_database_migrates_and_indexes_its_high_turns(tmp_path: Path) -> None:
    """A schema-1 ledger (no high_turns table, no key) opens as the current version with its
    index built."""
    path = tmp_path / "v1.db"
    store = SqliteStore(path)
    store.append(HIGH_LEDGER)
    store.close()
    with sqlite3.connect(path) as db:
        db.execute("DROP TABLE high_turns")
        db.execute("DROP TABLE calls")
        db.execute("DELETE FROM meta WHERE key='high_index'")
        db.execute("UPDATE meta SET value='1' WHERE key='schema_version'")
    again = SqliteStore(path)
    assert refs(again.high_turns_before(99, 10, len(HIGH_LEDGER))) == [
        "turn:h3", "turn:h2", "turn:h1"]
    again.close()
    assert _meta(path) == {"schema_version": str(SCHEMA_VERSION), "high_index": HIGH_INDEX_KEY}


def test_other_counter_recomputes_and_keeps_foreign_counts(tmp_path: Path) -> None:
    """Opened with another counter, the store recounts rather than trusting stored counts."""
    path = tmp_path / "l.db"
    store = SqliteStore(path)
    store.append(LEDGER)
    tiktoken_stats = store.stats()
    store.close()

    fake = SqliteStore(path, CharCounter())
    assert fake.counter_identity == "fake:chars"
    assert fake.get("message:m1").tokens == len("修复 CI，然后部署 🚀\n")  # type: ignore[union-attr]
    assert [r.tokens for r in fake.records_of_turns(0, 99, END)] == [
        len(record_body(r)) for r in LEDGER if getattr(r, "turn_id", None)]
    stats = fake.stats()
    assert stats.counter == "fake:chars"
    assert stats.tokens_by_kind == {k: sum(len(record_body(r)) for r in LEDGER
                                           if record_ref(r).startswith(k + ":"))
                                    for k in tiktoken_stats.records_by_kind}
    fake.close()
    # Reading under another counter wrote nothing: the original counts are still there.
    store = SqliteStore(path)
    assert store.stats() == tiktoken_stats
    store.close()

    # rebuild_derived persists counts under the store's own counter, with the same totals.
    fake = SqliteStore(path, CharCounter())
    fake.rebuild_derived()
    assert fake.stats() == stats
    assert fake._db.execute("SELECT DISTINCT counter FROM token_counts").fetchall() == [
        ("fake:chars",)]
    fake.close()


#: Each read, and the index its first lookup must use (what makes it O(window), not O(history)).
READS: dict[str, tuple[Callable[[SqliteStore], object], str]] = {
    "get": (lambda s: s.get("message:m1"), "INDEX sqlite_autoindex_records_1 (ref=?)"),
    "turn": (lambda s: s.turn("t2"), "INDEX sqlite_autoindex_records_1 (ref=?)"),
    "next_turn_pos": (lambda s: s.next_turn_pos(12), "INTEGER PRIMARY KEY (rowid>?)"),
    "latest_turn": (lambda s: s.latest_turn(15), "COVERING INDEX sqlite_autoindex_turns_2 (pos<?)"),
    "turns_before": (lambda s: s.turns_before(21, 3, END), "INTEGER PRIMARY KEY (rowid<?)"),
    "records_of_turns": (lambda s: s.records_of_turns(10, 13, END),
                         "INDEX records_by_turn (turn_seq>? AND turn_seq<?)"),
    "latest_operator_turn": (lambda s: s.latest_operator_turn(21, END),
                             "INDEX turns_intent (seq<?)"),
    "high_turns_before": (lambda s: s.high_turns_before(21, 3, END),
                          "INTEGER PRIMARY KEY (rowid<?)"),
    "work_item_state": (lambda s: s.work_item_state("wi1", END),
                        "INDEX work_item_states_by_id (work_item_id=? AND pos<?)"),
    "open_waits": (lambda s: s.open_waits(END),
                   "COVERING INDEX wait_states_by_id (wait_id=? AND pos<?)"),
    "latest_environment": (lambda s: s.latest_environment(END),
                           "INDEX records_env_pin (kind=? AND pos<?)"),
    "pins": (lambda s: s.pins(END, 2), "INDEX records_env_pin (kind=? AND pos<?)"),
    "waiting_calls": (lambda s: s.waiting_calls(), "USING INDEX calls_waiting"),
    "call_record": (lambda s: s.call_record("c1"), "PRIMARY KEY (call_id=?)"),
}
#: The only plans allowed to visit more than the rows asked for, and why. ``open_waits`` scans the
#: wait transitions (not the records): O(waits ever opened), a known cost, see RFC 0001.
ALLOWED_SCANS = {("open_waits", "SCAN w"), ("open_waits", "CORRELATED SCALAR SUBQUERY 1"),
                 ("records_of_turns", "USE TEMP B-TREE FOR ORDER BY"),
                 # The partial index holds only the calls still waiting (RFC 0008 decision 5).
                 ("waiting_calls", "SCAN calls USING INDEX calls_waiting")}


@pytest.mark.parametrize("read", READS, ids=READS)
def test_reads_are_index_searches(read: str, tmp_path: Path) -> None:
    """Every SQLite read searches the index meant for it, never scanning or sorting the history."""
    store = SqliteStore(tmp_path / "l.db")
    store.append(LEDGER)
    call, index = READS[read]
    statements: list[str] = []
    store._db.set_trace_callback(statements.append)
    call(store)
    store._db.set_trace_callback(None)
    steps = [step for sql in statements if sql not in ("BEGIN", "COMMIT")
             for _, _, _, step in store._db.execute("EXPLAIN QUERY PLAN " + sql)]
    assert any(step.endswith(index) for step in steps), steps
    for step in steps:
        assert step.startswith("SEARCH") or (read, step) in ALLOWED_SCANS, step
    store.close()


def test_close_and_reopen_keeps_everything(tmp_path: Path) -> None:
    """A closed SQLite store reopens with every record, count and derived state as it was."""
    path = tmp_path / "l.db"
    store = SqliteStore(path)
    store.append(LEDGER)
    before = _fixed_reads(store)
    store.close()
    again = SqliteStore(path)
    assert _fixed_reads(again) == before
    again.close()
