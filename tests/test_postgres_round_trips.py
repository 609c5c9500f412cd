"""PostgreSQL round trips (issue 29 item 4, RFC 0026): a small append is one statement while the
store's facts hold, and the ledger it writes is the locked append's, byte for byte; the governed
state a request reads is one round trip, and the same state as read one by one.

The one-statement path decides nothing on its own: any doubt (an unknown turn, wait or work
item, a broken rule, a duplicate ref, another writer) sends the batch down the locked path. So the
properties here append generated ledgers in small batches, some through a second store on the
same session (the other writer), and compare every table with one locked append of the same
records; and count round trips on the connection.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pg_round_trips import RoundTrips
from strategies import ledgers
from test_store_conformance import LEDGER, Oracle, _oracle_rows, _reads
from tiers import sized

import holon_ctx
from holon_ctx.compaction import GovernedControl
from holon_ctx.continuity import ContinuityStore
from holon_ctx.continuity.compaction import CompactionStep
from holon_ctx.errors import LedgerFormatError, StoreError
from holon_ctx.ledger.memory import MemoryStore
from holon_ctx.ledger.records import (
    Message,
    MessageRole,
    Pin,
    Record,
    Tool,
    ToolStatus,
    Turn,
    Wait,
    WaitStatus,
    WorkItem,
)
from holon_ctx.postgres import PostgresStore
from holon_ctx.postgres.continuity import PostgresContinuityBackend

#: Every ledger table, and the columns that say what a session holds (sid left out).
_TABLES = {
    "holon_records": "pos, ref, kind, trust, turn_seq, line",
    "holon_token_counts": "counter, pos, tokens",
    "holon_turns": "seq, id, pos, intent, work_item_id",
    "holon_work_item_states": "pos, work_item_id, state",
    "holon_wait_states": "pos, wait_id, status, state",
    "holon_high_turns": "seq, pos",
}
_keys = iter(range(1 << 30))


def _tables(store: PostgresStore) -> dict[str, list[tuple[Any, ...]]]:
    conn = store.connection
    return {table: [tuple(r) for r in conn.execute(
        f"SELECT {cols} FROM {table} WHERE sid=%s ORDER BY 1, 2", (store.sid,)).fetchall()]
        for table, cols in _TABLES.items()}


@pytest.fixture
def pg_store(pg_url: str, pg_session_key: str) -> Iterator[PostgresStore]:
    store = PostgresStore(pg_url, session=pg_session_key)
    yield store
    store.close()


def _turn(seq: int) -> list[Record]:
    return [Turn(id=f"n{seq}", seq=seq, trigger="operator_input"),
            Message(id=f"nm{seq}", turn_id=f"n{seq}", role=MessageRole.OPERATOR, text="go on")]


def test_an_append_after_the_stores_own_is_one_round_trip(pg_store: PostgresStore) -> None:
    """Once the store has appended (and learned the ledger's end), each further small append by
    it is one statement: the records, their derived rows and the new end together."""
    pg_store.append(LEDGER)
    trips = RoundTrips(pg_store.connection)
    for seq in range(100, 110):
        before = trips.count
        pg_store.append(_turn(seq))
        pg_store.append([Tool(id=f"x{seq}", turn_id=f"n{seq}", tool_name="shell",
                              status=ToolStatus.OK, output="ok")])
        assert trips.count - before == 2
    assert pg_store.end_pos() == len(LEDGER) + 30


def test_a_locked_appends_round_trips_do_not_grow_with_its_records(pg_url: str) -> None:
    """The locked path buffers a batch's rows and sends them together (a prefetch and an insert
    per chunk of the batch, then the end): a first append of 400 records costs the round trips of
    one of 100 (both past the few rows sent in one pipeline: COPY per table). A buffer flushed
    at every row (its size check inverted) costs one per record."""
    counts = []
    for size in (100, 400):
        store = PostgresStore(pg_url, session=f"locked-trips-{size}-{next(_keys)}")
        try:
            records: list[Record] = [Turn(id="t", seq=1, trigger="operator_input"), *(
                Message(id=f"m{i}", turn_id="t", role=MessageRole.ASSISTANT, text=f"step {i}")
                for i in range(size - 1))]
            trips = RoundTrips(store.connection)
            store.append(records)
            counts.append(trips.count)
            assert store.end_pos() == size
        finally:
            store.close()
    assert counts[0] == counts[1], counts


def test_another_writer_sends_the_next_append_down_the_locked_path(pg_url: str,
                                                                   pg_store: PostgresStore) -> None:
    """A second store appends to the same session: the first store's next append finds the end
    moved, writes nothing in its one statement, and appends under the lock after the other's."""
    pg_store.append(LEDGER)
    other = PostgresStore(pg_url, session=pg_store.session, create=False)
    try:
        other.append(_turn(100))
        pg_store.append(_turn(101))
        assert [r.ref for r in pg_store.records_between(len(LEDGER), len(LEDGER) + 4)] == [
            "turn:n100", "message:nm100", "turn:n101", "message:nm101"]
        # A stale turn number is the locked path's error, as before: not a silent overwrite.
        with pytest.raises(LedgerFormatError, match="sequence goes backwards"):
            other.append([Turn(id="late", seq=101, trigger="operator_input")])
    finally:
        other.close()


