"""The PostgreSQL schema: versioned migrations, and the sessions that partition it.

One database holds many ledgers. ``holon_sessions`` names each (its ``key``, chosen by the
runtime) and numbers it (``sid``); every other table leads with ``sid``, in its primary key and in
every index, so a session's reads never touch another's rows and deleting a session is a handful
of index-range deletes. The session row is also the ledger's append lock and position counter:
an append takes it ``FOR UPDATE`` first (RFC 0009).

Tables mirror the SQLite stores' (RFC 0001, 0003, 0004) with ``sid`` in front and a ``holon_``
prefix, so a database shared with an application cannot collide with it. Versions:
``holon_meta.schema_version``; ``MIGRATIONS[n]`` upgrades version ``n`` to ``n + 1`` (0 is "no
holon tables yet"), all in one transaction under an advisory lock, so processes of a fleet that
start at once migrate exactly once and the others wait, then see the new version.

Version 2 adds ``holon_high_turns``, the derived index of turns marked high by a retention fact
(:mod:`holon_ctx.ledger.facts`; RFC 0002, decision 8). Which records mark a turn is Python
(``marks_high``), so the index is (re)built by :func:`rebuild_high_turns` — after the migration,
and whenever ``holon_meta.high_index`` differs from ``facts.HIGH_INDEX_KEY`` — under the same lock.
Version 3 drops the statistics on ``sid`` (see ``_V3_STATISTICS``). Version 4 adds the session
projection's re-plan state (RFC 0010; :mod:`holon_ctx.postgres.epochs`): ``holon_session_epochs``
and ``holon_session_state``, the SQLite store's ``session_epochs`` and ``session_state`` with
``sid`` in front. Derived data: a migration that had to drop them would lose nothing the ledger
cannot rebuild. Version 5 adds ``holon_usage``, the usage observations a session records
(RFC 0022; :mod:`holon_ctx.postgres.usage`): the provider's reported input tokens beside the
estimate, which calibration reads by model and ``replay`` / ``explain`` by turn. Version 6 adds
``holon_episodes_runs``, the ledger position each archive run read up to (RFC 0020). Version 7
adds ``holon_episodes_forms``, the token counts of each episode's rendered forms stored when it is
archived (RFC 0024 decision 6; :mod:`holon_ctx.memory.index`): derived, as the episodes are.
Version 8 adds ``holon_calls``, each tool call's newest record (position and state), written by
every append and filled from the records of existing sessions when it migrates
(:func:`rebuild_calls`; RFC 0008 decision 5, :mod:`holon_ctx.ledger.calls`): derived.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

import attrs
import msgspec

from holon_ctx.errors import StoreError, quote_value
from holon_ctx.ledger.calls import call_marks
from holon_ctx.ledger.facts import HIGH_INDEX_KEY, marks_high
from holon_ctx.ledger.records import Record

__all__ = ["SCHEMA_VERSION", "SESSION_TABLES", "SessionInfo", "check_session_key",
           "create_session", "delete_session", "ensure_schema", "find_session", "list_sessions",
           "schema_version"]

SCHEMA_VERSION: Final = 8
#: Key of the transaction-level advisory lock that serialises migrations (arbitrary, fixed).
_MIGRATION_LOCK: Final = 0x686F6C6F6E  # "holon"

_V1_LEDGER = [
    "CREATE TABLE holon_meta (key text PRIMARY KEY, value text NOT NULL)",
    """CREATE TABLE holon_sessions (
        sid bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        key text NOT NULL UNIQUE,
        end_pos bigint NOT NULL DEFAULT 0,
        created_at timestamptz NOT NULL DEFAULT now())""",
    # The truth: the canonical JSONL line of each record by position (RFC 0001).
    """CREATE TABLE holon_records (
        sid bigint NOT NULL, pos bigint NOT NULL, ref text NOT NULL, kind text NOT NULL,
        trust text NOT NULL, turn_seq bigint, line bytea NOT NULL,
        PRIMARY KEY (sid, pos))""",
    # get / has_ref; records_of_turns (partial: only owned records); latest_environment and pins
    # walk this one backwards from limit_pos instead of every record.
    "CREATE UNIQUE INDEX holon_records_ref ON holon_records (sid, ref)",
    "CREATE INDEX holon_records_by_turn ON holon_records (sid, turn_seq, pos) "
    "WHERE turn_seq IS NOT NULL",
    "CREATE INDEX holon_records_env_pin ON holon_records (sid, kind, pos) "
    "WHERE kind IN ('environment', 'pin')",
    # turns_before and next_turn_pos by seq; latest_turn walks pos back from limit_pos;
    # find_turn by id; latest_operator_turn on the partial intent index.
    """CREATE TABLE holon_turns (
        sid bigint NOT NULL, seq bigint NOT NULL, id text NOT NULL, pos bigint NOT NULL,
        intent boolean NOT NULL, work_item_id text, PRIMARY KEY (sid, seq))""",
    "CREATE UNIQUE INDEX holon_turns_id ON holon_turns (sid, id)",
    "CREATE UNIQUE INDEX holon_turns_pos ON holon_turns (sid, pos)",
    "CREATE INDEX holon_turns_intent ON holon_turns (sid, seq) WHERE intent",
    """CREATE TABLE holon_token_counts (
        sid bigint NOT NULL, counter text NOT NULL, pos bigint NOT NULL, tokens integer NOT NULL,
        PRIMARY KEY (sid, counter, pos))""",
    """CREATE TABLE holon_work_item_states (
        sid bigint NOT NULL, pos bigint NOT NULL, work_item_id text NOT NULL, state bytea NOT NULL,
        PRIMARY KEY (sid, pos))""",
    "CREATE INDEX holon_work_item_states_by_id ON holon_work_item_states (sid, work_item_id, pos)",
    """CREATE TABLE holon_wait_states (
        sid bigint NOT NULL, pos bigint NOT NULL, wait_id text NOT NULL, status text NOT NULL,
        state bytea NOT NULL, PRIMARY KEY (sid, pos))""",
    "CREATE INDEX holon_wait_states_by_id ON holon_wait_states (sid, wait_id, pos)",
]

_V1_EPISODES = [
    """CREATE TABLE holon_episodes_meta (
        sid bigint NOT NULL, key text NOT NULL, value text NOT NULL, PRIMARY KEY (sid, key))""",
    """CREATE TABLE holon_episodes (
        sid bigint NOT NULL, num bigint NOT NULL, id text NOT NULL, first_seq bigint NOT NULL,
        last_seq bigint NOT NULL, owner text NOT NULL, digest text NOT NULL,
        length bigint NOT NULL, body bytea NOT NULL, PRIMARY KEY (sid, num))""",
    "CREATE UNIQUE INDEX holon_episodes_id ON holon_episodes (sid, id)",
    "CREATE INDEX holon_episodes_by_last ON holon_episodes (sid, last_seq)",
    "CREATE INDEX holon_episodes_by_owner ON holon_episodes (sid, owner, num)",
    """CREATE TABLE holon_episodes_turns (
        sid bigint NOT NULL, turn_id text NOT NULL, num bigint NOT NULL,
        PRIMARY KEY (sid, turn_id))""",
    """CREATE TABLE holon_episodes_terms (
        sid bigint NOT NULL, term text NOT NULL, df bigint NOT NULL, blocks integer NOT NULL,
        PRIMARY KEY (sid, term))""",
    """CREATE TABLE holon_episodes_postings (
        sid bigint NOT NULL, term text NOT NULL, block integer NOT NULL,
        first_num bigint NOT NULL, n integer NOT NULL, data bytea NOT NULL,
        PRIMARY KEY (sid, term, block))""",
    """CREATE TABLE holon_episodes_links (
        sid bigint NOT NULL, key text NOT NULL, num bigint NOT NULL, PRIMARY KEY (sid, key, num))""",
    """CREATE TABLE holon_episodes_open (
        sid bigint NOT NULL, num bigint NOT NULL, key text NOT NULL, kind text NOT NULL,
        pinned boolean NOT NULL, last_seq bigint NOT NULL, episode_id text NOT NULL,
        resolved_pos bigint, exact boolean NOT NULL DEFAULT false, PRIMARY KEY (sid, num, key))""",
    "CREATE INDEX holon_episodes_open_live ON holon_episodes_open (sid, pinned, num) "
    "WHERE resolved_pos IS NULL",
    "CREATE INDEX holon_episodes_open_resolved ON holon_episodes_open (sid, resolved_pos) "
    "WHERE resolved_pos IS NOT NULL",
    """CREATE TABLE holon_episodes_recaps (
        sid bigint NOT NULL, rid bigint GENERATED ALWAYS AS IDENTITY, episode_id text NOT NULL,
        digest text NOT NULL, body bytea NOT NULL, PRIMARY KEY (sid, rid))""",
    "CREATE INDEX holon_episodes_recaps_by_id ON holon_episodes_recaps (sid, episode_id, rid)",
]

_CONTINUITY_APPEND_ONLY = ("holon_continuity_envelopes", "holon_continuity_journal",
                           "holon_continuity_events")
_V1_CONTINUITY = [
    """CREATE TABLE holon_continuity_meta (
        sid bigint NOT NULL, key text NOT NULL, value text NOT NULL, PRIMARY KEY (sid, key))""",
    """CREATE TABLE holon_continuity_facts (
        sid bigint NOT NULL, seq bigint GENERATED ALWAYS AS IDENTITY, kind text NOT NULL,
        key text NOT NULL, scope text NOT NULL, body bytea NOT NULL, recorded_at text NOT NULL,
        PRIMARY KEY (sid, seq))""",
    "CREATE INDEX holon_continuity_facts_by_key ON holon_continuity_facts (sid, kind, key, seq)",
    "CREATE INDEX holon_continuity_facts_by_scope ON holon_continuity_facts (sid, kind, scope, seq)",
    """CREATE TABLE holon_continuity_envelopes (
        sid bigint NOT NULL, seq bigint GENERATED ALWAYS AS IDENTITY, envelope_id text NOT NULL,
        session_id text NOT NULL, body bytea NOT NULL, recorded_at text NOT NULL,
        PRIMARY KEY (sid, seq), UNIQUE (sid, envelope_id))""",
    "CREATE INDEX holon_continuity_envelopes_by_session "
    "ON holon_continuity_envelopes (sid, session_id, seq)",
    """CREATE TABLE holon_continuity_journal (
        sid bigint NOT NULL, envelope_id text NOT NULL, step text NOT NULL, body bytea NOT NULL,
        recorded_at text NOT NULL, PRIMARY KEY (sid, envelope_id, step))""",
    """CREATE TABLE holon_continuity_events (
        sid bigint NOT NULL, seq bigint GENERATED ALWAYS AS IDENTITY, event_type text NOT NULL,
        envelope_id text NOT NULL, session_id text NOT NULL, payload bytea NOT NULL,
        recorded_at text NOT NULL, PRIMARY KEY (sid, seq))""",
    "CREATE INDEX holon_continuity_events_by_envelope "
    "ON holon_continuity_events (sid, envelope_id, seq)",
    "CREATE INDEX holon_continuity_events_by_session "
    "ON holon_continuity_events (sid, session_id, seq)",
    # As in SQLite, a guard against accidental rewrites, not a security boundary. Deleting a whole
    # session is the one deletion allowed, and says so with a transaction-local setting.
    """CREATE FUNCTION holon_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'DELETE' AND current_setting('holon_ctx.deleting_session', true) = 'on' THEN
            RETURN OLD;
        END IF;
        RAISE EXCEPTION '% is append-only', TG_TABLE_NAME;
    END $$""",
    *(f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} "
      "FOR EACH ROW EXECUTE FUNCTION holon_append_only()" for table in _CONTINUITY_APPEND_ONLY),
]

_V2_HIGH_TURNS = [
    # Each turn marked high, with the position of the first record that marked it.
    """CREATE TABLE holon_high_turns (
        sid bigint NOT NULL, seq bigint NOT NULL, pos bigint NOT NULL, PRIMARY KEY (sid, seq))""",
]

#: The session tables of versions 1 and 2 (version 3 drops their statistics on sid).
_V2_SESSION_TABLES: Final = (
    "holon_records", "holon_turns", "holon_token_counts", "holon_work_item_states",
    "holon_wait_states", "holon_high_turns", "holon_episodes_meta", "holon_episodes",
    "holon_episodes_turns", "holon_episodes_terms", "holon_episodes_postings",
    "holon_episodes_links", "holon_episodes_open", "holon_episodes_recaps",
    "holon_continuity_meta", "holon_continuity_facts", "holon_continuity_envelopes",
    "holon_continuity_journal", "holon_continuity_events",
)

# No statistics on `sid`: with them, a session newer than the last ANALYZE (every new session of a
# fleet) is estimated at a row or two, and the planner then walks the whole session on whichever
# index starts with sid (a 240k-record session: 0.4 s for a ref lookup, seconds per projection).
# Without them every session looks alike and the plan is chosen by the other conditions.
_V3_STATISTICS = [f"ALTER TABLE {table} ALTER COLUMN sid SET STATISTICS 0"
                  for table in _V2_SESSION_TABLES]

_V4_SESSION_TABLES: Final = ("holon_session_epochs", "holon_session_state")
_V4_SESSION_PROJECTION = [
    # One row per re-plan: (key, epoch) → the epoch's start (EpochStart, msgspec JSON).
    """CREATE TABLE holon_session_epochs (
        sid bigint NOT NULL, key text NOT NULL, epoch bigint NOT NULL, start bytea NOT NULL,
        PRIMARY KEY (sid, key, epoch))""",
    # key → the latest epoch's frozen state (EpochState, msgspec JSON).
    """CREATE TABLE holon_session_state (
        sid bigint NOT NULL, key text NOT NULL, epoch bigint NOT NULL, state bytea NOT NULL,
        PRIMARY KEY (sid, key))""",
    *(f"ALTER TABLE {table} ALTER COLUMN sid SET STATISTICS 0" for table in _V4_SESSION_TABLES),
]

_V5_SESSION_TABLES: Final = ("holon_usage",)
_V5_USAGE = [
    # Usage observations (RFC 0022): the provider's reported input tokens beside the estimate,
    # appended by observe_usage (Observation, msgspec JSON); read by model and by turn.
    """CREATE TABLE holon_usage (
        sid bigint NOT NULL, seq bigint GENERATED ALWAYS AS IDENTITY, model text NOT NULL,
        turn text NOT NULL, observation bytea NOT NULL, PRIMARY KEY (sid, seq))""",
    "CREATE INDEX holon_usage_by_model ON holon_usage (sid, model, seq)",
    "CREATE INDEX holon_usage_by_turn ON holon_usage (sid, turn, seq)",
    *(f"ALTER TABLE {table} ALTER COLUMN sid SET STATISTICS 0" for table in _V5_SESSION_TABLES),
]

_V6_SESSION_TABLES: Final = ("holon_episodes_runs",)
_V6_EPISODE_RUNS = [
    # (first num, ledger position): the session's episodes from first_num on were archived with
    # the ledger at that position (RFC 0020: recall as of a position sees only those archived
    # by then). Derived, as the episodes are.
    """CREATE TABLE holon_episodes_runs (
        sid bigint NOT NULL, first_num bigint NOT NULL, pos bigint NOT NULL,
        PRIMARY KEY (sid, first_num))""",
    *(f"ALTER TABLE {table} ALTER COLUMN sid SET STATISTICS 0" for table in _V6_SESSION_TABLES),
]

_V7_SESSION_TABLES: Final = ("holon_episodes_forms",)
_V7_EPISODE_FORMS = [
    # num → the token counts of the episode's rendered forms and the counter that made them.
    """CREATE TABLE holon_episodes_forms (
        sid bigint NOT NULL, num bigint NOT NULL, counter text NOT NULL, data bytea NOT NULL,
        PRIMARY KEY (sid, num))""",
    *(f"ALTER TABLE {table} ALTER COLUMN sid SET STATISTICS 0" for table in _V7_SESSION_TABLES),
]

_V8_SESSION_TABLES: Final = ("holon_calls",)
_V8_CALLS = [
    # call_id → its newest record's position and state (announced, pending, answered); the
    # partial index holds the calls still waiting, what a session reads when it opens.
    """CREATE TABLE holon_calls (
        sid bigint NOT NULL, call_id text NOT NULL, pos bigint NOT NULL, state text NOT NULL,
        PRIMARY KEY (sid, call_id))""",
    "CREATE INDEX holon_calls_waiting ON holon_calls (sid, pos) WHERE state <> 'answered'",
    *(f"ALTER TABLE {table} ALTER COLUMN sid SET STATISTICS 0" for table in _V8_SESSION_TABLES),
]

#: Every table keyed by session: what deleting a session empties (a test checks the catalogue).
SESSION_TABLES: Final = (*_V2_SESSION_TABLES, *_V4_SESSION_TABLES, *_V5_SESSION_TABLES,
                         *_V6_SESSION_TABLES, *_V7_SESSION_TABLES, *_V8_SESSION_TABLES)

#: Migrations from version N to N+1, each a list of statements run in one transaction.
MIGRATIONS: Final[dict[int, list[str]]] = {
    0: [*_V1_LEDGER, *_V1_EPISODES, *_V1_CONTINUITY],
    1: _V2_HIGH_TURNS,
    2: _V3_STATISTICS,
    3: _V4_SESSION_PROJECTION,
    4: _V5_USAGE,
    5: _V6_EPISODE_RUNS,
    6: _V7_EPISODE_FORMS,
    7: _V8_CALLS,
}
#: The newest record wins, whatever order rows come in (each row its own statement).
UPSERT_CALL: Final = ("INSERT INTO holon_calls VALUES (%s,%s,%s,%s) ON CONFLICT (sid, call_id) "
                      "DO UPDATE SET pos = excluded.pos, state = excluded.state "
                      "WHERE holon_calls.pos < excluded.pos")


def schema_version(conn: Any, where: str) -> int:
    """The database's holon schema version (0: no holon tables)."""
    if conn.execute("SELECT to_regclass('holon_meta')").fetchone()[0] is None:
        return 0
    row = conn.execute("SELECT value FROM holon_meta WHERE key='schema_version'").fetchone()
    if row is None or not str(row[0]).isdigit():
        raise StoreError(f"{where}: holon_meta holds no schema version; not a holon-ctx schema")
    return int(row[0])


