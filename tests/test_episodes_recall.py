"""Recall: the episode section of the projection, relevance, pinning, fencing and CJK text."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
from test_episodes_kit import (
    INJECTION,
    Conv,
    archived,
    billing_conversation,
    fenced_spans,
    texts,
)

from holon_ctx.ledger.episode_store import SqliteEpisodeStore
from holon_ctx.ledger.records import SideEffect, ToolStatus, WaitStatus
from holon_ctx.ledger.sqlite import SqliteStore
from holon_ctx.ledger.store import LedgerStore
from holon_ctx.memory.episodes import Claim, Episode, Span
from holon_ctx.memory.index import index_episode
from holon_ctx.memory.recall import RecallWeights, bm25_scores, query_terms, rank
from holon_ctx.memory.source import StoreEpisodeSource
from holon_ctx.projection.base.model import Priority, RecallQuery, Section
from holon_ctx.projection.planning.projector import Projection, Projector
from holon_ctx.projection.planning.view import WindowLimits, load_view

#: Page 0 of the recent window holds 16 turns, so a 40-turn ledger has older turns to recall.
LIMITS = WindowLimits(page_turns=16)


def _project(ledger, episodes, budget: int = 2048, at: str | None = None) -> Projection:  # type: ignore[no-untyped-def]
    source = StoreEpisodeSource(episodes, ledger) if episodes is not None else None
    return Projector(ledger, episodes=source, limits=LIMITS).project(budget_tokens=budget, at=at,
                                                                    verify=True)


def _query(ledger, text: str | None = None, window_first_seq: int | None = None) -> RecallQuery:  # type: ignore[no-untyped-def]
    view = load_view(ledger, limits=LIMITS)
    first = view.window[0].turn.seq if view.window else view.current.turn.seq
    words = text if text is not None else "\n".join(
        getattr(r.record, "text", "") for r in view.current.records)
    return RecallQuery(current=view.current,
                       window_first_seq=first if window_first_seq is None else window_first_seq,
                       work_item_id=view.current.turn.work_item_id, limit_pos=view.limit_pos,
                       query_text=words, refs=frozenset())


def _pg(kind: str, request: pytest.FixtureRequest) -> str | None:
    return request.getfixturevalue("pg_url") if kind == "postgres" else None


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres"])
def test_forty_turn_decision_survives_at_2048_through_its_episode(
        kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """In a 40-turn plain conversation the early decision reaches a 2,048-token prompt via its episode."""
    c, ids = billing_conversation()
    ledger, episodes, _ = archived(c.records, kind=kind, tmp=tmp_path, pg_url=_pg(kind, request))
    projection = _project(ledger, episodes)
    section = projection.section_text.get(Section.EPISODES, "")
    assert "PostgreSQL 16 with logical replication" in section
    assert f"message:{ids['decision']}" in section
    assert projection.used_tokens <= 2048
    assert [e.ref for e in projection.manifest.episodes][:1] == ["episode:e0-3"]
    assert projection.manifest.episodes[0].covers == ["turn:t0", "turn:t3"]


@pytest.mark.parametrize("budget", [2048, 4096])
def test_the_early_decision_is_reachable_with_the_default_window(budget: int) -> None:
    """The same 40-turn conversation, all of it inside window page 0 (64 turns), archived as a
    session archives by default (its newest turns kept): the early decision reaches the prompt
    through its episode, which stands for the turns it covers in the window too."""
    from holon_ctx.session_upkeep import CompactionPolicy

    c, _ = billing_conversation()
    ledger, episodes, _ = archived(c.records, recent=CompactionPolicy().recent_turns)
    p = Projector(ledger, episodes=StoreEpisodeSource(episodes, ledger)).project(
        budget_tokens=budget, verify=True)
    assert any(s.omitted for s in p.manifest.sections), "the budget binds"
    assert "PostgreSQL 16 with logical replication" in p.text
    shown = [e for e in p.manifest.episodes if e.representation != "omitted"]
    assert [e.ref for e in shown][:1] == ["episode:e0-3"]
    covered = {f"turn:{t}" for e in shown
               for t in episodes.get(e.ref.removeprefix("episode:")).turn_ids}  # type: ignore[union-attr]
    recent = next(s for s in p.manifest.sections if s.name == "recent_turns")
    assert not covered & set(recent.selected), "a covered turn is shown by its episode only"


def test_an_episode_names_the_records_a_pinned_turn_shows_instead_of_repeating_them() -> None:
    """The operator returns to billing anchored on the decision turn, which the archive holds:
    the turn is pinned and shown on its own; the recalled episode names its words instead of
    quoting them again, so no record's text is in the prompt twice."""
    c, ids = billing_conversation()
    decision_turn = next(r.turn_id for r in c.records
                         if getattr(r, "id", None) == ids["decision"])
    c.operator("Set up the replication slot for billing as decided.", anchor=decision_turn)
    ledger, episodes, _ = archived(c.records, recent=16)
    p = Projector(ledger, episodes=StoreEpisodeSource(episodes, ledger)).project(
        budget_tokens=32_768, verify=True)
    assert p.anchor_turn == f"turn:{decision_turn}"
    assert "episode:e0-3" in [e.ref for e in p.manifest.episodes]
    assert p.text.count("billing uses PostgreSQL 16 with logical replication") == 1
    section = p.section_text[Section.EPISODES]
    assert "its text is shown with its turn in this prompt" in section
    fences = re.findall(r'^<data (\S+) ', p.text, re.MULTILINE)
    assert len(fences) == len(set(fences))