@pytest.mark.parametrize(("bad", "message"), [
    ([Turn(id="t1", seq=500, trigger="operator_input")], "duplicate id: turn:t1"),
    ([Pin(id="p9", turn_id="t5", target="message:nope")], "pin target 'message:nope'"),
    ([Wait(id="wt9", wait_id="never", status=WaitStatus.RESOLVED, turn_id="t5")],
     "was never opened"),
    ([Message(id="m9", turn_id="t404", role=MessageRole.ASSISTANT, text="x")], "no turn 't404'"),
])
def test_a_bad_batch_gets_the_locked_paths_error_and_writes_nothing(
        pg_store: PostgresStore, bad: list[Record], message: str) -> None:
    """What the one-statement path cannot vouch for, the locked path decides: same error as a
    store that never appended, nothing written."""
    pg_store.append(LEDGER)
    before = _tables(pg_store)
    with pytest.raises(LedgerFormatError, match=message):
        pg_store.append(bad)
    assert _tables(pg_store) == before
    pg_store.append(_turn(100))
    assert pg_store.end_pos() == len(LEDGER) + 2


def _split(records: list[Record], cuts: list[int]) -> list[list[Record]]:
    bounds = sorted({0, len(records), *(c % (len(records) + 1) for c in cuts)})
    return [records[a:b] for a, b in itertools.pairwise(bounds) if b > a]


