"""Issue 25 items 4 and 5 (RFC 0030): required items at a quarter to three quarters of the whole
size, and older topics ranked by what the current input is about.

The ledgers are of the shape of Holon's projection-eval cases (long conversations with an early
decision and a compaction anchor; a topic switch and a return), built here with other words, in
English and Chinese. "Whole size" is the tokens the prompt uses when every item fits.
"""

from __future__ import annotations

import pytest
from projection_builders import LedgerBuilder, selected_refs
from session_helpers import turn_ids

from holon_ctx.projection.base.topics import RELEVANT, input_topic, is_relevant
from holon_ctx.projection.planning.projector import Projection
from holon_ctx.projection.planning.view import units_of
from holon_ctx.projection.session.session import SessionProjector, SessionRequest

_FILLER = {
    "en": ("We went over the wording of the changelog entry for the release notes once more; "
           "the reviewers want shorter sentences and fewer adjectives in the summary."),
    "zh": "我们又讨论了发布说明里更新日志条目的措辞，评审希望句子更短，摘要里的形容词更少。",
}
_WORDS = {
    "en": {"ask": "For the ledger storage layer, which database engine should we settle on?",
           "decision": "Decision: the ledger store runs on PostgreSQL 15; code word HERON.",
           "compact": "Compacting the conversation so far.",
           "anchor": ("Compaction anchor: settled so far, PostgreSQL 15 for the ledger store "
                      "(HERON); open: the migration guide."),
           "wait": "migration guide review by the DBA team",
           "current": ("Back to the ledger store on PostgreSQL (HERON): what does the migration "
                       "guide need first?")},
    "zh": {"ask": "账本存储层到底选哪个数据库引擎？",
           "decision": "决定：账本存储使用 PostgreSQL 15，代号 苍鹭。",
           "compact": "压缩目前为止的对话。",
           "anchor": "压缩锚点：已定账本存储使用 PostgreSQL 15（苍鹭）；待办：迁移指南。",
           "wait": "数据库团队审阅迁移指南",
           "current": "回到账本存储和 PostgreSQL（苍鹭）：迁移指南首先需要什么？"},
}


def continuity(turns: int, decision_turn: int, lang: str) -> tuple[LedgerBuilder, list[str]]:
    """A long plain conversation: an early decision, filler, a compaction anchor three quarters
    in with an open obligation (a wait of the work item), and a current input referring back."""
    w = _WORDS[lang]
    b = LedgerBuilder()
    required: list[str] = []
    for t in range(1, turns):
        if t == decision_turn:
            b.operator(w["ask"])
            required.append(f"brief:{b.brief(w['decision'])}")
        elif t == turns * 3 // 4:
            b.operator(w["compact"], work_item="wi1")
            b.work_item("wi1", objective="ledger store migration")
            required.append(f"brief:{b.brief(w['anchor'])}")
            b.open_wait("guide-review", w["wait"])
        else:
            b.operator(f"{t}: {_FILLER[lang]}")
            b.assistant(f"{_FILLER[lang]} ({t})")
    current = b.operator(w["current"], work_item="wi1")
    required.append(f"turn:{current}")
    return b, required


def whole_size(b: LedgerBuilder) -> int:
    return b.project(1_000_000).manifest.used_tokens


def session_request(b: LedgerBuilder, budget: int) -> SessionRequest:
    return SessionProjector(b.store()).request(budget_tokens=budget)


def refs_of(p: Projection | SessionRequest) -> set[str]:
    return {ref for s in p.manifest.sections for ref in s.selected}


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize(("turns", "decision_turn"), [(20, 3), (40, 4), (60, 2)])
@pytest.mark.parametrize("fraction", [0.25, 0.5, 0.75])
def test_required_items_come_before_older_evidence(turns: int, decision_turn: int, lang: str,
                                                   fraction: float) -> None:
    """The early decision, the compaction anchor and the open obligation are in the prompt at
    a quarter, half and three quarters of the whole size, stateless and in a session."""
    b, required = continuity(turns, decision_turn, lang)
    budget = int(whole_size(b) * fraction)
    wait_text = _WORDS[lang]["wait"]
    p = b.project(budget)
    assert set(required) <= set(selected_refs(p)), (turns, fraction, lang)
    assert wait_text in p.text
    request = session_request(b, budget)
    assert set(required) <= refs_of(request), (turns, fraction, lang)
    assert wait_text in request.text


