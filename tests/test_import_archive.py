"""A long imported history is archived once, in bulk, at import; later archiving is proportional
to what ages out (issue 29 item 3, RFC 0026).

The classes of the stall: (1) the first compaction after an import archived the whole history
inside a request; (2) every archive run paged the turn index back from its horizon a page at a
time (up to 512 turns and their records), so even a run that archives one range read an amount
that grew with the history. Both are checked through what the stores are asked, not by time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tiers import sized

import holon_ctx
from holon_ctx import CompactionPolicy, ToolCall
from holon_ctx.ledger.episode_store import MemoryEpisodeStore
from holon_ctx.ledger.memory import MemoryStore
from holon_ctx.ledger.store import StoredRecord
from holon_ctx.memory.archiver import ArchivePolicy, Archiver
from holon_ctx.memory.episodes import encode_episode
from holon_ctx.memory.index import IndexedEpisode


def chat(steps: int, *, seed: int = 0) -> list[dict[str, Any]]:
    """An agent conversation as an OpenAI message list: a request every tenth step, else a
    reply calling a tool and the tool's output (a few lines to a few hundred)."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}]
    for k in range(steps):
        if k % 10 == 0:
            messages.append({"role": "user", "content": f"Request {k + seed}: make module_{k} "
                                                        "handle empty input, with a test."})
        lines = "\n".join(f"tests/test_m{k}.py::case_{j} PASSED" for j in range((k * 7) % 40 + 2))
        messages.append({"role": "assistant", "content": f"Step {k}: running the tests.",
                         "tool_calls": [{"id": f"c{k}", "type": "function", "function": {
                             "name": "bash", "arguments": f'{{"command": "pytest t{k}"}}'}}]})
        messages.append({"role": "tool", "tool_call_id": f"c{k}", "content": lines})
    return messages


class CountingEpisodes(MemoryEpisodeStore):
    """An in-memory episode store that counts the turns of the episodes appended to it."""

    def __init__(self) -> None:
        super().__init__()
        self.turns_archived = 0

    def append(self, batch: Sequence[IndexedEpisode], *, archived_pos: int | None = None) -> int:
        self.turns_archived += sum(item.episode.turns for item in batch)
        return super().append(batch, archived_pos=archived_pos)


class CountingStore(MemoryStore):
    """A ledger that counts the records its reads hand out (turn records included)."""

    reads = 0

    def _seen(self, found: list[StoredRecord]) -> list[StoredRecord]:
        self.reads += len(found)
        return found

    def turns_before(self, seq: int, count: int, limit_pos: int) -> list[StoredRecord]:
        return self._seen(super().turns_before(seq, count, limit_pos))

    def records_of_turns(self, lo_seq: int, hi_seq: int, limit_pos: int) -> list[StoredRecord]:
        return self._seen(super().records_of_turns(lo_seq, hi_seq, limit_pos))

    def records_between(self, lo_pos: int, hi_pos: int) -> list[StoredRecord]:
        return self._seen(super().records_between(lo_pos, hi_pos))

    def high_turns_before(self, seq: int, count: int, limit_pos: int) -> list[StoredRecord]:
        return self._seen(super().high_turns_before(seq, count, limit_pos))


def _step(session: holon_ctx.Session, k: int) -> None:
    session.assistant_message(f"Step {k}.", tool_calls=[ToolCall(f"n{k}", "bash", {"cmd": "ls"})])
    session.tool_result(f"n{k}", f"file_{k}.py\n")


STEPS = sized(160, 600)


def test_an_imported_history_is_archived_at_import_and_no_request_archives_it_again() -> None:
    """After import_history the aged-out history is already in episodes; the first request
    archives nothing, and each later turn archives at most what aged out since (one range)."""
    episodes = CountingEpisodes()
    policy = CompactionPolicy()
    with holon_ctx.Session(MemoryStore(), episodes=episodes, compaction=policy) as session:
        session.import_history(chat(STEPS), format="openai")
        # Every step is a turn (a request's turn holds its first reply): all but the recent
        # window and the range still open at its edge are archived.
        assert episodes.turns_archived >= STEPS - policy.recent_turns - 16
        at_import = episodes.turns_archived
        request = session.next_request(4096)
        assert request.request_tokens <= 4096
        assert episodes.turns_archived == at_import
        for k in range(3):
            before = episodes.turns_archived
            _step(session, k)
            session.next_request(4096)
            # One new turn ages out per turn: at most the range it closes is archived.
            assert episodes.turns_archived - before <= ArchivePolicy().boundaries.max_range_turns


def test_an_import_without_automatic_compaction_archives_nothing() -> None:
    """compaction=None means the session never compacts by itself, an import included."""
    episodes = CountingEpisodes()
    with holon_ctx.Session(MemoryStore(), episodes=episodes, compaction=None) as session:
        session.import_history(chat(60), format="openai")
        assert episodes.turns_archived == 0
        assert session.compact().archive.turns > 0


def _reads_of_one_more_run(steps: int, new_steps: int) -> tuple[int, int]:
    """Records the archiver reads in a run after ``new_steps`` more steps, on a history of
    ``steps`` steps archived before; and the turns that run archives."""
    store = CountingStore()
    episodes = MemoryEpisodeStore()
    with holon_ctx.Session(store, episodes=episodes, compaction=None) as session:
        session.import_history(chat(steps), format="openai")
        archiver = Archiver(store, episodes, policy=ArchivePolicy(recent_turns=16))
        archiver.archive()
        for k in range(new_steps):
            _step(session, k)
        store.reads = 0
        report = archiver.archive()
        return store.reads, report.turns


@settings(max_examples=sized(6, 20), deadline=None)
@given(new_steps=st.integers(0, 40))
def test_an_archive_run_reads_what_it_archives_not_the_history(new_steps: int) -> None:
    """A run reads the records from the archival frontier to the look-ahead turn: the same
    number whether the history before the frontier is short or four times longer."""
    short = _reads_of_one_more_run(STEPS, new_steps)
    long = _reads_of_one_more_run(4 * STEPS, new_steps)
    assert short[1] == long[1]
    assert long[0] == short[0]
    # What it reads is bounded by what it archives plus the window it leaves for next time
    # (the open range, the recent turns and the look-ahead; three records a step at most).
    bound = 3 * (short[1] + 16 + ArchivePolicy().boundaries.max_range_turns + 1) + 3
    assert short[0] <= bound


@pytest.mark.parametrize("steps", [40, 200])
def test_bulk_and_turn_by_turn_archiving_give_the_same_episodes(steps: int) -> None:
    """Archived once at import or a turn at a time as the history grew: the same bytes."""
    messages = chat(steps)
    bulk = MemoryEpisodeStore()
    with holon_ctx.Session(MemoryStore(), episodes=bulk, compaction=CompactionPolicy()) as s:
        s.import_history(messages, format="openai")
    stepwise = MemoryEpisodeStore()
    store = MemoryStore()
    with holon_ctx.Session(store, episodes=stepwise, compaction=None) as s:
        s.import_history(messages, format="openai")
    archiver = Archiver(store, stepwise, policy=ArchivePolicy(recent_turns=16))
    turns = [r.ref for r in store.records_between(0, store.end_pos()) if r.ref.startswith("turn:")]
    for ref in turns:
        archiver.archive(at=ref)
    assert [encode_episode(e) for e in bulk.iter_episodes()] == \
        [encode_episode(e) for e in stepwise.iter_episodes()]
    assert bulk.count() > 0
