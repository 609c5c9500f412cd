"""mini-swe-agent integration: the real DefaultAgent and LocalEnvironment, its deterministic test
models, and holon_ctx managing the context through LedgerModel, offline, over a few dozen steps."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
os.environ.setdefault("MSWEA_GLOBAL_CONFIG_DIR", tempfile.mkdtemp(prefix="mswea-"))
pytest.importorskip("minisweagent")

from minisweagent import package_dir
from minisweagent.agents.default import DefaultAgent
from minisweagent.environments.local import LocalEnvironment
from minisweagent.models.test_models import (
    DeterministicModel,
    DeterministicToolcallModel,
    make_output,
    make_toolcall_output,
)

import holon_ctx
from holon_ctx.integrations.mini_swe_agent import LedgerModel
from holon_ctx.ledger.memory import MemoryStore
from holon_ctx.ledger.records import Message, MessageRole, Tool, Trust, Turn
from holon_ctx.projection.provider_formats.providers import measure
from holon_ctx.tokens import default_counter

TASK = "The report generator drops the last line of every CSV file; make it keep every line."
STEPS = 36
BUDGET = 3_000


def command(k: int) -> str:
    if k == STEPS - 1:
        return "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
    if k == 5:
        return "printf 'fixed\\n' > notes.txt && cat notes.txt"
    return f"echo step-{k} && seq 1 90 | sed 's/^/row-{k}-/'"


def text_outputs() -> list[dict[str, Any]]:
    return [make_output(f"THOUGHT: step {k}.\n\n```mswea_bash_command\n{command(k)}\n```",
                        [{"command": command(k)}]) for k in range(STEPS)]


def toolcall_outputs() -> list[dict[str, Any]]:
    out = []
    for k in range(STEPS):
        call = {"id": f"call_{k}", "type": "function",
                "function": {"name": "bash", "arguments": f'{{"command": "{command(k)}"}}'}}
        out.append(make_toolcall_output(f"step {k}", [call],
                                        [{"command": command(k), "tool_call_id": f"call_{k}"}]))
    return out


def recording(cls: type) -> type:
    """The deterministic model, also keeping every message list it is sent."""

    class Recording(cls):  # type: ignore[misc, valid-type]
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.prompts: list[list[dict[str, Any]]] = []

        def query(self, messages: list[dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
            self.prompts.append(messages)
            return super().query(messages, **kwargs)  # type: ignore[no-any-return]

    return Recording


CASES = {
    "text": (DeterministicModel, text_outputs, "mini_textbased.yaml"),
    "toolcall": (DeterministicToolcallModel, toolcall_outputs, "mini.yaml"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_run_of_three_dozen_steps_stays_under_budget(case: str, tmp_path: Path) -> None:
    """Every request the inner model gets holds the budget, states the task and shows the last
    steps; the ledger holds the run with provenance, exit codes and the files written."""
    model_cls, outputs, config_name = CASES[case]
    inner = recording(model_cls)(outputs=outputs())
    session = holon_ctx.open_session(MemoryStore())
    model = LedgerModel(inner, session, budget_tokens=BUDGET, task=TASK, workspace=str(tmp_path))
    config = yaml.safe_load((Path(package_dir) / "config" / config_name).read_text())
    agent = DefaultAgent(model, LocalEnvironment(cwd=str(tmp_path)),
                         **{**config["agent"], "step_limit": 0, "cost_limit": 0})
    result = agent.run(TASK)
    assert result["exit_status"] == "Submitted"
    assert len(inner.prompts) == STEPS

    counter = default_counter()
    full_history = sum(counter.count(str(m.get("content") or "")) for m in agent.messages)
    assert full_history > 3 * BUDGET
    for k, prompt in enumerate(inner.prompts):
        text = "".join(str(m["content"]) for m in prompt)
        roles = [m["role"] for m in prompt]
        # The history in the provider's own roles: system first, the current state last (or,
        # while the whole history fits, the history's last message: the step's output).
        assert roles[0] == "system"
        assert roles[-1] in ("user", "tool")
        assert set(roles) <= {"system", "user", "assistant", "tool"}
        assert measure([{"role": m["role"], "content": m["content"]} for m in prompt],
                       counter) <= BUDGET
        assert TASK in text
        for previous in range(max(0, k - 2), k):  # the last two steps, command and output
            assert command(previous) in text, (k, previous)
        if k >= 1 and k - 1 != 5:
            assert f"row-{k - 1}-90" in text

    records = list(session.store.iter_records())
    tools = [r for r in records if isinstance(r, Tool)]
    assert [t.args_preview for t in tools] == [command(k) for k in range(STEPS - 1)]
    assert all(t.exit_code == 0 and t.trust is Trust.UNTRUSTED_EXTERNAL for t in tools)
    assert tools[5].files_written == ["notes.txt"]
    operator = [r for r in records if isinstance(r, Message) and r.role is MessageRole.OPERATOR]
    assert [m.text for m in operator] == [TASK]
    turns = [r for r in records if isinstance(r, Turn)]
    # The submitting step ends the run: the agent never queries the model after it.
    assert [t.trigger for t in turns] == ["operator_input"] + ["x-agent-step"] * (STEPS - 1)
    assert {t.anchor_turn_id for t in turns[1:]} == {turns[0].id}


def test_without_the_task_the_whole_first_message_is_the_operators(tmp_path: Path) -> None:
    """With no task= given, a template without <pr_description> is kept whole as operator text."""
    inner = DeterministicModel(outputs=text_outputs()[-1:])
    session = holon_ctx.open_session(MemoryStore())
    model = LedgerModel(inner, session, budget_tokens=BUDGET)
    agent = DefaultAgent(model, LocalEnvironment(cwd=str(tmp_path)),
                         system_template="You are an agent.",
                         instance_template="Task: {{task}}")
    assert agent.run(TASK)["exit_status"] == "Submitted"
    operator = [r for r in session.store.iter_records()
                if isinstance(r, Message) and r.role is MessageRole.OPERATOR]
    assert [m.text for m in operator] == [f"Task: {TASK}"]
    assert "You are an agent." in model.requests[0].openai_messages[0]["content"]


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_reload_appends_only_what_the_ledger_does_not_hold(case: str, tmp_path: Path) -> None:
    """Issue 23: a restarted process resumes the agent's message list with a new wrapper on the
    same ledger: what the ledger holds is not appended again (no task twice, no call id twice),
    and the steps after the reload are appended once, each in its own step turn."""
    model_cls, outputs, config_name = CASES[case]
    db = tmp_path / "agent.db"
    config = yaml.safe_load((Path(package_dir) / "config" / config_name).read_text())
    steps = outputs()
    with holon_ctx.open_session(db) as session:
        model = LedgerModel(model_cls(outputs=steps[:6]), session, budget_tokens=BUDGET,
                            task=TASK, workspace=str(tmp_path))
        agent = DefaultAgent(model, LocalEnvironment(cwd=str(tmp_path)),
                             **{**config["agent"], "step_limit": 6, "cost_limit": 0})
        agent.run(TASK)  # stops at the step limit
        seen = list(model._seen)
        before = list(session.store.iter_records())
    with holon_ctx.open_session(db) as session:
        resumed = LedgerModel(model_cls(outputs=steps[6:8]), session, budget_tokens=BUDGET,
                              task=TASK, workspace=str(tmp_path))
        resumed.query(seen)
        assert list(session.store.iter_records()) == before
        # The agent goes on: its next assistant message and observation, then a query.
        more = agent.messages[len(seen):]
        resumed.query([*seen, *more])
        records = list(session.store.iter_records())
    operator = [r for r in records if isinstance(r, Message) and r.role is MessageRole.OPERATOR]
    assert [m.text for m in operator] == [TASK]
    calls = [r.call_id for r in records if isinstance(r, Tool)]
    assert len(calls) == len(set(calls)) == 6
    turns = [r for r in records if isinstance(r, Turn)]
    assert [t.trigger for t in turns] == ["operator_input"] + ["x-agent-step"] * 6
    assert {t.anchor_turn_id for t in turns[1:]} == {turns[0].id}