def ensure_schema(conn: Any, where: str) -> int:
    """Create or migrate the schema to :data:`SCHEMA_VERSION`; returns the version found before.

    A newer version is refused (an older holon-ctx must not misread it).
    """
    found = schema_version(conn, where)
    if found == SCHEMA_VERSION and _high_index_key(conn) == HIGH_INDEX_KEY:
        return found
    if found > SCHEMA_VERSION:
        raise StoreError(f"{where}: schema version {found} is newer than this holon-ctx supports "
                         f"({SCHEMA_VERSION}); upgrade holon-ctx")
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        found = version = schema_version(conn, where)  # another process may have migrated
        while version < SCHEMA_VERSION:
            for statement in MIGRATIONS[version]:
                conn.execute(statement)
            if version == 7:  # the calls of the sessions already there, from their records
                rebuild_calls(conn)
            version += 1
            conn.execute("INSERT INTO holon_meta VALUES ('schema_version', %s) ON CONFLICT (key) "
                         "DO UPDATE SET value = excluded.value", (str(version),))
        if _high_index_key(conn) != HIGH_INDEX_KEY:
            rebuild_high_turns(conn)
    return found


def _high_index_key(conn: Any) -> str | None:
    row = conn.execute("SELECT value FROM holon_meta WHERE key='high_index'").fetchone()
    return None if row is None else str(row[0])