def test_without_episode_memory_the_early_decision_is_out_of_view() -> None:
    """The control: without an episode source, a long enough conversation loses the decision.

    Denser prompts (RFC 0012-densea) fit the 40-turn conversation's one-line trail back to the
    decision at 2,048 tokens, so the control uses a longer one."""
    c, _ = billing_conversation(frontend_turns=80)
    ledger, _, _ = archived(c.records)
    projection = _project(ledger, None)
    assert "logical replication to the reporting replica" not in projection.text


def test_return_to_old_topic_recalls_its_decision_not_the_other_topics_details() -> None:
    """Returning to billing recalls the billing episode and no frontend episode or detail."""
    c, _ = billing_conversation()
    ledger, episodes, _ = archived(c.records)
    source = StoreEpisodeSource(episodes, ledger)
    assert [e.ref for e in source.recall(_query(ledger, window_first_seq=24), 12)] == [
        "episode:e0-3"]
    projection = _project(ledger, episodes)
    recalled = [e.ref for e in projection.manifest.episodes]
    assert recalled == ["episode:e0-3"]
    section = projection.section_text[Section.EPISODES]
    assert "integer cents" in section
    assert "30 seconds" in section
    for detail in ("teal", "gradient", "navigation", "Inter"):
        assert detail not in section


def test_a_new_topic_does_not_recall_the_unrelated_old_one() -> None:
    """A frontend question recalls frontend episodes, never the billing decision."""
    c, _ = billing_conversation()
    c.operator("For the website navigation bar, which gradient did we settle on?")
    ledger, episodes, _ = archived(c.records)
    source = StoreEpisodeSource(episodes, ledger)
    got = source.recall(_query(ledger, window_first_seq=24), 12)
    assert got, "the frontend episodes should match"
    assert all("PostgreSQL" not in texts(ep)[0] for ep in got)


def test_recall_returns_only_episodes_ending_before_the_window() -> None:
    """No episode reaching into the recent window is recalled (no turn rendered twice)."""
    c, _ = billing_conversation()
    ledger, episodes, _ = archived(c.records, recent=2, max_range=4)
    source = StoreEpisodeSource(episodes, ledger)
    for first in (0, 3, 4, 9, 20, 37):
        got = source.recall(_query(ledger, "billing replication website gradient", first), 50)
        assert all(episodes.get(ep.ref.removeprefix("episode:")).span.last_seq < first  # type: ignore[union-attr]
                   for ep in got)
    assert source.recall(_query(ledger, "billing", 0), 12) == []


