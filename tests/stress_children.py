"""Child processes of ``tests/test_stress.py``: ``python stress_children.py writer|projector …``.

``writer DB TAG SECONDS SEED``: appends random batches until the time is up, through the library
as an agent would (``renumber_turns=True``, or turns derived from an operator message), each batch
opening its own turn; a batch may open a wait, resolve the wait of its previous batch, move its
work item or pin one of its records. Prints one JSON line: the ids of every committed batch.

``projector DB SECONDS SEED``: projects the latest turn at random budgets until the time is up;
prints one JSON line per projection: turn, budget, and the SHA-256 of the prompt text and of the
manifest (or the error, when the budget cannot hold the pinned items).
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
import time

from holon_ctx.errors import BudgetTooSmallError
from holon_ctx.ledger.records import (
    ExternalEvent,
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
    WorkItemStatus,
)
from holon_ctx.ledger.sqlite import SqliteStore
from holon_ctx.projection.planning.projector import Projector


def _batch(tag: str, b: int, rng: random.Random, open_wait: str | None) -> tuple[list[Record], str | None]:
    """One batch of agent ``tag``; returns it and the wait it leaves open (if any)."""
    p = f"{tag}.b{b}"
    records: list[Record] = []
    if rng.random() < 0.3:
        # Turn derived by the store from an operator message (id t.<message id>).
        records.append(Message(id=f"{p}.op", role=MessageRole.OPERATOR,
                               text=f"agent {tag}: please continue with step {b}"))
        turn_id = f"t.{p}.op"
    else:
        turn_id = f"{p}.t"
        records.append(Turn(id=turn_id, seq=0, trigger=rng.choice(["timer", "scheduler_tick",
                                                                  "external_event"]),
                            work_item_id=f"{tag}.wi"))
    for k in range(rng.randint(0, 6)):
        if rng.random() < 0.5:
            records.append(Tool(id=f"{p}.x{k}", turn_id=turn_id, tool_name="shell",
                                args_preview=f"make step-{b}-{k}", status=ToolStatus.OK,
                                exit_code=0, output=f"step {b}.{k} ok · 第{k}步"))
        else:
            records.append(Message(id=f"{p}.m{k}", turn_id=turn_id, role=MessageRole.ASSISTANT,
                                   text=f"{tag} batch {b} note {k}"))
    if open_wait is not None and rng.random() < 0.5:
        records.append(ExternalEvent(id=f"{p}.ev", turn_id=turn_id, source="ci",
                                     text=f"{open_wait} finished", wait_id=open_wait))
        records.append(Wait(id=f"{p}.wr", wait_id=open_wait, status=WaitStatus.RESOLVED,
                            turn_id=turn_id, resolved_by=f"external_event:{p}.ev"))
        open_wait = None
    if open_wait is None and rng.random() < 0.3:
        open_wait = f"{p}.wait"
        records.append(Wait(id=f"{p}.wo", wait_id=open_wait, status=WaitStatus.OPEN,
                            turn_id=turn_id, condition=f"CI run {b} of {tag}"))
    if rng.random() < 0.3:
        records.append(WorkItem(id=f"{p}.w", work_item_id=f"{tag}.wi", turn_id=turn_id,
                                objective=f"keep agent {tag} going",
                                status=rng.choice([WorkItemStatus.ACTIVE, WorkItemStatus.WAITING])))
    if rng.random() < 0.1:
        records.append(Pin(id=f"{p}.pin", turn_id=turn_id, target=f"turn:{turn_id}"))
    return records, open_wait


def writer(db: str, tag: str, seconds: float, seed: int) -> None:
    rng = random.Random(seed)
    store = SqliteStore(db)
    committed: list[list[str]] = []
    open_wait: str | None = None
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        records, still_open = _batch(tag, len(committed), rng, open_wait)
        store.append(records, renumber_turns=True)
        open_wait = still_open
        ids = [r.id for r in records]
        if not isinstance(records[0], Turn):
            ids.insert(0, f"t.{records[0].id}")
        committed.append(ids)
        time.sleep(rng.random() * 0.01)
    store.close()
    print(json.dumps(committed), flush=True)


def projector(db: str, seconds: float, seed: int) -> None:
    rng = random.Random(seed)
    store = SqliteStore(db)
    engine = Projector(store)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if store.latest_turn(store.end_pos()) is None:
            time.sleep(0.01)
            continue
        budget = rng.choice([600, 1500, 6000])
        latest = store.latest_turn(store.end_pos())
        assert latest is not None
        try:
            projection = engine.project(budget_tokens=budget, verify=True)
        except BudgetTooSmallError:
            # The error does not say which turn it projected (the newest by then): ask again for
            # a turn we know. The error is as much a result of the ledger's state as a prompt.
            try:
                projection = engine.project(budget_tokens=budget, at=latest.record.id,
                                            verify=True)
            except BudgetTooSmallError as exc:
                print(json.dumps({"turn": latest.ref, "budget": budget, "error": str(exc)}),
                      flush=True)
                continue
        print(json.dumps({
            "turn": projection.current_turn, "budget": budget,
            "text": hashlib.sha256(projection.text.encode()).hexdigest(),
            "manifest": hashlib.sha256(projection.manifest_json()).hexdigest()}), flush=True)
        time.sleep(rng.random() * 0.05)
    store.close()


if __name__ == "__main__":
    role, *rest = sys.argv[1:]
    if role == "writer":
        writer(rest[0], rest[1], float(rest[2]), int(rest[3]))
    else:
        projector(rest[0], float(rest[1]), int(rest[2]))