_record_decoder = msgspec.json.Decoder(Record)


def rebuild_high_turns(conn: Any, sid: int | None = None) -> None:
    """Recompute ``holon_high_turns`` from the records (every session, or ``sid``'s) inside the
    caller's transaction; with every session, record the key it was built under."""
    session, args = ("sid=%s", (sid,)) if sid is not None else ("true", ())
    conn.execute(f"DELETE FROM holon_high_turns WHERE {session}", args)
    with conn.cursor(name="holon_high_turns_rebuild") as cur:
        cur.execute(f"SELECT sid, turn_seq, pos, line FROM holon_records WHERE {session} "
                    "AND turn_seq IS NOT NULL ORDER BY sid, pos", args, binary=True)
        while batch := cur.fetchmany(4096):
            rows = [(s, seq, pos) for s, seq, pos, line in batch
                    if marks_high(_record_decoder.decode(line))]
            if rows:
                with conn.cursor() as ins:
                    ins.executemany("INSERT INTO holon_high_turns VALUES (%s,%s,%s) "
                                    "ON CONFLICT (sid, seq) DO NOTHING", rows)
    if sid is None:
        conn.execute("INSERT INTO holon_meta VALUES ('high_index', %s) ON CONFLICT (key) "
                      "DO UPDATE SET value = excluded.value", (HIGH_INDEX_KEY,))


