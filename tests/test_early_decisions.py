"""Early decisions in long plain conversations reach the prompt (issue 25, item 3).

A generated family of plain conversations: one decision early or in the middle (an unmarked
operator brief naming a code word, or a long unmarked operator answer to the assistant's question
naming it), then filler (chatter on the same topic, which lands in the decision's episode, or
unrelated small talk), English and Chinese, 40 to 250 turns. When the operator returns to it, the
code word is in the prompt at 2,048 and 4,096 tokens: in a session (a request every few turns, the
default compaction archiving as it goes) and stateless over the episodes the session archived.
The default tier runs a seeded sample of the family; the slow tier runs all of it.
"""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import attrs
import pytest

import holon_ctx
from holon_ctx.cli.episodes_cmd import open_episode_source
from holon_ctx.ledger.sqlite import SqliteStore
from holon_ctx.projection.planning.projector import Projector

CODE = "MARIGOLD-42"
BUDGETS = (2048, 4096)

_TEXT = {
    "en": {
        "brief": f"For the launch plan: the code word for the release channel is {CODE}. Put it "
                 "at the top of every post to the release channel.",
        "question": "Before I draft the launch posts: how should posts to the release channel "
                    "be marked?",
        "answer": "Good question, I thought about it over the weekend and talked to the launch "
                  f"team as well. Posts to the release channel start with {CODE} on the first "
                  "line, so the bots pick them up, and then the usual text follows.",
        "back": "What must every post to the release channel start with?",
        "same": [
            "launch", "plan", "checklist", "timeline", "vendor", "budget", "slides", "venue",
            "catering", "invitations", "press", "review", "schedule", "owners", "risks", "metrics",
        ],
        "chat": ["How is the weather looking for the offsite next week?",
                 "Any tips on feeding a sourdough starter?",
                 "Tell me something interesting about octopuses.",
                 "Any podcast recommendations for a long drive?"],
        "reply": "Noted.",
    },
    "zh": {
        "brief": f"关于发布计划：发布频道的暗号是 {CODE}。每次在发布频道发帖，都要把它放在开头。",
        "question": "在起草发布帖子之前：发布频道的帖子应该怎么标记？",
        "answer": f"好问题，我周末想了想，也和发布团队商量过了。发布频道的帖子第一行写 {CODE}，"
                  "这样机器人能识别，然后再写正文。",
        "back": "发布频道的每个帖子开头必须写什么？",
        "same": [
            "发布", "计划", "清单", "时间表", "供应商", "预算", "幻灯片", "场地",
            "餐饮", "邀请函", "新闻稿", "评审", "日程", "负责人", "风险", "指标",
        ],
        "chat": ["下周团建的天气怎么样？", "养酸面团有什么窍门？", "讲一个关于章鱼的有趣事实。",
                 "长途开车有什么播客推荐？"],
        "reply": "好的，记下了。",
    },
}


@attrs.frozen
class Case:
    turns: int
    lang: str
    position: str  # early | middle
    decision: str  # brief | answer
    filler: str  # same | chat

    def __str__(self) -> str:
        return f"{self.turns}-{self.lang}-{self.position}-{self.decision}-{self.filler}"


FAMILY = [Case(*c) for c in itertools.product((40, 60, 120, 200, 250), ("en", "zh"),
                                              ("early", "middle"), ("brief", "answer"),
                                              ("same", "chat"))]
#: A seeded sample for the default tier (the issue's 60- and 200-turn lengths among them).
SAMPLE = [*random.Random(25).sample(FAMILY, 2),
    Case(60, "en", "early", "brief", "same"), Case(200, "zh", "early", "answer", "same")]


def _filler(case: Case, rng: random.Random, i: int) -> str:
    t = _TEXT[case.lang]
    if case.filler == "chat":
        return f"{t['chat'][i % len(t['chat'])]} ({i})"
    sep = "" if case.lang == "zh" else " "
    return sep.join(rng.choice(t["same"]) for _ in range(40)) + f" ({i})"


def build(case: Case, db: Path, budget: int) -> str:
    """The conversation in a SQLite session, a request every fourth turn; returns the text of
    the request made when the operator returns to the decision."""
    t = _TEXT[case.lang]
    rng = random.Random(str(case))
    at = 2 if case.position == "early" else case.turns // 2
    with holon_ctx.open_session(str(db)) as s:
        for i in range(case.turns):
            if i == at and case.decision == "brief":
                s.operator_message(t["brief"])
                s.assistant_message(t["reply"])
            elif i == at:
                s.operator_message(_filler(case, rng, i))
                s.assistant_message(t["question"])
                s.operator_message(t["answer"])
                s.assistant_message(t["reply"])
            else:
                s.operator_message(_filler(case, rng, i))
                s.assistant_message(t["reply"])
            if i % 4 == 0:
                s.next_request(budget)
        s.operator_message(t["back"])
        return s.next_request(budget).text


def stateless(db: Path, budget: int) -> str:
    store = SqliteStore(db)
    episodes = open_episode_source(store)
    try:
        return Projector(store, episodes=episodes).project(budget_tokens=budget).text
    finally:
        if episodes is not None:
            episodes.close()
        store.close()


def _check(case: Case, tmp_path: Path) -> None:
    for budget in BUDGETS:
        db = tmp_path / f"{budget}.db"
        assert CODE in build(case, db, budget), f"{case} session at {budget}"
        assert CODE in stateless(db, budget), f"{case} stateless at {budget}"


@pytest.mark.parametrize("case", SAMPLE, ids=str)
def test_the_early_decision_reaches_the_prompt(case: Case, tmp_path: Path) -> None:
    """The code word of the decision is in the session's request and the stateless prompt."""
    _check(case, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("case", [c for c in FAMILY if c not in SAMPLE], ids=str)
def test_the_early_decision_reaches_the_prompt_whole_family(case: Case, tmp_path: Path) -> None:
    """The same over the whole generated family."""
    _check(case, tmp_path)


# -- a decision older than the session's high-turn lookup (RFC 0030, "Limits") --------------------
def _conversation(case: Case, db: Path, budget: int) -> tuple[str, str]:
    """:func:`build`'s conversation (a brief at the third turn); returns the text and re-plan
    reason of the request made at the return to the decision."""
    t = _TEXT[case.lang]
    rng = random.Random(str(case))
    with holon_ctx.open_session(str(db)) as s:
        for i in range(case.turns):
            s.operator_message(t["brief"] if i == 2 else _filler(case, rng, i))
            s.assistant_message(t["reply"])
            if i % 4 == 0:
                s.next_request(budget)
        s.operator_message(t["back"])
        request = s.next_request(budget)
        return request.text, request.manifest["session"]["replan_reason"]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_decision_beyond_the_high_turn_lookup_is_reached_by_recall(lang: str,
                                                                     tmp_path: Path) -> None:
    """120 turns, the decision at the third: over a hundred high turns (every operator turn is
    high) lie between it and the question, beyond the 64 the session's topic read looks at.
    The session archives as it goes, and the question re-plans through episode recall
    (``episode_recalled``), which brings the code word back."""
    case = Case(120, lang, "early", "brief", "chat")
    text, reason = _conversation(case, tmp_path / "s.db", 2048)
    assert reason == "episode_recalled"
    assert CODE in text
