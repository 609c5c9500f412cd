"""Large SQLite ledgers for the projection benchmarks, made once and cached under /tmp/holon-bench.

``projection_db(n_turns)`` returns the path of a SQLite ledger of ``n_turns`` turns (seed 0), made
on first use and reused afterwards (a ``.ok`` marker beside it says the file is complete). The
turns follow an agent's day: operator requests answered by the assistant, task results with a tool
run, external events, work-item transitions every ~200 turns, waits opened and resolved, runs of
provider retries and scheduler ticks. About 2.4 records per turn and ~60 tokens per turn, in
English with some Chinese and code. Records go in through ``SqliteStore.append`` (the real append
path: validation, token counting, derived tables) in batches of ~20,000 records.

Run as a script to make one: ``python bench/projection_gen.py 1000000``.
"""

from __future__ import annotations

import os
import random
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from holon_ctx.ledger.records import (
    Brief,
    BriefKind,
    ExternalEvent,
    Message,
    MessageRole,
    Origin,
    Record,
    TaskResult,
    TaskStatus,
    Tool,
    ToolStatus,
    Turn,
    Wait,
    WaitStatus,
    WorkItem,
    WorkItemStatus,
)
from holon_ctx.ledger.sqlite import SqliteStore
from holon_ctx.ledger.store import LedgerStore

__all__ = ["CACHE", "append_turns", "projection_db", "turns"]

CACHE = Path(os.environ.get("HOLON_BENCH_CACHE", "/tmp/holon-bench"))
_BATCH = 20_000

_EN = ("the", "build", "passed", "on", "main", "after", "the", "retry", "and", "the", "flaky",
       "test", "was", "quarantined", "until", "the", "owner", "can", "look", "at", "it", "again",
       "tomorrow", "morning", "please", "check", "the", "deploy", "log", "for", "errors", "before",
       "merging", "the", "branch", "we", "need", "a", "smaller", "patch", "that", "keeps", "the",
       "public", "API", "stable")
_ZH = ("构建", "通过", "测试", "失败", "重试", "部署", "日志", "请检查", "分支", "合并")
_CODE = ("def f(x):", "return x + 1", "SELECT * FROM t;", "pytest -q", "git push", "=> ok")


def _text(rng: random.Random, n: int) -> str:
    words = []
    for _ in range(n):
        r = rng.random()
        words.append(rng.choice(_EN) if r < 0.8 else rng.choice(_ZH) if r < 0.93
                     else rng.choice(_CODE))
    return " ".join(words)


def turns(n_turns: int, seed: int = 0) -> Iterator[Record]:
    """The records of an ``n_turns``-turn ledger, in append order."""
    rng = random.Random(seed)
    n = 0
    wid = "wi0"
    last_operator: str | None = None
    open_wait: str | None = None

    def nid(prefix: str) -> str:
        nonlocal n
        n += 1
        return f"{prefix}{n}"

    for seq in range(n_turns):
        r = rng.random()
        if seq % 200 == 0:
            wid = f"wi{seq // 200}"
        tid = nid("t")
        if seq == 0 or r < 0.25:
            yield Turn(id=tid, seq=seq, trigger="operator_input", work_item_id=wid,
                       origin=Origin.OPERATOR)
            yield Message(id=nid("m"), turn_id=tid, role=MessageRole.OPERATOR,
                          text=_text(rng, rng.randint(8, 30)), origin=Origin.OPERATOR)
            yield Message(id=nid("m"), turn_id=tid, role=MessageRole.ASSISTANT,
                          text=_text(rng, rng.randint(10, 40)))
            if seq % 200 == 0:
                yield WorkItem(id=nid("w"), work_item_id=wid, turn_id=tid,
                               objective=_text(rng, 10), plan=[_text(rng, 5) for _ in range(3)],
                               status=WorkItemStatus.ACTIVE)
            last_operator = tid
        elif r < 0.55:
            yield Turn(id=tid, seq=seq, trigger="task_result", work_item_id=wid,
                       anchor_turn_id=last_operator)
            wait = open_wait if open_wait and rng.random() < 0.2 else None
            yield TaskResult(id=nid("r"), turn_id=tid, task_id=nid("task"),
                             status=TaskStatus.SUCCESS if rng.random() < 0.9
                             else TaskStatus.FAILURE,
                             summary=_text(rng, rng.randint(6, 20)), work_item_id=wid,
                             wait_id=wait)
            if wait:
                yield Wait(id=nid("w"), wait_id=wait, status=WaitStatus.RESOLVED, turn_id=tid)
                open_wait = None
            yield Tool(id=nid("x"), turn_id=tid, tool_name=rng.choice(("shell", "read_file")),
                       args_preview=_text(rng, 3), args_digest=f"d{rng.randrange(50)}",
                       status=ToolStatus.OK, exit_code=0, output=_text(rng, rng.randint(10, 50)))
        elif r < 0.70:
            yield Turn(id=tid, seq=seq, trigger="external_event", work_item_id=wid)
            yield ExternalEvent(id=nid("e"), turn_id=tid, source=rng.choice(("ci", "github")),
                                text=_text(rng, rng.randint(6, 24)), work_item_id=wid)
            if open_wait is None and rng.random() < 0.3:
                open_wait = nid("wait")
                yield Wait(id=nid("w"), wait_id=open_wait, status=WaitStatus.OPEN, turn_id=tid,
                           work_item_id=wid, condition=_text(rng, 6))
        elif r < 0.90:
            yield Turn(id=tid, seq=seq, trigger=rng.choice(("provider_retry", "scheduler_tick")),
                       label="retrying")
        else:
            yield Turn(id=tid, seq=seq, trigger="subagent_result", work_item_id=wid,
                       anchor_turn_id=last_operator)
            yield Brief(id=nid("b"), turn_id=tid, kind=BriefKind.RESULT,
                        text=_text(rng, rng.randint(10, 30)), work_item_id=wid)


def append_turns(store: LedgerStore, n_turns: int) -> None:
    """Append the ``n_turns``-turn ledger in batches of ~20,000 records, each ending at a turn."""
    batch: list[Record] = []
    for record in turns(n_turns):
        batch.append(record)
        if len(batch) >= _BATCH and isinstance(record, Turn):
            store.append(batch[:-1])
            batch = batch[-1:]
    if batch:
        store.append(batch)


def projection_db(n_turns: int) -> Path:
    """The cached ledger of ``n_turns`` turns (made on first use; see the module docstring)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"projection-{n_turns}.db"
    marker = path.with_suffix(".ok")
    if marker.exists() and path.exists():
        return path
    for stale in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        stale.unlink(missing_ok=True)
    started = time.perf_counter()
    store = SqliteStore(path)
    append_turns(store, n_turns)
    store.close()
    marker.write_text(f"{time.perf_counter() - started:.1f} s\n")
    return path


if __name__ == "__main__":
    n = int(sys.argv[1])
    t0 = time.perf_counter()
    print(projection_db(n), f"{time.perf_counter() - t0:.1f} s")
