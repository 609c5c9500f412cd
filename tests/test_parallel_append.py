"""Several writers append to one ledger at once (issue 10, item 3).

Transcript imports used to read the next turn number before the write transaction began, so two
imports into one database (``--id-prefix``) failed with ``sequence goes backwards``. The number is
now allocated inside the transaction (``renumber_turns=True``), for every store.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ledger_procs import child_env

from holon_ctx.errors import LedgerFormatError
from holon_ctx.ledger import transcripts
from holon_ctx.ledger.memory import MemoryStore
from holon_ctx.ledger.records import Message, MessageRole, Turn
from holon_ctx.ledger.sqlite import SqliteStore
from holon_ctx.ledger.store import LedgerStore
from holon_ctx.ledger.transcripts import import_any


def _chat(path: Path, steps: int) -> Path:
    """An OpenAI chat: a user request, then ``steps`` tool calls with results, then an answer."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "修一下 CI, please"}]
    for k in range(steps):
        messages.append({"role": "assistant", "content": f"step {k}", "tool_calls": [
            {"id": f"c{k}", "type": "function",
             "function": {"name": "shell", "arguments": json.dumps({"cmd": f"make {k}"})}}]})
        messages.append({"role": "tool", "tool_call_id": f"c{k}", "content": f"ok {k}"})
    messages.append({"role": "assistant", "content": "done"})
    path.write_text(json.dumps({"messages": messages}), encoding="utf-8")
    return path


def _turns(store: LedgerStore) -> list[Turn]:
    return [r for r in store.iter_records() if isinstance(r, Turn)]


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_transcript_import_numbers_its_turns_when_it_appends(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    """Another writer appends turns while the transcript is being read: the import still succeeds
    and its turns follow the other writer's."""
    src = _chat(tmp_path / "chat.json", 3)
    store: LedgerStore = MemoryStore() if kind == "memory" else SqliteStore(tmp_path / "l.db")
    real = transcripts.read_transcript

    def meanwhile(*args: Any, **kwargs: Any) -> Any:
        # Another agent's batch commits between the import's start and its append.
        store.append([Turn(id="other", seq=0, trigger="timer"),
                      Message(id="om", turn_id="other", role=MessageRole.ASSISTANT, text="tick")])
        return real(*args, **kwargs)

    monkeypatch.setattr(transcripts, "read_transcript", meanwhile)
    _, n = import_any(src, store, id_prefix="a.")
    turns = _turns(store)
    assert [t.id for t in turns][:1] == ["other"]
    assert [t.seq for t in turns] == list(range(len(turns)))
    assert n == store.end_pos() - 2
    store.close()


def test_renumbered_turns_keep_their_order_and_anchors() -> None:
    store = MemoryStore()
    store.append([Turn(id="x", seq=0, trigger="timer")])
    batch = [Turn(id="a", seq=7, trigger="operator_input"),
             Message(id="m", turn_id="a", role=MessageRole.OPERATOR, text="go"),
             Turn(id="b", seq=3, trigger="x-agent-step", anchor_turn_id="a"),
             Message(id="r", role=MessageRole.OPERATOR, text="and then")]  # derives turn t.r
    assert store.append(batch, renumber_turns=True) == 5
    assert [(t.id, t.seq) for t in _turns(store)] == [("x", 0), ("a", 1), ("b", 2), ("t.r", 3)]
    # Without renumbering the numbers are the caller's, and checked.
    with pytest.raises(LedgerFormatError, match=r"\$\.seq: sequence goes backwards: 2 after 3"):
        store.append([Turn(id="c", seq=2, trigger="timer")])


IMPORTER = """
import sys
from holon_ctx.ledger.sqlite import SqliteStore
from holon_ctx.ledger.transcripts import import_any
db, src, prefix, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
store = SqliteStore(db)
for k in range(rounds):
    import_any(src, store, id_prefix=f"{prefix}{k}.")
print(store.end_pos(), flush=True)
"""


def test_parallel_imports_with_id_prefixes_all_succeed(tmp_path: Path) -> None:
    """Four processes import transcripts into one database at once, five each: every import
    succeeds, every record is there once, turn numbers rise with position."""
    src = _chat(tmp_path / "chat.json", 6)
    db = tmp_path / "shared.db"
    SqliteStore(db).close()
    writers = [subprocess.Popen([sys.executable, "-c", IMPORTER, str(db), str(src), f"w{w}-", "5"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=child_env()) for w in range(4)]
    for proc in writers:
        _, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err
    one = MemoryStore()
    per_import = import_any(src, one, id_prefix="p.")[1]
    store = SqliteStore(db)
    ids = [r.id for r in store.iter_records()]
    assert len(ids) == len(set(ids)) == 4 * 5 * per_import
    turns = _turns(store)
    assert [t.seq for t in turns] == list(range(len(turns)))
    # Each import's turns are contiguous: a batch is one transaction.
    prefixes = [t.id.split(".")[0] for t in turns]
    runs = [p for i, p in enumerate(prefixes) if i == 0 or prefixes[i - 1] != p]
    assert len(runs) == 20
    assert sorted(runs) == sorted({*prefixes})
    store.close()


def test_the_cli_imports_transcripts_in_parallel(tmp_path: Path) -> None:
    src = _chat(tmp_path / "chat.json", 4)
    db = tmp_path / "run.db"
    SqliteStore(db).close()
    procs = [subprocess.Popen([sys.executable, "-m", "holon_ctx", "import", str(src), "--db",
                               str(db), "--id-prefix", f"{k}."], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=child_env()) for k in "abc"]
    results = [(p.wait(timeout=120), *p.communicate()) for p in procs]
    assert [code for code, _, _ in results] == [0, 0, 0], results
    assert len(_turns(SqliteStore(db))) == 3 * len(_turns(_import_into_memory(src)))


def _import_into_memory(src: Path) -> MemoryStore:
    store = MemoryStore()
    import_any(src, store)
    return store