def test_the_decision_turn_says_why_it_ranks_first() -> None:
    """The manifest names the reason: the decision's turn shares terms with the input."""
    b, required = continuity(40, 4, "en")
    p = b.project(int(whole_size(b) * 0.25))
    decision = required[0]
    owner = next(r.turn_id for r in b.records if f"brief:{r.id}" == decision)  # type: ignore[attr-defined]
    items = {it["key"]: it for s in p.manifest.sections for it in s.items}
    assert RELEVANT in items[f"turn:{owner}"]["reasons"]


# -- item 5: topics ---------------------------------------------------------------------------
_TOPICS = {
    "en": {"a": ["Let us pick the retry policy for the payments webhook consumer.",
                 "Should the webhook retries back off exponentially or at a fixed interval?"],
           "a_brief": "Decision: webhook retries back off exponentially, capped at 6 attempts.",
           "a_action": "Action: draft the webhook retry runbook for the payments on-call.",
           "b": ["Switching subject: the dashboard colour theme needs a dark mode.",
                 "Which contrast ratio should dark mode text meet on the dashboard?",
                 "And the chart palette for dark mode?"],
           "b_brief": "Detail: dark mode text uses contrast ratio 7:1; chart palette viridis.",
           "return": "Back to the payments webhook retries: how many attempts did we settle on?",
           "b_current": "For the dashboard dark mode, which chart palette do we ship?"},
    "zh": {"a": ["我们来确定支付回调消费者的重试策略。", "回调重试应该指数退避还是固定间隔？"],
           "a_brief": "决定：回调重试指数退避，最多六次。",
           "a_action": "行动：为支付值班编写回调重试手册。",
           "b": ["换个话题：仪表盘配色需要深色模式。", "深色模式文字的对比度应该是多少？",
                 "深色模式的图表调色板呢？"],
           "b_brief": "细节：深色模式文字对比度七比一；图表调色板用翠绿色系。",
           "return": "回到支付回调重试：我们定的是最多几次？",
           "b_current": "仪表盘深色模式最终用哪个图表调色板？"},
}


