"""Issue 12 item 8 on the CLI: a ledger read from a file gets, in memory, the episodes a library
session would have archived by then, whenever the budget binds (``project``, ``preview``,
``explain``, ``diff``; both modes and the provider formats)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from stateless_cli import stateless

import holon_ctx
from holon_ctx.cli.main import main
from holon_ctx.ledger.codec import write_jsonl
from holon_ctx.ledger.importer import import_jsonl
from holon_ctx.ledger.memory import MemoryStore
from holon_ctx.projection.planning.projector import Projector
from holon_ctx.projection.session.session import Layout, SessionProjector

#: The operator's early decision and the exact words of it that must reach the prompt (the
#: "marker" phrasing of tests/test_what_the_prompt_keeps.py's item 8).
_QUESTION = "Which queue for the notifications service: Kafka or RabbitMQ?"
_DECISION = ("Decision: notifications use RabbitMQ 3.13 with quorum queues, at most 3 replicas; "
             "never enable lazy queues.")
_BACK = "Back to the notifications queue: set it up as we decided."
_EXACT = ("RabbitMQ 3.13 with quorum queues, at most 3 replicas", "never enable lazy")


def _conversation(turns: int, path: Path) -> Path:
    """A plain conversation of about ``turns`` turns (no work items, no pins) written as a ledger
    JSONL file: the decision at turn 3, chart chatter, then the operator returns to it."""
    store = MemoryStore()
    # No compaction: the file holds only the ledger, as any exported or imported one does.
    session = holon_ctx.open_session(store, compaction=None)
    session.operator_message(_QUESTION)
    session.assistant_message("RabbitMQ is simpler to run; Kafka keeps a replayable log. Which "
                              "do you prefer?")
    session.operator_message(_DECISION)
    session.assistant_message("Recorded.")
    palette = ["amber", "indigo", "mint", "sand"]
    for i in range((turns - 5) // 2):
        session.operator_message(f"Dashboard chart {i}: use a {palette[i % 4]} palette, stacked "
                                 "bars and a legend on the right with 12px labels.")
        session.assistant_message(f"Chart {i} updated: {palette[i % 4]} palette, stacked bars, "
                                  "right legend, 12px labels, tooltips on hover, responsive grid "
                                  "at 3 columns. " * 3)
    session.operator_message(_BACK)
    records = [s.record for s in store.records_between(0, store.end_pos())]
    session.close()
    out = path / f"conv{turns}.jsonl"
    with out.open("wb") as f:
        write_jsonl(records, f)
    return out


def _run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    capsys.readouterr()
    assert main(stateless(argv)) == 0
    return capsys.readouterr().out


@pytest.fixture(scope="module")
def conversations(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    tmp = tmp_path_factory.mktemp("plain")
    return {turns: _conversation(turns, tmp) for turns in (30, 64, 65, 200)}


@pytest.mark.parametrize("fmt", ["text", "openai"])
@pytest.mark.parametrize("mode", ["session", "stateless"])
@pytest.mark.parametrize("budget", [2048, 4096])
@pytest.mark.parametrize("turns", [30, 64, 65, 200])
def test_an_early_decision_reaches_the_prompt_of_a_file_ledger(
        conversations: dict[int, Path], capsys: pytest.CaptureFixture[str],
        turns: int, budget: int, mode: str, fmt: str) -> None:
    """``project conv.jsonl``: the decision's words and the operator's exact constraint are in
    the prompt (or the provider messages) at 2k and 4k, in a session and a stateless projection."""
    out = _run(capsys, ["project", str(conversations[turns]), "--budget", str(budget),
                        "--mode", mode, "--format", fmt])
    text = ("\n".join(m["content"] for m in json.loads(out)["messages"]) if fmt == "openai"
            else out)
    for words in _EXACT:
        assert words in text, (words, turns, budget, mode, fmt)


@pytest.mark.parametrize("mode", ["session", "stateless"])
def test_the_manifest_says_the_episodes_were_archived_in_memory(
        conversations: dict[int, Path], capsys: pytest.CaptureFixture[str], mode: str) -> None:
    """Where the budget binds, the manifest lists recalled episodes and says they come from an
    in-memory archive of the file; the file itself is left as it was."""
    src = conversations[200]
    before = src.read_bytes()
    manifest = json.loads(_run(capsys, ["project", str(src), "--budget", "2048", "--json",
                                        "--mode", mode]))
    assert src.read_bytes() == before
    assert manifest["window"]["episodes_from"] == "in-memory archive"
    assert [e for e in manifest["episodes"] if e["representation"] != "omitted"]
    assert any(s["omitted"] for s in manifest["sections"]), "the budget binds"


@pytest.mark.parametrize("mode", ["session", "stateless"])
def test_a_budget_that_does_not_bind_archives_nothing(
        conversations: dict[int, Path], capsys: pytest.CaptureFixture[str], mode: str) -> None:
    """At a budget that fits the whole conversation the prompt is the one planned without
    episodes (the library's compaction would not change it either): no episode, no marker."""
    src = conversations[30]
    manifest = json.loads(_run(capsys, ["project", str(src), "--budget", "60000", "--json",
                                        "--mode", mode]))
    assert not any(s["omitted"] for s in manifest["sections"]), "the budget does not bind"
    assert manifest["episodes"] == []
    assert "episodes_from" not in manifest["window"]
    # The same bytes as the plan made with no episode source at all.
    text = _run(capsys, ["project", str(src), "--budget", "60000", "--mode", mode])
    store = MemoryStore()
    import_jsonl(src, store)
    plain = (SessionProjector(store, layout=Layout.TEXT).request(budget_tokens=60000).text
             if mode == "session" else Projector(store).project(budget_tokens=60000).text)
    assert text == plain


def test_preview_explain_and_diff_see_the_archived_decision(
        conversations: dict[int, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """``preview`` shows the recalled episode holding the decision; ``explain`` places the
    decision's turn in that episode; ``diff`` between 2k and 4k reads the same archive."""
    src = str(conversations[200])
    preview = _run(capsys, ["preview", src, "--budget", "2048", "--plain", "--width", "200"])
    assert "episode:" in preview
    manifest = json.loads(_run(capsys, ["project", src, "--budget", "2048", "--json"]))
    episode = next(e for e in manifest["episodes"] if e["representation"] != "omitted")
    first = episode["covers"][0]
    explained = json.loads(_run(capsys, ["explain", src, first, "--budget", "2048", "--json"]))
    assert episode["ref"] in json.dumps(explained)
    diffed = json.loads(_run(capsys, ["diff", src, "--budget", "2048", "--budget", "4096",
                                      "--json"]))
    assert episode["ref"] in json.dumps(diffed)


@pytest.mark.parametrize("budget", [2048, 4096])
def test_a_replay_of_a_file_grows_episodes_while_the_budget_binds(
        conversations: dict[int, Path], budget: int) -> None:
    """``replay conv.jsonl``: the episodes grow along the calls as a session's would, and the
    last call's request holds the early decision's exact words."""
    from holon_ctx.cli.file_episodes import ReplayCompaction
    from holon_ctx.projection.measure.cost import PRICES
    from holon_ctx.projection.measure.replay import replay
    from holon_ctx.tokens import default_counter

    store = MemoryStore()
    import_jsonl(conversations[200], store)
    grown = ReplayCompaction(store)
    session = SessionProjector(store, layout=Layout.MESSAGES, episodes=grown.source)
    replay(store, budget, PRICES["anthropic"], default_counter(), session_projector=session,
           before_call=grown.before_call)
    assert grown.episodes.count() > 0
    text = session.request(budget_tokens=budget).text
    for words in _EXACT:
        assert words in text, (words, budget)


def test_a_replay_whose_budget_never_binds_is_unchanged(
        conversations: dict[int, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """At a budget that fits every call, ``replay`` archives nothing: its figures are those of
    the replay planned without episodes."""
    from holon_ctx.cli.replay_cmd import _report_json
    from holon_ctx.projection.measure.cost import PRICES
    from holon_ctx.projection.measure.replay import replay
    from holon_ctx.tokens import default_counter

    src = conversations[30]
    out = json.loads(_run(capsys, ["replay", str(src), "--budget", "60000", "--json",
                                   "--baseline", "stateless"]))
    store = MemoryStore()
    import_jsonl(src, store)
    plain = replay(store, 60000, PRICES["anthropic"], default_counter(),
                   approaches=("session", "stateless"))
    assert out == json.loads(json.dumps(_report_json(plain, 60000, PRICES["anthropic"])))


def test_the_archive_is_made_as_of_the_projected_turn(
        conversations: dict[int, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """``--at``: the in-memory archive is the one a session would hold at that turn, so no
    recalled episode covers any of the 16 turns before it (nor a later one)."""
    store = MemoryStore()
    import_jsonl(conversations[200], store)
    turns = [s.ref for s in store.records_between(0, store.end_pos()) if s.ref.startswith("turn:")]
    index = len(turns) // 2
    at = turns[index]
    manifest = json.loads(_run(capsys, ["project", str(conversations[200]), "--budget", "2048",
                                        "--at", at, "--json"]))
    assert manifest["current_turn"] == at
    assert manifest["window"]["episodes_from"] == "in-memory archive"
    assert manifest["episodes"]
    for episode in manifest["episodes"]:
        # ``covers`` is the episode's first and last turn.
        assert turns.index(episode["covers"][-1]) <= index - 16, (episode, at)


@pytest.mark.parametrize("budget", [1500, 3000, 60000])
def test_a_replay_archives_where_the_session_compacted(budget: int) -> None:
    """``replay``'s in-memory archive follows the session's own schedule (one code path,
    CompactionSchedule): on the ledger a session wrote through its helpers — asking before
    every reply, compacting by itself under the default policy — the replay archives before
    the calls of the same turns, counted by seq, at budgets that bind often, now and then and
    never (every 16 turns then)."""
    from holon_ctx.cli.file_episodes import ReplayCompaction
    from holon_ctx.projection.measure.cost import PRICES
    from holon_ctx.projection.measure.replay import replay
    from holon_ctx.tokens import default_counter

    store = MemoryStore()
    session = holon_ctx.open_session(store)
    compacted: list[int] = []
    inner = session.compact

    def compact(policy: object = None) -> object:
        current = store.turn((session.current_turn or "")[5:])
        assert current is not None
        compacted.append(current.record.seq)  # type: ignore[union-attr]
        return inner(policy)  # type: ignore[arg-type]
    session.compact = compact  # type: ignore[method-assign]
    for k in range(60):
        if k % 7 == 0:
            session.operator_message(f"Task {k}: make module_{k} handle empty input; "
                                     "keep the public API stable.")
        session.next_request(budget).openai_messages  # noqa: B018 - asked before each reply
        session.assistant_message(f"Running the tests for module_{k}.", tool_calls=[
            holon_ctx.ToolCall(f"c{k}", "bash", f"pytest -q tests/test_module_{k}.py")])
        session.tool_result(f"c{k}", f"tests/test_module_{k}.py::test_case PASSED\n" * (5 + k % 9))
    session.next_request(budget).openai_messages  # noqa: B018 - the next call
    session.close()
    assert len(compacted) >= 3

    grown = ReplayCompaction(store)
    projector = SessionProjector(store, layout=Layout.MESSAGES, episodes=grown.source)
    replay(store, budget, PRICES["anthropic"], default_counter(), session_projector=projector,
           before_call=grown.before_call)
    assert grown.archived_at == compacted
