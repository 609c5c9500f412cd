"""Child processes of the session reliability tests: runtimes sharing one ledger (RFC 0020).

``python session_procs.py agent STORE TAG TURNS SEED`` — one runtime: each turn it appends a
batch (the turn, the operator's words, a reply, a tool run — one in twenty with an unknown side
effect, so compactions seal blocking state — and sometimes a wait opened or resolved), with ids of
its own and the turn numbered by the store, then asks its ``Session`` for the next request (which
compacts every other turn, and at every turn while the budget binds), and sometimes compacts
explicitly. It waits for a line on
stdin before starting, so all agents start together. When its turns are done it prints ``done``;
then, for each ``ask`` line, it asks for the request it continues with and prints its position,
planned tokens and a digest of its messages and manifest (a rebuild asked the same must give the
same). At any other line it prints one JSON line: the refs it appended, the same three figures
of every request it was given while appending, and every failure (an exception from any call,
by kind and message). With ``HOLON_CTX_PROCS_BODIES`` naming a directory, it also writes what
each digest is of there (``TAG.jsonl``, :func:`request_body`), so that a test that finds a digest
differ can say which message or manifest entry does.

``python session_procs.py helpers STORE TAG TURNS`` — a runtime appending through the public
helpers only (``helpers``); prints the refs they returned with what each stored.

``python session_procs.py compact STORE ROUNDS`` — ``holon-ctx compact`` as an operator runs it
beside the runtimes, ``ROUNDS`` times; prints the exit codes as a JSON list.

``STORE`` is a SQLite path, or ``postgresql://…#SESSION_KEY``.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sys
from typing import Any

import holon_ctx
from holon_ctx.ledger.records import (
    Message,
    MessageRole,
    Record,
    SideEffect,
    Tool,
    ToolStatus,
    Turn,
    Wait,
    WaitStatus,
    record_ref,
)
from holon_ctx.ledger.store import LedgerStore
from holon_ctx.projection.base.model import Moment
from holon_ctx.projection.session.session_state import SessionRequest

#: Small windows so that a few dozen turns compact many times.
POLICY = holon_ctx.CompactionPolicy(recent_turns=3, every_turns=2)
#: Room for the governed notices eight agents pile up over 40 turns (open waits, unknown side
#: effects: each is stated in every request); at 6,000 the slow tier's requests needed a few
#: tokens more than the budget, a budget error and not a compaction failure.
BUDGET = 16000


def open_store(where: str) -> LedgerStore:
    if where.startswith("postgresql://"):
        from holon_ctx.postgres import PostgresStore

        url, _, key = where.partition("#")
        return PostgresStore(url, session=key)
    from holon_ctx.ledger.sqlite import SqliteStore

    return SqliteStore(where)


def _failure(what: str, exc: BaseException) -> dict[str, str]:
    return {"call": what, "error": type(exc).__name__, "message": str(exc)[:300]}


def _batch(tag: str, i: int, rng: random.Random, waits: list[str]) -> list[Record]:
    """One turn of agent ``tag``: ids prefixed by the tag (so writers never collide), the turn
    numbered by the store at append (``renumber_turns``)."""
    p, turn = f"{tag}.{i}", f"{tag}.{i}.t"
    words = " ".join(rng.choice(["fix", "the", "build", "CI\u200d", "deploy", "审批"])
                     for _ in range(rng.randint(2, 30)))
    records: list[Record] = [
        Turn(id=turn, seq=0, trigger="operator_input", work_item_id=f"{tag}.wi"),
        Message(id=f"{p}.op", turn_id=turn, role=MessageRole.OPERATOR, text=f"{tag} {i}: {words}"),
        Message(id=f"{p}.re", turn_id=turn, role=MessageRole.ASSISTANT, text="checking"),
        Tool(id=f"{p}.x", turn_id=turn, tool_name="shell", call_id=f"{p}.call",
             args_preview=f"make {i}", status=ToolStatus.OK, exit_code=0,
             output="ok\n" * rng.randint(1, 30),
             side_effect=SideEffect.UNKNOWN if rng.random() < 0.05 else None)]
    if waits and rng.random() < 0.5:
        records.append(Wait(id=f"{p}.wr", wait_id=waits.pop(0), status=WaitStatus.RESOLVED,
                            turn_id=turn))
    elif rng.random() < 0.3:
        waits.append(f"{p}.wait")
        records.append(Wait(id=f"{p}.wo", wait_id=waits[-1], status=WaitStatus.OPEN,
                            turn_id=turn, condition=f"CI run {i} " + "x" * rng.randint(0, 300)))
    return records


def agent(where: str, tag: str, turns: int, seed: int,
          compact_share: float = 0.15) -> dict[str, Any]:
    rng = random.Random(seed)
    appended: list[str] = []
    failures: list[dict[str, str]] = []
    asked: list[list[Any]] = []
    requests = 0
    store = open_store(where)
    session = holon_ctx.Session(store, compaction=POLICY, owns_store=True)
    bodies = os.environ.get("HOLON_CTX_PROCS_BODIES")

    def asked_now() -> list[Any]:
        request = session.next_request(budget_tokens=BUDGET)
        if bodies:
            with open(os.path.join(bodies, f"{tag}.jsonl"), "a") as out:
                out.write(json.dumps(request_body(request._messages)) + "\n")
        return request_digest(request)

    print("ready", flush=True)
    sys.stdin.readline()
    waits: list[str] = []
    try:
        for i in range(turns):
            records = _batch(tag, i, rng, waits)
            try:
                store.append(records, renumber_turns=True)
            except Exception as exc:
                failures.append(_failure("append", exc))
                continue
            appended.extend(record_ref(r) for r in records)
            try:
                asked.append(asked_now())
                requests += 1
            except Exception as exc:
                failures.append(_failure("next_request", exc))
            if rng.random() < compact_share:
                try:
                    session.compact()
                except Exception as exc:
                    failures.append(_failure("compact", exc))
        print("done", flush=True)
        # Each "ask" line: one request, its digest printed; any other line ends the run.
        while sys.stdin.readline().strip() == "ask":
            try:
                final = asked_now()
            except Exception as exc:
                failures.append(_failure("final next_request", exc))
                final = None
            print(json.dumps(final), flush=True)
    finally:
        session.close()
    return {"tag": tag, "appended": appended, "requests": requests, "asked": asked,
            "failures": failures}


def request_digest(request: holon_ctx.Request) -> list[Any]:
    """``[position, planned tokens, digest, moment]`` of a request: where it was asked,
    :func:`messages_digest` of it, and :func:`moment_seen` (what it read beside the ledger)."""
    messages = request._messages
    return [messages.limit_pos, request.planned_tokens, messages_digest(messages),
            moment_seen(messages)]


def moment_seen(messages: SessionRequest) -> list[int]:
    """What a request read beside the ledger as of its position (RFC 0020, ``Moment``): how many
    control snapshots at or before it, and the newest episode number visible (-1: none read).
    A rebuild that reads more at the same position found state that landed there afterwards."""
    moment = messages.moment
    if not isinstance(moment, Moment):
        return [-1, -1]
    snapshots = sum(1 for pos in moment.controls.positions if pos <= messages.limit_pos)
    return [snapshots, -1 if moment.archive is None else moment.archive]


def request_body(messages: SessionRequest) -> list[Any]:
    """A request's OpenAI messages and manifest, but for the manifest's ``session.replanned``,
    ``replan_reason`` and ``cached_tokens``: they compare this request with the asker's previous
    one (did it re-plan since, how much of it that one's prefix holds), which a runtime that asked
    before has and a fresh walk has not."""
    manifest = json.loads(messages.manifest_json())
    for asker_history in ("replanned", "replan_reason", "cached_tokens"):
        del manifest["session"][asker_history]
    return [messages.openai_messages(), manifest]


def messages_digest(messages: SessionRequest) -> str:
    """A digest of :func:`request_body`."""
    return body_digest(request_body(messages))


def body_digest(body: list[Any]) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def first_difference(ours: Any, theirs: Any, at: str = "") -> str | None:
    """Where two request bodies (:func:`request_body`) first differ: the path to the first
    message (``[0][i]``) or manifest entry (``[1].key…``) that does, with both values (a text
    around its first differing character), or None when they are equal."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        for key in sorted(ours.keys() | theirs.keys()):
            if key not in ours or key not in theirs:
                return f"{at}.{key}: only in {'ours' if key in ours else 'theirs'}"
            found = first_difference(ours[key], theirs[key], f"{at}.{key}")
            if found:
                return found
        return None
    if isinstance(ours, list) and isinstance(theirs, list):
        for i, (a, b) in enumerate(zip(ours, theirs, strict=False)):
            found = first_difference(a, b, f"{at}[{i}]")
            if found:
                return found
        if len(ours) != len(theirs):
            return f"{at}: {len(ours)} entries against {len(theirs)}"
        return None
    if ours == theirs:
        return None
    if isinstance(ours, str) and isinstance(theirs, str):
        cut = next((i for i, (a, b) in enumerate(zip(ours, theirs, strict=False)) if a != b),
                   min(len(ours), len(theirs)))
        start = max(cut - 80, 0)
        return f"{at} at char {cut}: {ours[start:cut + 160]!r} against {theirs[start:cut + 160]!r}"
    return f"{at}: {ours!r:.300} against {theirs!r:.300}"


def helpers(where: str, tag: str, turns: int) -> dict[str, Any]:
    """Appends through the public helpers only (ids minted by the session): each turn an
    operator message, a reply with a tool call and its result, and a plain ``timer`` wake (the
    same record in every process but for its id). Returns each helper's ref with what it
    stored, to check against the ledger."""
    made: list[list[str]] = []
    failures: list[dict[str, str]] = []
    with holon_ctx.Session(open_store(where), compaction=None, owns_store=True) as session:
        print("ready", flush=True)
        sys.stdin.readline()
        for i in range(turns):
            try:
                made.append([session.operator_message(f"{tag} step {i}"), f"{tag} step {i}"])
                call = f"{tag}-c{i}"
                made.append([session.assistant_message(
                    f"{tag} reply {i}", tool_calls=[holon_ctx.ToolCall(call, "shell", "{}")]),
                    f"{tag} reply {i}"])
                made.append([session.tool_result(call, f"{tag} out {i}"), f"{tag} out {i}"])
                made.append([session.wake("timer"), "timer"])
            except Exception as exc:
                failures.append(_failure("helper", exc))
    return {"tag": tag, "made": made, "failures": failures}


def cli_compact(where: str, rounds: int) -> list[int]:
    from holon_ctx.cli.main import main

    print("ready", flush=True)
    sys.stdin.readline()
    codes = []
    for _ in range(rounds):
        if where.startswith("postgresql://"):
            url, _, key = where.partition("#")
            codes.append(main(["compact", "--db", url, "--session-key", key]))
        else:
            codes.append(main(["compact", "--db", where]))
    return codes


if __name__ == "__main__":
    if sys.argv[1] == "agent":
        out: Any = agent(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]),
                         *map(float, sys.argv[6:7]))
    elif sys.argv[1] == "helpers":
        out = helpers(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        out = cli_compact(sys.argv[2], int(sys.argv[3]))
    print(json.dumps(out), flush=True)