@pytest.mark.parametrize("budget", [2048, 8192, 32768])
def test_projection_never_renders_an_episode_turn_in_recent_turns(budget: int) -> None:
    """Turns covered by recalled episodes are not among the recent turns' selected refs, even
    when a large budget reads deeper pages of the window."""
    c, _ = billing_conversation()
    ledger, episodes, _ = archived(c.records)
    projection = _project(ledger, episodes, budget=budget)
    covered = {f"turn:{t}" for e in projection.manifest.episodes
               for t in episodes.get(e.ref.removeprefix("episode:")).turn_ids}  # type: ignore[union-attr]
    recent = next(s for s in projection.manifest.sections if s.name == "recent_turns")
    assert covered
    assert not covered & set(recent.selected)


@pytest.mark.parametrize(("topic", "other", "query", "expect"), [
    ("我们决定账单服务使用数据库迁移方案，下周上线。", "前端导航栏采用渐变色和圆角按钮。",
     "账单服务的数据库迁移方案是什么？", "数据库迁移"),
    ("データベース移行は来週の火曜日に実施します。", "ナビゲーションバーのグラデーションを調整。",
     "データベースの移行はいつ？", "データベース移行"),
])
def test_cjk_recall_finds_the_matching_episode(topic: str, other: str, query: str,
                                              expect: str) -> None:
    """Chinese and Japanese queries recall the episode that shares their words (bigram BM25)."""
    c = Conv()
    c.operator(topic)
    c.assistant("好的。" if "我们" in topic else "了解しました。")
    c.operator(other)
    for _ in range(4):
        c.tick()
    ledger, episodes, _ = archived(c.records, recent=2, max_range=1)
    got = StoreEpisodeSource(episodes, ledger).recall(_query(ledger, query, 99), 12)
    assert got
    assert expect in texts(got[0])[0]
    assert other not in texts(got[0])[0]
    assert all(ep.priority is not Priority.PINNED for ep in got)


def test_bm25_ranks_the_rarer_term_higher_and_ties_break_on_the_newer_episode() -> None:
    """BM25 favours rare terms, and equal scores order newer episodes first."""
    postings = {"common": [(3, 1, 10), (2, 1, 10), (1, 1, 10)], "rare": [(1, 1, 10)]}
    scores = bm25_scores(["common", "rare"], {"common": 3, "rare": 1}, 3, 30,
                         lambda t, cap: postings[t][:cap], RecallWeights())
    assert scores[1] > scores[2] == scores[3] > 0
    assert rank(scores, set(), 3) == [1, 3, 2]
    assert rank({**scores, 4: 0.0}, {4}, 2) == [4, 1]


def test_query_terms_are_distinct_and_in_order() -> None:
    """Query terms keep first occurrences only, English words and CJK bigrams alike."""
    assert query_terms("Billing billing 数据库 数据") == ["billing", "数据", "据库"]


