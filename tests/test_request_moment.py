"""A request is one moment (RFC 0020 "A request is one moment"; RFC 0024 decision 1).

Since RFC 0020 a session reads the episodes and the governed state *as of the ledger position*
it projects: an archive run and a control snapshot count from the ledger end their compaction
read. A compaction that runs after a request with nothing appended in between reads the same end
as the request, so its episodes and envelope count *at* the request's position. Two rules, both
checked here at every turn of a generated runtime (tests/generated_turns.py) whose every request
is followed by another process's compaction:

* the request's own text view, made when first read, shows the moment the request was made: the
  governed state and the archive its messages' walk read (the compaction after it is not seen);
* a compaction at a position is a new state there: the request made at that position before it
  is superseded, and a restarted session, a rebuild, and the runtime asking again all give the
  *latest* request made at the position.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import NamedTuple

import pytest
from generated_turns import agent_turn

import holon_ctx
from holon_ctx.ledger.sqlite import SqliteStore
from holon_ctx.projection.session.session import Layout

POLICY = holon_ctx.CompactionPolicy(recent_turns=3, every_turns=2)
#: (seed, budget, turns): seed 0 at 3,000 tokens differed at turns 12 and 16 before the text view
#: kept its moment, seed 1 at 1,800 at turns 6, 16 and 20, seed 2 at 2,500 at 8, 20 and 22.
RUNS = [(0, 3000, 24), (1, 1800, 24), (2, 2500, 24)]


class Turn(NamedTuple):
    #: The request as sent (OpenAI messages as JSON) and its text as a twin process made it then.
    sent: str
    made: str
    #: The request's text, first read after the compaction that followed it.
    late: str
    #: The messages a restarted process gets at the position after the compaction, and the
    #: runtime's own request made again there (the latest request at the position).
    restart: str
    remade: str
    #: The remade request's position, planned budget and manifest (for the rebuild).
    pos: int
    planned: int
    manifest: dict[str, object]


def _runtime_with_a_compaction_after_each_request(db: Path, seed: int, budget: int,
                                                  turns: int) -> list[Turn]:
    rng = random.Random(seed)
    waits: list[str] = []
    seen: list[Turn] = []
    with holon_ctx.Session(SqliteStore(db), compaction=POLICY, owns_store=True) as runtime:
        for i in range(turns):
            agent_turn(runtime, i, rng, waits, condition="CI\u200d run", longest=250)
            request = runtime.next_request(budget_tokens=budget)
            sent = json.dumps(request.openai_messages)
            # The text as made at request time: a twin process asking at the same position.
            with holon_ctx.Session(SqliteStore(db), compaction=None, owns_store=True) as twin:
                now = twin.next_request(budget_tokens=budget)
                assert json.dumps(now.openai_messages) == sent
                made = now.text
            with holon_ctx.Session(SqliteStore(db), compaction=POLICY, owns_store=True) as other:
                other.compact()  # nothing appended since the request
            late = request.text
            with holon_ctx.Session(SqliteStore(db), compaction=None, owns_store=True) as fresh:
                restart = json.dumps(fresh.next_request(budget_tokens=budget).openai_messages)
            again = runtime.next_request(budget_tokens=budget)
            seen.append(Turn(sent, made, late, restart, json.dumps(again.openai_messages),
                             again._messages.limit_pos, again.planned_tokens,
                             _without_cache_figures(again.manifest)))
    return seen


def _without_cache_figures(manifest: dict[str, object]) -> dict[str, object]:
    """The manifest but what says how a request relates to the request before it in *this*
    process: a request made twice at one position reports the first one's prefix as cached and
    no re-plan, where a rebuild's first request there re-planned."""
    session = manifest.get("session")
    assert isinstance(session, dict)
    for figure in ("cached_tokens", "replanned", "replan_reason"):
        session.pop(figure, None)
    return manifest


@pytest.fixture(scope="module", params=RUNS, ids=[f"seed{s}-{b}" for s, b, _ in RUNS])
def run(request: pytest.FixtureRequest,
        tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Turn]]:
    seed, budget, turns = request.param
    db = tmp_path_factory.mktemp("moment") / "ledger.db"
    return db, _runtime_with_a_compaction_after_each_request(db, seed, budget, turns)


def test_the_text_read_late_is_the_text_made_at_request_time(
        run: tuple[Path, list[Turn]]) -> None:
    """The request's text, first read after a compaction that appended nothing to the ledger,
    is the text a process asking at request time made: at every turn."""
    _, seen = run
    assert [i for i, t in enumerate(seen) if t.made != t.late] == []


def test_a_restart_at_the_position_gets_the_latest_request_made_there(
        run: tuple[Path, list[Turn]]) -> None:
    """After a compaction at the request's position, a restarted process asked there gets
    what the runtime itself gets asking again there: at every turn."""
    _, seen = run
    assert [i for i, t in enumerate(seen) if t.restart != t.remade] == []


def test_a_compaction_at_the_position_supersedes_the_request_made_before_it(
        run: tuple[Path, list[Turn]]) -> None:
    """The witness the rule above rests on: where the compaction sealed something the request
    had not seen, the position's latest request differs from the one sent (a new state at the
    same position), at some turns and not most; the request sent keeps its own text."""
    _, seen = run
    superseded = [i for i, t in enumerate(seen) if t.remade != t.sent]
    assert 0 < len(superseded) < len(seen) // 2
    assert all(json.loads(seen[i].restart) != json.loads(seen[i].sent) for i in superseded)


def test_a_rebuild_gives_the_latest_request_at_every_position(
        run: tuple[Path, list[Turn]]) -> None:
    """The persisted walk state deleted, the ledger walked again: at every position the
    runtime's latest request, messages byte for byte and manifest (but its cache figures and
    whether it re-planned: both are about the request before it)."""
    db, seen = run
    with holon_ctx.Session(SqliteStore(db), compaction=None, owns_store=True) as fresh:
        projector = fresh._projectors[Layout.MESSAGES]
        for planned in {t.planned for t in seen}:
            projector.rebuild(budget_tokens=planned)
        for i, t in enumerate(seen):
            again = projector.request(budget_tokens=t.planned, limit_pos=t.pos)
            assert json.dumps(again.openai_messages()) == t.remade, i
            manifest = json.loads(again.manifest_json())
            assert _without_cache_figures(manifest) == t.manifest, i
