"""A record naming a wait that was no longer open says so; it never reads as the one that matched.

An external event or task result with ``wait_id`` was labelled ``matches wait W`` / ``resolves
wait W`` whatever the wait's state: a webhook delivered twice, or a result arriving after the
wait was cancelled, read in the prompt as the answer that resolved it. The label now depends on
the records before the one labelled: open and unanswered → ``matches``/``resolves``; closed by a
wait record → ``names wait W, already STATUS``; answered by an earlier record → ``names wait W,
already answered by REF``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from holon_ctx.cli.main import main
from holon_ctx.ledger.episode_store import MemoryEpisodeStore
from holon_ctx.ledger.importer import import_jsonl
from holon_ctx.ledger.memory import MemoryStore
from holon_ctx.memory.archiver import ArchivePolicy, Archiver
from holon_ctx.memory.boundaries import BoundaryPolicy
from holon_ctx.memory.episodes import Field

LEDGER = """\
{"type":"turn","id":"t1","seq":1,"trigger":"operator_input"}
{"type":"message","id":"m1","turn_id":"t1","role":"operator","text":"Merge PR 42 when CI is green."}
{"type":"wait","id":"w1","turn_id":"t1","wait_id":"ci-1","status":"open","condition":"CI of PR 42"}
{"type":"wait","id":"w2","turn_id":"t1","wait_id":"deploy-1","status":"open","condition":"window"}
{"type":"wait","id":"w3","turn_id":"t1","wait_id":"review-1","status":"open","condition":"review"}
{"type":"turn","id":"t2","seq":2,"trigger":"external_event"}
{"type":"external_event","id":"e1","turn_id":"t2","source":"gh","text":"CI green","wait_id":"ci-1"}
{"type":"wait","id":"w4","turn_id":"t2","wait_id":"ci-1","status":"resolved","resolved_by":"external_event:e1"}
{"type":"wait","id":"w5","turn_id":"t2","wait_id":"deploy-1","status":"cancelled"}
{"type":"external_event","id":"e2","turn_id":"t2","source":"gh","text":"approved","wait_id":"review-1"}
{"type":"turn","id":"t3","seq":3,"trigger":"external_event"}
{"type":"external_event","id":"e3","turn_id":"t3","source":"gh","text":"CI green again","wait_id":"ci-1"}
{"type":"external_event","id":"e4","turn_id":"t3","source":"gh","text":"approved again","wait_id":"review-1"}
{"type":"turn","id":"t4","seq":4,"trigger":"task_result"}
{"type":"task_result","id":"r1","turn_id":"t4","task_id":"deploy","status":"success","summary":"deployed","wait_id":"deploy-1"}
"""

#: Each record naming a wait, and what its label must say (derived from the ledger above: e1
#: and e2 arrive while their waits are open; e3 after ci-1 was resolved; e4 after review-1 was
#: answered by e2 with no wait record closing it; r1 after deploy-1 was cancelled).
EXPECTED = {
    "external_event:e1": "matches wait ci-1",
    "external_event:e2": "matches wait review-1",
    "external_event:e3": "names wait ci-1, already resolved",
    "external_event:e4": "names wait review-1, already answered by external_event:e2",
    "task_result:r1": "names wait deploy-1, already cancelled",
}


def _labels(text: str) -> dict[str, str]:
    """Each EXPECTED ref's label line in a rendered prompt."""
    found = {}
    for ref in EXPECTED:
        lines = [line for line in text.splitlines()
                 if re.search(rf"(^|\W){re.escape(ref)}\b", line) and "wait" in line]
        assert lines, (ref, text)
        found[ref] = lines[0]
    return found


#: Records after the ledger above: each wait id used again (a runtime's ``wait-0`` in every
#: step), or a closed wait given another status.
LATER = [
    '{"type":"turn","id":"t5","seq":5,"trigger":"timer"}',
    '{"type":"wait","id":"w6","turn_id":"t5","wait_id":"ci-1","status":"open","condition":"CI of PR 43"}',
    '{"type":"wait","id":"w7","turn_id":"t5","wait_id":"deploy-1","status":"expired"}',
]


@pytest.mark.parametrize("mode", ["stateless", "session"])
@pytest.mark.parametrize("store", ["file", "sqlite"])
@pytest.mark.parametrize("later", [0, 1, 2, 3])
def test_a_prompt_labels_each_wait_answer_by_the_state_it_found(
        mode: str, store: str, later: int, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Whatever follows: a wait transition appended later (the id opened again, a closed wait
    expired: ``later``) must not change a label. It did: the status was read from the wait's
    latest transition and, that one being after the record, became 'already closed', so a
    restarted session, a re-plan or a replay labelled differently what a running session had
    sent."""
    src = tmp_path / "late.jsonl"
    src.write_text(LEDGER + "".join(line + "\n" for line in LATER[:later]), encoding="utf-8")
    source = [str(src)]
    if store == "sqlite":
        assert main(["import", str(src), "--db", str(tmp_path / "l.db")]) == 0
        source = ["--db", str(tmp_path / "l.db")]
    capsys.readouterr()
    assert main(["project", *source, "--budget", "4000", "--mode", mode]) == 0
    labels = _labels(capsys.readouterr().out)
    for ref, words in EXPECTED.items():
        assert words in labels[ref], (ref, labels[ref])
    assert "matches wait ci-1" not in labels["external_event:e3"]
    assert "resolves wait" not in labels["task_result:r1"]


def test_an_archived_episode_labels_each_wait_answer_alike(tmp_path: Path) -> None:
    """Episodes say the same of each record (``answers`` for a task result): a wait's end is a
    range boundary, so the builder asks the ledger, not its range (one turn per range; six timer
    turns after the ledger leave its four turns outside the recent two)."""
    path = tmp_path / "late.jsonl"
    path.write_text(LEDGER + "".join(
        f'{{"type":"turn","id":"t{n}","seq":{n},"trigger":"timer"}}\n' for n in range(5, 11)),
        encoding="utf-8")
    ledger = MemoryStore()
    import_jsonl(path, ledger)
    episodes = MemoryEpisodeStore()
    Archiver(ledger, episodes, policy=ArchivePolicy(
        recent_turns=2, boundaries=BoundaryPolicy(max_range_turns=1))).archive()
    texts = {c.refs[0]: c.text for e in episodes.iter_episodes() for f in Field
             for c in e.field(f) if c.refs}
    for ref, words in EXPECTED.items():
        assert words.replace("matches", "answers" if ref.startswith("task") else "matches") \
            in texts[ref], (ref, texts[ref])