def _pending_deploy() -> tuple[Conv, str]:
    c = Conv()
    c.operator("Deploy the billing service to production with the new schema migration.")
    call = c.tool("deploy", "billing --prod", "started", status=ToolStatus.PENDING,
                  call_id="call-1", side_effect=SideEffect.UNKNOWN)
    c.operator("Meanwhile, rename the website hero banner to 'Welcome back' please.")
    c.assistant("Renamed the hero banner.")
    for _ in range(5):
        c.tick()
    return c, call


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres"])
def test_a_pending_tool_call_is_pinned_until_resolved(kind: str, tmp_path: Path,
                                                      request: pytest.FixtureRequest) -> None:
    """An episode holding a pending call with unknown side effect is PINNED, whatever the query,
    until a later run of the same call settles it."""
    c, call = _pending_deploy()
    ledger, episodes, archiver = archived(c.records, recent=3, max_range=1, kind=kind,
                                          tmp=tmp_path, pg_url=_pg(kind, request))
    source = StoreEpisodeSource(episodes, ledger)
    got = source.recall(_query(ledger, "something unrelated entirely", 99), 12)
    assert [ep.ref for ep in got][:1] == ["episode:e0-0"]
    assert got[0].priority is Priority.PINNED
    assert "pinned_unresolved" in got[0].reasons
    assert "STILL OPEN, pinned until resolved" in texts(got[0])[0]
    before = ledger.end_pos()

    c.records.clear()
    c.turn("task_result")
    c.tool("deploy", "billing --prod", "done", call_id="call-1", side_effect=SideEffect.COMPLETED)
    ledger.append(c.records)
    # Resolved in the unarchived tail: seen at recall time.
    got = source.recall(_query(ledger, "something unrelated entirely", 99), 12)
    assert all(ep.priority is not Priority.PINNED for ep in got)
    # As of before the resolution it is still pinned.
    at_before = _query(ledger, "x", 99)
    at_before = RecallQuery(current=at_before.current, window_first_seq=99, work_item_id=None,
                            limit_pos=before, query_text="x", refs=frozenset())
    assert source.recall(at_before, 12)[0].priority is Priority.PINNED
    # Once archived, the resolution is recorded exactly and holds at every later position.
    for _ in range(4):
        c.records.clear()
        c.tick()
        ledger.append(c.records)
    assert archiver.archive().resolved >= 2
    assert all(r.exact for r in episodes.open_rows(1 << 40, 0, 10))
    got = source.recall(_query(ledger, "deploy billing", 99), 12)
    assert got[0].priority is not Priority.PINNED
    assert "resolved since" in texts(got[0])[0]
    del call


def test_a_pending_approval_is_pinned_and_unpinned_when_the_wait_resolves() -> None:
    """An open approval wait pins its episode; resolving the wait releases it."""
    c = Conv()
    c.operator("Ship the invoice export feature once security signs off.")
    c.open_wait("approval-42", "security approval for the invoice export")
    for _ in range(4):
        c.tick()
    ledger, episodes, _ = archived(c.records, recent=2, max_range=1)
    ep = episodes.get("e0-0")
    assert ep is not None
    assert [u.kind for u in ep.unresolved] == ["approval_pending"]
    source = StoreEpisodeSource(episodes, ledger)
    assert source.recall(_query(ledger, "anything", 99), 12)[0].priority is Priority.PINNED
    c.records.clear()
    c.turn("approval_decision")
    c.say("Approved.")
    c.close_wait("approval-42")
    ledger.append(c.records)
    got = source.recall(_query(ledger, "anything", 99), 12)
    assert all(g.ref != "episode:e0-0" or g.priority is not Priority.PINNED for g in got)


def test_open_todos_make_an_episode_high_until_done() -> None:
    """Open todos keep their episode HIGH; once the work item is done they no longer count."""
    c = Conv()
    c.turn("operator_input", work_item="wi1")
    c.say("Migrate the billing tables.")
    c.work("wi1", objective="migrate billing tables", todos=[("write migration", True),
                                                             ("backfill invoices", False)])
    for _ in range(4):
        c.tick()
    ledger, episodes, _ = archived(c.records, recent=2, max_range=1)
    source = StoreEpisodeSource(episodes, ledger)
    first = source.recall(_query(ledger, "unrelated", 99), 12)[0]
    assert first.priority is Priority.HIGH
    assert "open_unresolved" in first.reasons
    c.records.clear()
    c.turn("task_result", work_item="wi1")
    c.work("wi1", status=__import__("holon_ctx.ledger.records", fromlist=["x"]).WorkItemStatus.DONE)
    ledger.append(c.records)
    got = source.recall(_query(ledger, "unrelated", 99), 12)
    assert all("open_unresolved" not in g.reasons for g in got)