@settings(max_examples=sized(12, 40), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(records=ledgers(1, 12), cuts=st.lists(st.integers(0, 200), max_size=12),
       others=st.lists(st.booleans(), max_size=13))
def test_small_batches_write_what_one_locked_batch_writes(
        pg_url: str, records: list[Record], cuts: list[int], others: list[bool]) -> None:
    """A generated ledger appended in small batches, some by another store on the same session,
    holds exactly the rows of the same records appended at once, and reads as the oracle says."""
    whole = PostgresStore(pg_url, session=f"whole-{next(_keys)}")
    key = f"parts-{next(_keys)}"
    mine = PostgresStore(pg_url, session=key)
    other = PostgresStore(pg_url, session=key, create=False)
    try:
        whole.append(records)
        for i, batch in enumerate(_split(records, cuts)):
            (other if i < len(others) and others[i] else mine).append(batch)
        assert _tables(mine) == _tables(whole)
        end = len(records)
        assert _reads(mine, records, [0, end]) == _reads(Oracle(_oracle_rows(records)), records,
                                                        [0, end])
        memory = MemoryStore()
        memory.append(records)
        assert mine.open_waits(end) == memory.open_waits(end)
        for w in {r.work_item_id for r in records if isinstance(r, WorkItem)}:
            assert mine.work_item_state(w, end) == memory.work_item_state(w, end)
    finally:
        for store in (whole, mine, other):
            store.close()


def test_durable_commits_are_a_choice_on_a_connection_the_store_opens(pg_url: str,
                                                                      pg_session_key: str) -> None:
    """By default the store's own connection keeps the server's setting (a commit waits for the
    disk: an acknowledged append survives a server crash); durable=False turns that off on the
    store's own connection only; a borrowed connection is the caller's, untouched."""
    import psycopg

    def setting(store: PostgresStore) -> str:
        return str(store.connection.execute("SHOW synchronous_commit").fetchone()[0])

    fast = PostgresStore(pg_url, session=pg_session_key, durable=False)
    durable = PostgresStore(pg_url, session=pg_session_key)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        server = str(conn.execute("SHOW synchronous_commit").fetchone()[0])
        borrowed = PostgresStore(conn, session=pg_session_key)
        try:
            assert setting(fast) == "off"
            assert setting(durable) == server == "on"
            assert setting(borrowed) == server
        finally:
            for store in (fast, durable, borrowed):
                store.close()


@pytest.mark.parametrize("backend", ["memory", "postgres"])
def test_the_latest_envelope_is_read_newest_first(backend: str, pg_url: str,
                                                  pg_session_key: str) -> None:
    """The newest envelope whose compaction finished: found from the newest end in a few reads
    however many envelopes the session sealed (it is read before every request); incomplete
    ones and other sessions' are passed over."""
    store = (ContinuityStore(PostgresContinuityBackend(pg_url, session=pg_session_key))
             if backend == "postgres" else ContinuityStore.in_memory())
    at = "2026-12-01T00:00:00.000000Z"
    done = CompactionStep.COMPACTION_EVENT.value
    raw = store.backend
    try:
        assert store.latest_envelope("s1") is None
        for i in range(30):
            raw.append_envelope(f"ce-{i}", "s1", f"body {i}".encode(), at)
            raw.append_step(f"ce-{i}", "boundary", b"{}", at)
            if i % 10 == 3:
                raw.append_step(f"ce-{i}", done, b"{}", at)
        raw.append_envelope("ce-other", "s2", b"other", at)
        raw.append_step("ce-other", done, b"{}", at)
        assert store.complete_envelope_ids("s1") == ("ce-3", "ce-13", "ce-23")
        reads: list[str] = []
        for name in ("envelope_ids", "steps", "envelope"):
            inner = getattr(raw, name)

            def spy(*args: Any, _inner: Any = inner, _name: str = name) -> Any:
                reads.append(_name)
                return _inner(*args)

            setattr(raw, name, spy)
        with pytest.raises(StoreError, match="'ce-23' does not validate"):
            store.latest_envelope("s1")  # the bodies here are not envelopes
        # The ids, the steps of the newest seven (six incomplete), the body: not 30 step reads.
        assert reads == ["envelope_ids", *["steps"] * 7, "envelope"]
    finally:
        store.close()


def _governed_session(pg_url: str, key: str) -> holon_ctx.Session:
    """A PostgreSQL session whose sealed envelope carries an obligation (a call left pending),
    a constraint (a pin) and a side effect to reconcile (an unknown outcome)."""
    session = holon_ctx.open_session(PostgresStore(pg_url, session=key))
    session.operator_message("Deploy the billing fix, and never touch the ledger schema.")
    session.pin(session.current_turn or "", "the operator's rule")
    session.assistant_message("Deploying.", tool_calls=[holon_ctx.ToolCall("c1", "deploy", {})])
    session.tool_result("c1", "timed out", status="timeout", side_effect="unknown")
    session.assistant_message("Checking.", tool_calls=[holon_ctx.ToolCall("c2", "bash", {})])
    for k in range(40):
        session.operator_message(f"Next request {k}: look at module_{k} and report.")
        session.assistant_message(f"Module {k} looks fine.")
    assert session.compact().envelope_id is not None
    return session


@pytest.mark.parametrize("crashed", [0, 2, 6])
def test_the_control_state_is_one_round_trip_and_the_same_state(pg_url: str, pg_session_key: str,
                                                                crashed: int) -> None:
    """What a request states from the governed store (the newest complete envelope, open
    obligations, constraints, side effects to reconcile) is read in one round trip, and equals
    the reads made one by one — also behind compactions that crashed before completing (more
    of them than are read ahead, too)."""
    session = _governed_session(pg_url, pg_session_key)
    store = PostgresStore(pg_url, session=pg_session_key, create=False)
    backend = PostgresContinuityBackend(store.connection, session=pg_session_key, create=False)
    governed = ContinuityStore(backend)
    try:
        at = "2099-01-01T00:00:00.000000Z"
        for i in range(crashed):
            backend.append_envelope(f"crashed-{i}", "session-local", b"{}", at)
            backend.append_step(f"crashed-{i}", "boundary", b"{}", at)
        control = GovernedControl(governed, "session-local")
        trips = RoundTrips(store.connection)
        state = control.control_state()
        # One read ahead; behind more crashed compactions than it reads, their steps one by one
        # and the complete envelope's body.
        assert trips.count == (1 if crashed < 4 else 1 + (crashed - 4 + 1) + 1)
        assert state is not None
        one_by_one = (governed.latest_envelope("session-local"),
                      governed.open_obligations("session-local"),
                      governed.constraints("session-local"),
                      governed.unresolved_side_effects("session-local"))
        envelope, obligations, constraints, effects = one_by_one
        assert envelope is not None
        assert state.envelope_id == envelope.envelope_id
        assert obligations
        assert state.obligations == obligations
        assert constraints
        assert state.constraints == tuple((c.ref, c.text) for c in constraints)
        assert effects
        assert state.blocking == tuple((e.idempotency_key, e.status.value) for e in effects)
    finally:
        governed.close()
        store.close()
        session.close()


def test_a_governed_write_is_one_round_trip(pg_url: str, pg_session_key: str) -> None:
    """Each write of the governed store (with the latest-time mark it keeps) is one statement,
    committed on its own; a duplicate is still refused whole."""
    from holon_ctx.continuity.exceptions import DuplicateRecordError

    backend = PostgresContinuityBackend(pg_url, session=pg_session_key)
    at = "2026-12-01T00:00:00.000000Z"
    try:
        trips = RoundTrips(backend._h.conn)  # the backend's own connection
        backend.append_fact("policy", "t1", "t1", b"{}", at)
        backend.append_envelope("ce-1", "s1", b"{}", at)
        backend.append_step("ce-1", "boundary", b"{}", at)
        seq = backend.append_event("context_compaction", "ce-1", "s1", b"{}", at)
        assert trips.count == 4
        assert [e.seq for e in backend.events(envelope_id="ce-1", session_id="s1")] == [seq]
        with pytest.raises(DuplicateRecordError):
            backend.append_envelope("ce-1", "s1", b"{}", "2026-12-02T00:00:00.000000Z")
        assert backend.last_recorded_at() == at
        assert backend.envelope_ids("s1") == ["ce-1"]
    finally:
        backend.close()


def test_a_sessions_turn_is_one_round_trip_per_helper_and_one_per_request(
        pg_url: str, pg_session_key: str) -> None:
    """The real turn's round trips on PostgreSQL (issue 29): a helper appends where its
    session's own last append left the ledger, its ids minted unchecked, in one statement (it
    read the end and looked up each new id first: 7 round trips for a reply, its tool call and
    the result, now 2); a request that neither compacts nor re-plans reads, in one pipeline
    (RFC 0026 decision 8), the end, the usage, the governed envelope ids, the newest episode
    visible at the end (its moment, RFC 0020), the records since the last request and the
    newest operator turn its new turns continue: 8 or 9 round trips one after the other before
    (measured 2026-12-04), 1 now; the first request of a session, with no walk kept to read
    from, reads its records apart (2). Nothing sealed yet: no control snapshot is read (it
    was a round trip more per request)."""
    from holon_ctx.session_upkeep import CompactionPolicy

    store = PostgresStore(pg_url, session=pg_session_key)
    # Compaction out of the way (its round trips are its own); the governed store still read.
    session = holon_ctx.open_session(store, compaction=CompactionPolicy(
        every_turns=10_000, binding_turns=10_000))
    try:
        session.operator_message("Fix the failing test in tests/test_billing.py.")
        session.compact()
        trips = RoundTrips(store.connection)
        appends, requests = [], []
        for k in range(12):
            before = trips.count
            session.assistant_message(f"Step {k}.", tool_calls=[
                holon_ctx.ToolCall(f"c{k}", "bash", f"pytest -q -k case_{k}")])
            session.tool_result(f"c{k}", f"case_{k} PASSED\n" * 20)
            appends.append(trips.count - before)
            before = trips.count
            request = session.next_request(32_768)
            request.openai_messages  # noqa: B018 - what a runtime reads
            if not request._messages.replanned:
                requests.append(trips.count - before)
        assert appends == [2] * 12
        assert len(requests) >= 6
        assert requests[0] <= 2, requests
        assert set(requests[1:]) == {1}, requests
    finally:
        session.close()
        store.close()


#: Content PostgreSQL's json and text types handle apart (NUL, escapes, separators, surrogate
#: pairs, combining marks, megabytes) and numbers at their edges: through the JSON rows of the
#: one-statement append, each record's stored line must be SQLite's, byte for byte.
_HOSTILE = ["a\x00b", "\\u0000 \\\\ \" '", "\u2028\u2029\r\n\t", "", "e\u0301 \u00e9 \U0001f600",
            "x\\\"\x00" * 300_000]


def test_hostile_content_through_the_one_statement_append_is_sqlites_bytes(
        pg_store: PostgresStore, tmp_path: Any) -> None:
    """NUL (which PostgreSQL text and json cannot hold as text), escapes, line separators,
    astral and combining characters, 1.2 MB of quotes, backslashes and NULs (3.3 MB as a ledger
    line, under its 4 MiB limit), a turn numbered at int64's top and a tool's 32-bit exit
    status: appended one statement at a time (the rows go as JSON, bytea in base64), every line
    and derived row reads back as SQLite stores it."""
    import io

    from holon_ctx.ledger.importer import export_jsonl
    from holon_ctx.ledger.sqlite import SqliteStore

    batches: list[list[Record]] = [_turn(0)]
    for i, text in enumerate(_HOSTILE):
        batches.append([Message(id=f"h{i}", turn_id="n0", role=MessageRole.ASSISTANT, text=text),
                        Tool(id=f"hx{i}", turn_id="n0", tool_name="shell", output=text,
                             status=ToolStatus.ERROR, exit_code=2**32 - 1)])
    top = 2**63 - 1
    batches.append([Turn(id="top", seq=top, trigger="operator_input", work_item_id="w\u00e9"),
                    Message(id="top.m", turn_id="top", role=MessageRole.OPERATOR, text="")])
    sqlite = SqliteStore(str(tmp_path / "ledger.db"))
    pg_store.append(batches[0])
    sqlite.append(batches[0])
    trips = RoundTrips(pg_store.connection)
    for batch in batches[1:]:
        before = trips.count
        pg_store.append(batch)
        assert trips.count - before == 1  # the one-statement path, not the locked one
        sqlite.append(batch)
    exported = []
    for store in (pg_store, sqlite):
        out = io.BytesIO()
        export_jsonl(store, out)
        exported.append(out.getvalue())
    assert exported[0] == exported[1]
    end = pg_store.end_pos()
    assert [s.record for s in pg_store.records_between(0, end)] == [
        s.record for s in sqlite.records_between(0, end)]
    assert pg_store.latest_turn(end) is not None
    assert pg_store.latest_turn(end).record.seq == top  # type: ignore[union-attr]
    sqlite.close()