def return_to_old_topic(lang: str, b_turns: int) -> tuple[LedgerBuilder, str, str]:
    """Topic A with its decision, ``b_turns`` turns of topic B with a detail, then a return to
    A. Returns the builder, A's decision ref and B's detail ref."""
    w = _TOPICS[lang]
    b = LedgerBuilder()
    b.operator(w["a"][0])
    b.assistant(w["a"][1])
    b.operator(w["a"][1])
    decision = f"brief:{b.brief(w['a_brief'])}"
    detail = ""
    for i in range(b_turns):
        b.operator(w["b"][i % len(w["b"])] + f" ({i})")
        if i == b_turns // 2:
            detail = f"brief:{b.brief(w['b_brief'])}"
        else:
            b.assistant(_FILLER[lang])
    b.operator(w["return"])
    return b, decision, detail


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("b_turns", [6, 20, 50])
@pytest.mark.parametrize("fraction", [0.5, 0.75])
def test_a_return_to_an_old_topic_shows_its_decision_before_the_newer_topic(
        lang: str, b_turns: int, fraction: float) -> None:
    """The old topic's decision is shown and the unrelated newer topic's detail is not, at half
    and three quarters of the whole size, stateless and in a session."""
    b, decision, detail = return_to_old_topic(lang, b_turns)
    budget = int(whole_size(b) * fraction)
    for refs in (set(selected_refs(b.project(budget))), refs_of(session_request(b, budget))):
        assert decision in refs
        assert detail not in refs


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_at_every_budget_the_newer_detail_never_displaces_the_old_decision(lang: str) -> None:
    """From a third of the whole size to the whole less one token, the old topic's decision is
    shown and the newer topic's unrelated detail is not."""
    b, decision, detail = return_to_old_topic(lang, 12)
    whole = whole_size(b)
    for budget in [*range(whole // 3, whole, max(1, whole // 23)), whole - 1]:
        refs = set(selected_refs(b.project(budget)))
        assert decision in refs, budget
        assert detail not in refs, budget


def new_topic(lang: str, a_turns: int) -> tuple[LedgerBuilder, str, str]:
    """Topic A ending with an action, then topic B up to its current input; returns the builder,
    A's action ref and the current turn's ref."""
    w = _TOPICS[lang]
    b = LedgerBuilder()
    for i in range(a_turns):
        b.operator(w["a"][i % 2] + f" ({i})")
        b.assistant(_FILLER[lang])
    b.operator(w["a"][1])
    action = f"brief:{b.brief(w['a_action'])}"
    for i in range(3):
        b.operator(w["b"][i])
        b.assistant(w["b_brief"] if i == 1 else _FILLER[lang])
    current = b.operator(w["b_current"])
    return b, action, f"turn:{current}"


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("a_turns", [2, 10, 30])
@pytest.mark.parametrize("fraction", [0.5, 0.75, 0.95, 1])
def test_a_new_topic_does_not_carry_the_abandoned_action(lang: str, a_turns: int,
                                                        fraction: float) -> None:
    """The abandoned topic's action is the first evidence to go: not shown at half, three
    quarters and 95% of the whole size, nor at the whole size less one token; the current input
    is. (Stateless only: a session shows what it appended since its last re-plan as it was sent,
    RFC 0030 "Limits".)"""
    b, action, current = new_topic(lang, a_turns)
    whole = whole_size(b)
    budget = whole - 1 if fraction == 1 else int(whole * fraction)
    refs = set(selected_refs(b.project(budget)))
    assert current in refs
    assert action not in refs


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("a_turns", [2, 10, 30])
@pytest.mark.parametrize("fraction", [0.5, 0.75, 0.95, 1])
def test_a_session_drops_the_abandoned_action_at_the_topic_switch(lang: str, a_turns: int,
                                                                  fraction: float) -> None:
    """In a session (a request at every turn), the last request does not show topic A's action
    at half, three quarters and 95% of the session's whole size (its last request when every
    record fits), nor at that size less one token; the current input is in it. The turn to
    topic B re-plans (``topic_changed``) where the history showed the action as planned for
    topic A or appended since."""
    b, action, current = new_topic(lang, a_turns)
    whole = SessionProjector(b.store()).request(budget_tokens=1_000_000).request_tokens
    budget = whole - 1 if fraction == 1 else int(whole * fraction)
    store = b.store()
    session = SessionProjector(store)
    for turn_id in turn_ids(store):
        request = session.request(budget_tokens=budget, at=turn_id)
    assert f"turn:{turn_id}" == current
    assert current in refs_of(request)
    assert action not in refs_of(request), budget


@pytest.mark.parametrize(("text", "turn_text", "relevant"), [
    ("Back to the payments webhook retries", "webhook retries back off", True),
    ("Back to the payments webhook retries", "the dashboard dark mode", False),
    ("回到支付回调重试", "回调重试指数退避", True),
    ("回到支付回调重试", "深色模式的图表调色板", False),
])
def test_relevance_is_two_shared_terms(text: str, turn_text: str, relevant: bool) -> None:
    """A turn is relevant when it shares two distinct terms with the operator's words."""
    b = LedgerBuilder()
    old_id = b.operator(turn_text)
    cur_id = b.operator(text)
    store = b.store()
    end = store.end_pos()
    old, cur = units_of(store, [store.turn(old_id), store.turn(cur_id)], end)  # type: ignore[list-item]
    assert is_relevant(old, input_topic(cur)) is relevant


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_session_topic_read_is_one_planner_tier(lang: str) -> None:
    """The bound of ``relevant_decision_not_in_history`` (RFC 0030, "Limits"), on a session with
    no archive: a return to topic A's decision with 20 turns of topic B between (within the
    newest 64 high turns: every operator turn is high) re-plans and shows it; with 70 between,
    nothing re-plans for it (the read is one planner tier; beyond it, episode recall is the route:
    tests/test_early_decisions.py, test_a_decision_beyond_the_high_turn_lookup_is_reached_by_recall)."""
    for b_turns, within in ((20, True), (70, False)):
        b, decision, _ = return_to_old_topic(lang, b_turns)
        store = b.store()
        session = SessionProjector(store)
        *_, before, _ = turn_ids(store)
        session.request(budget_tokens=1200, at=before)  # the walk up to the return
        request = session.request(budget_tokens=1200)
        assert (request.replan_reason == "relevant_decision_not_in_history") is within, b_turns
        assert (decision in refs_of(request)) is within, b_turns