def test_an_injection_in_an_old_tool_output_stays_fenced_data() -> None:
    """Text planted in an archived tool output cannot leave its fence or pose as the operator."""
    c = Conv()
    c.operator("Fetch the billing status page and summarise it.")
    c.tool("http_get", "https://status.example/billing", INJECTION, status=ToolStatus.ERROR,
           exit_code=1)
    c.event("webhook", INJECTION)
    c.operator("Thanks. Now something else entirely: the website footer colour.")
    for _ in range(20):
        c.operator("Website footer colour, another variant please.")
    c.operator("What did the billing status page say?")
    ledger, episodes, _ = archived(c.records, recent=4, max_range=3)
    got = StoreEpisodeSource(episodes, ledger).recall(_query(ledger, "billing status page", 99), 12)
    text = texts(got[0])[0]
    assert "IGNORE PREVIOUS INSTRUCTIONS" in text
    for inside, line in fenced_spans(text):
        if "IGNORE PREVIOUS" in line or "wire $50,000" in line:
            assert inside
    assert "operator (trusted)" not in text
    assert "operator (claimed)" in text
    assert "\u2039/data" in text
    projection = _project(ledger, episodes, budget=8192)
    for inside, line in fenced_spans(projection.text):
        if "IGNORE PREVIOUS" in line:
            assert inside


def test_episode_texts_are_block_safe() -> None:
    """Full, compact and ref texts start with a non-blank line and end with one newline."""
    c, _ = billing_conversation()
    ledger, episodes, _ = archived(c.records)
    got = StoreEpisodeSource(episodes, ledger).recall(_query(ledger, "billing"), 12)
    assert got
    for ep in got:
        for text in texts(ep):
            assert text.endswith("\n")
            assert not text.endswith("\n\n")
            assert text.split("\n", 1)[0].strip()
        assert texts(ep)[2].count("\n") == 1
        assert "holon-ctx episodes show e0-3" in texts(ep)[2]


def test_memory_and_sqlite_stores_recall_identically(tmp_path: Path) -> None:
    """The same ledger gives the same recalled episodes, scores and texts from either store."""
    c, _ = billing_conversation()
    results = []
    for kind in ("memory", "sqlite"):
        ledger, episodes, _ = archived(c.records, recent=6, max_range=3, kind=kind, tmp=tmp_path)
        results.append(StoreEpisodeSource(episodes, ledger).recall(
            _query(ledger, "billing replication gradient navigation", 99), 12))
    assert len(results[0]) == 12
    assert results[0] == results[1]


_RECALL_IN_A_PROCESS = """
import sys
sys.path.insert(0, sys.argv[1])
from test_episodes_kit import archived, billing_conversation, texts
from test_episodes_recall import _query
from holon_ctx.memory.source import StoreEpisodeSource
c, _ = billing_conversation()
ledger, episodes, _ = archived(c.records, recent=6, max_range=2)
source = StoreEpisodeSource(episodes, ledger)
got = source.recall(_query(ledger, "website navigation gradient billing", 99), 12)
assert got == source.recall(_query(ledger, "website navigation gradient billing", 99), 12)
print(repr([(e.ref, e.score, *texts(e)) for e in got]))
"""


def test_recall_is_deterministic_across_processes() -> None:
    """The same query on the same ledger recalls byte-identical episodes, scores and texts in
    processes whose string hashing differs (PYTHONHASHSEED): no order may come from a set or
    a dict keyed by text, which would differ from one runtime process to the next."""
    outputs = set()
    for seed in ("0", "1", "12345"):
        done = subprocess.run([sys.executable, "-c", _RECALL_IN_A_PROCESS, str(Path(__file__).parent)],
                              env={**os.environ, "PYTHONHASHSEED": seed}, capture_output=True,
                              text=True, check=False)
        assert done.returncode == 0, done.stderr
        outputs.add(done.stdout)
    assert len(outputs) == 1
    assert outputs.pop().count("episode:") >= 2