def rebuild_calls(conn: Any, sid: int | None = None) -> None:
    """Recompute ``holon_calls`` from the replies and ``tool`` records (every session, or
    ``sid``'s) inside the caller's transaction; each call's newest record is kept in memory
    until its session's records are read (a call id per entry, not its records)."""
    session, args = ("sid=%s", (sid,)) if sid is not None else ("true", ())
    conn.execute(f"DELETE FROM holon_calls WHERE {session}", args)
    newest: dict[tuple[int, str], tuple[int, str]] = {}
    with conn.cursor(name="holon_calls_rebuild") as cur:
        cur.execute(f"SELECT sid, pos, line FROM holon_records WHERE {session} "
                    "AND kind IN ('message', 'tool') ORDER BY sid, pos", args, binary=True)
        while batch := cur.fetchmany(4096):
            for s, pos, line in batch:
                for call_id, state in call_marks(_record_decoder.decode(line)):
                    newest[s, call_id] = (pos, state.value)
    with conn.cursor() as ins:
        ins.executemany(UPSERT_CALL, [(s, cid, pos, state)
                                      for (s, cid), (pos, state) in newest.items()])


def check_session_key(key: str) -> str:
    if not key or len(key) > 256 or any(ord(c) < 32 or ord(c) == 127 for c in key):
        raise StoreError(f"bad session key {quote_value(key)}: 1 to 256 characters, no control characters")
    return key