def test_a_resolved_wait_is_not_unresolved_in_its_episode() -> None:
    """A wait opened and resolved inside one range is a result, not an unresolved item."""
    c = Conv()
    c.operator("Wait for CI on the billing branch.")
    c.open_wait("ci-7", "CI run 7")
    c.event("ci", "CI run 7 passed", wait="ci-7")
    c.close_wait("ci-7", WaitStatus.RESOLVED)
    for _ in range(4):
        c.tick()
    _, episodes, _ = archived(c.records, recent=2, max_range=2)
    first, second = list(episodes.iter_episodes())[:2]
    assert (first.closed_by, first.unresolved[0].kind) == ("wait_start", "wait_open")
    assert second.span.first_seq == 1
    assert not second.unresolved
    assert [r.kind for r in second.results] == ["external_event", "wait_resolved"]


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres"])
def test_recall_as_of_an_earlier_position_counts_the_corpus_as_reading_it_whole(
        kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """A recall as of a position before episodes archived later states its BM25 statistics of
    the episodes visible then — the corpus and each term's document frequency — now as the
    totals less what lies past the bound (the newest rows and postings); at every bound they
    are what counting the rows and postings up to it gives, and so are the scores."""
    conv, _ = billing_conversation()
    ledger, episodes, _ = archived(conv.records, recent=4, max_range=4, kind=kind, tmp=tmp_path,
                                   pg_url=_pg(kind, request))
    every, _ = episodes.corpus()
    assert every >= 4
    source = StoreEpisodeSource(episodes, ledger)
    qterms = query_terms("billing PostgreSQL replica frontend design review lag")
    for visible in range(every):
        docs, total = episodes.corpus_through(visible)
        rows = [ep for num, ep in episodes.episodes(range(1, every + 1)).items() if num <= visible]
        assert docs == len(rows)
        if kind == "sqlite":  # the rows summed up to the bound, as the store did before
            assert (docs, total) == episodes._db.execute(  # type: ignore[attr-defined]
                "SELECT count(*), coalesce(sum(length), 0) FROM episodes WHERE num <= ?",
                (visible,)).fetchone()
        read = {t: n for t in qterms if (n := len(episodes.postings(t, visible, 1 << 30)))}
        assert source_df(source, qterms, visible) == read
        expected = bm25_scores(qterms, read, docs, total,
                               lambda t, cap: episodes.postings(t, every, cap), RecallWeights())
        assert source._text_scores(qterms, visible, every) == expected


def source_df(source: StoreEpisodeSource, qterms: list[str], visible: int) -> dict[str, int]:
    """The document frequencies a recall as of ``visible`` uses (:func:`_df_through`)."""
    from holon_ctx.memory.source import _df_through

    store = source.episodes
    every, _, df = store.corpus_df(qterms)
    return _df_through(store, df, visible, every)


class _ArchivesAfterTotals:
    """An episode store (one runtime's connection) after whose first read of the corpus totals
    ``archive`` runs: another runtime's archive run, committed on its own connection."""

    def __init__(self, store: Any, archive: Callable[[], object]) -> None:
        self._store, self._archive, self.archived = store, archive, False

    def __getattr__(self, name: str) -> Any:
        read = getattr(self._store, name)
        if name not in ("corpus", "corpus_df") or self.archived:
            return read

        def then_archive(*args: Any) -> Any:
            out = read(*args)
            self.archived = True
            self._archive()
            return out
        return then_archive


def _billing_episode(n: int) -> Episode:
    return Episode(
        id=f"e{n}", span=Span(first_turn=f"turn:t{n}", last_turn=f"turn:t{n}", first_seq=n,
                              last_seq=n),
        turn_ids=[f"t{n}"], source_refs=[f"turn:t{n}"], digest=f"sha256:{n:064x}",
        owner="conversation", closed_by="max_range",
        operator_intents=[Claim(kind="request", text="operator request", refs=[f"turn:t{n}"],
                                quote=f"billing replica lag {n}", origin="operator",
                                trust="trusted_operator")])


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
@pytest.mark.parametrize("past_the_moment", [0, 1])
def test_recall_statistics_are_of_one_moment_while_another_runtime_archives(
        kind: str, past_the_moment: int, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """Found by the slow tier's eight-runtime PostgreSQL test (continue == rebuild: one request
    of 80 differed from the rebuild's, both reading the same snapshots and newest episode). A
    recall read the corpus totals, then its terms' document frequencies, each at its own moment:
    an episode another runtime archived between the two was in the frequencies and not in the
    totals (or, for a recall as of an earlier position, in the postings counted past it and not
    in the totals), and the request scored its episodes otherwise than any later read at its
    position does. Here a second connection archives an episode holding the query's words right
    after the recall's first read of the totals: the scores are those read afterwards with
    nothing archived between, as a rebuild reads them — the request's moment seeing every
    episode stored then, or all but the newest (``past_the_moment``)."""
    ledger: LedgerStore
    if kind == "sqlite":
        SqliteStore(tmp_path / "l.db").close()
        ledger = SqliteStore(tmp_path / "l.db")
        writer, reader = (SqliteEpisodeStore(tmp_path / "l.db") for _ in range(2))
    else:
        from holon_ctx.postgres import PostgresStore
        from holon_ctx.postgres.episodes import PostgresEpisodeStore

        url, key = request.getfixturevalue("pg_url"), request.getfixturevalue("pg_session_key")
        ledger = PostgresStore(url, session=key)
        writer, reader = (PostgresEpisodeStore(url, session=key) for _ in range(2))
    try:
        writer.append([index_episode(_billing_episode(n)) for n in range(1, 4)])
        visible = 3 - past_the_moment
        qterms = query_terms("billing replica lag")
        before = reader.df(qterms)
        racing = _ArchivesAfterTotals(reader, lambda: writer.append(
            [index_episode(_billing_episode(4))]))
        during = StoreEpisodeSource(racing, ledger)._text_scores(qterms, visible, visible)
        assert racing.archived
        assert all(reader.df(qterms)[t] == before[t] + 1 for t in qterms), "it binds"
        after = StoreEpisodeSource(reader, ledger)._text_scores(qterms, visible, visible)
        assert during == after
    finally:
        for store in (reader, writer, ledger):
            store.close()


def test_a_recall_followed_by_its_twin_reads_the_postings_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A session's walk recalls the operator's words to decide whether to re-plan, and the
    re-plan recalls them again (other links, other records shown): the second reuses the text
    stage — no postings read — and recalls what a fresh source recalls. Once the archive grows
    (another compaction), the same words are scored afresh over the larger corpus."""
    from test_episodes_kit import policy

    from holon_ctx.memory.archiver import Archiver

    c, _ = billing_conversation()
    ledger, episodes, _ = archived(c.records, recent=24)
    reads: list[str] = []
    postings = episodes.postings

    def counted(term: str, max_num: int, cap: int) -> list[tuple[int, int, int]]:
        reads.append(term)
        return postings(term, max_num, cap)
    monkeypatch.setattr(episodes, "postings", counted)
    source = StoreEpisodeSource(episodes, ledger)
    words = "billing replication website gradient"
    gap = _query(ledger, words, window_first_seq=30)
    first = source.recall(gap, 12)
    assert first, "the words recall an episode"
    assert reads, "the first recall scores the words"
    read_once = len(reads)
    plan = attrs.evolve(gap, refs=frozenset({"message:x"}), shown=frozenset({"message:y"}))
    assert source.recall(plan, 12) == StoreEpisodeSource(episodes, ledger).recall(plan, 12)
    assert len(reads) == 2 * read_once, "the twin read none; the fresh source read once"
    Archiver(ledger, episodes, policy=policy(2, 16)).archive()
    reads.clear()
    later = _query(ledger, words, window_first_seq=30)
    again = source.recall(later, 12)
    assert reads, "a grown archive is scored afresh"
    assert again == StoreEpisodeSource(episodes, ledger).recall(later, 12)