def find_session(conn: Any, key: str) -> int | None:
    row = conn.execute("SELECT sid FROM holon_sessions WHERE key=%s", (key,)).fetchone()
    return None if row is None else int(row[0])


def create_session(conn: Any, key: str) -> tuple[int, bool]:
    """``(sid, created)``: the session's number, made if it did not exist (race-free)."""
    row = conn.execute("INSERT INTO holon_sessions (key) VALUES (%s) ON CONFLICT (key) DO NOTHING "
                       "RETURNING sid", (check_session_key(key),)).fetchone()
    if row is not None:
        return int(row[0]), True
    sid = find_session(conn, key)
    assert sid is not None  # it existed: ON CONFLICT skipped our insert, and sessions are
    return sid, False       # deleted only by delete_session (a race with it is the caller's)


@attrs.frozen
class SessionInfo:
    key: str
    #: Records in the session's ledger (its next position).
    records: int
    created_at: datetime


def list_sessions(conn: Any) -> list[SessionInfo]:
    rows = conn.execute("SELECT key, end_pos, created_at FROM holon_sessions ORDER BY key")
    return [SessionInfo(key=k, records=int(n), created_at=at) for k, n, at in rows.fetchall()]


def delete_session(conn: Any, key: str, *, only_if_empty: bool = False) -> bool:
    """Delete a session's ledger, episodes and governed state in one transaction; False when there
    is no such session. Waits for an append in progress (it holds the session row) to finish.

    ``only_if_empty`` keeps a session that holds any record: a failed first import removes the
    session it made only while no other writer has committed to it (RFC 0006's rule for files).
    """
    with conn.transaction():
        row = conn.execute("SELECT sid FROM holon_sessions WHERE key=%s FOR UPDATE",
                           (key,)).fetchone()
        if row is None:
            return False
        if only_if_empty and conn.execute("SELECT 1 FROM holon_records WHERE sid=%s LIMIT 1",
                                          (row[0],)).fetchone() is not None:
            return False
        conn.execute("SET LOCAL holon_ctx.deleting_session = 'on'")
        for table in SESSION_TABLES:
            conn.execute(f"DELETE FROM {table} WHERE sid=%s", (row[0],))
        conn.execute("DELETE FROM holon_sessions WHERE sid=%s", (row[0],))
    return True
