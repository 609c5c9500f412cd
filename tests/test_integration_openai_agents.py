"""OpenAI Agents SDK integration: Runner.run with a LedgerSession, offline, with a scripted model.

The model is a subclass of the SDK's own ``Model`` interface that replays a script and records
every input it was given; tools are real ``function_tool``s. Several runs with tool calls grow a
history far past the budget; a restart runs the next conversation in a new process on the same
ledger file.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, ModelSettings, Runner, function_tool, set_tracing_disabled
from agents.items import ModelResponse, TResponseInputItem, TResponseStreamEvent
from agents.models.interface import Model, ModelTracing
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

import holon_ctx
from holon_ctx.integrations.openai_agents import LedgerSession
from holon_ctx.ledger.records import Message, MessageRole, Tool, Trust, Turn
from holon_ctx.projection.provider_formats.providers import measure
from holon_ctx.tokens import default_counter

set_tracing_disabled(True)
BUDGET = 2_000
RUNS = 6


def reply(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(id="msg", type="message", role="assistant", status="completed",
                                 content=[ResponseOutputText(text=text, type="output_text",
                                                             annotations=[])])


def call(call_id: str, path: str) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(id=call_id, call_id=call_id, type="function_call",
                                    name="run_tests", arguments=json.dumps({"path": path}))


class ScriptedModel(Model):
    """The SDK's Model interface, answering from a script and recording every input."""

    def __init__(self, script: list[list[Any]]) -> None:
        self.script = list(script)
        self.inputs: list[list[dict[str, Any]]] = []

    async def get_response(self, system_instructions: str | None,
                           input: str | list[TResponseInputItem], model_settings: ModelSettings,
                           tools: list[Any], output_schema: Any, handoffs: list[Any],
                           tracing: ModelTracing, *, previous_response_id: str | None,
                           conversation_id: str | None, prompt: Any) -> ModelResponse:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else input
        self.inputs.append([dict(i) if isinstance(i, dict) else i.model_dump() for i in items])
        return ModelResponse(output=self.script.pop(0), usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[TResponseStreamEvent]:
        raise NotImplementedError("the tests run without streaming")


@function_tool
def run_tests(path: str) -> str:
    """Run the test suite under a path."""
    lines = [f"{path}::test_case_{k} PASSED ({k * 7 % 13} ms)" for k in range(60)]
    return "\n".join([*lines, f"60 passed in {path}"])


def script_for(run: int) -> list[list[Any]]:
    """Each run: the model calls run_tests twice (two model calls with tool calls), then answers."""
    return [[reply(f"Running the tests of module {run}."), call(f"r{run}a", f"tests/m{run}")],
            [call(f"r{run}b", f"tests/m{run}/slow")],
            [reply(f"Module {run}: all 120 tests pass.")]]


def input_tokens(items: list[dict[str, Any]]) -> int:
    """Tokens of model input items as providers.measure counts a request (text + framing)."""
    messages = [{"role": i.get("role", "tool"), "content": _text(i)} for i in items]
    return measure(messages, default_counter())


def _text(item: dict[str, Any]) -> str:
    content = item.get("content", item.get("output", item.get("arguments", "")))
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content)


def run_conversation(db: Path, runs: range, *, filtered: bool) -> ScriptedModel:
    model = ScriptedModel([step for r in runs for step in script_for(r)])
    agent = Agent(name="tester", instructions="You run tests and report.", model=model,
                  tools=[run_tests])
    with holon_ctx.open_session(db) as session:
        ledger = LedgerSession(session, budget_tokens=BUDGET)
        config = ledger.run_config() if filtered else None
        for r in runs:
            result = asyncio.run(Runner.run(agent, f"Please test module {r}.", session=ledger,
                                            run_config=config))
            assert result.final_output == f"Module {r}: all 120 tests pass."
    assert not model.script
    return model


@pytest.mark.parametrize("filtered", [True, False], ids=["run_config", "session_only"])
def test_runs_append_with_provenance_and_stay_under_budget(tmp_path: Path, filtered: bool) -> None:
    """Six runs with two tool calls each: the ledger holds every item with its provenance, the
    history outgrows the budget many times over, and what the model is given stays bounded."""
    db = tmp_path / "agent.db"
    model = run_conversation(db, range(RUNS), filtered=filtered)
    records = list(holon_ctx.open_session(db, compaction=None).store.iter_records())
    operator = [r for r in records if isinstance(r, Message) and r.role is MessageRole.OPERATOR]
    assert [m.text for m in operator] == [f"Please test module {r}." for r in range(RUNS)]
    assert {m.trust for m in operator} == {Trust.TRUSTED_OPERATOR}
    tools = [r for r in records if isinstance(r, Tool)]
    assert [t.call_id for t in tools] == [f"r{r}{x}" for r in range(RUNS) for x in "ab"]
    assert all(t.trust is Trust.UNTRUSTED_EXTERNAL and "60 passed" in t.output for t in tools)
    replies = [r for r in records if isinstance(r, Message) and r.role is MessageRole.ASSISTANT]
    assert {m.trust for m in replies} == {Trust.MODEL_OUTPUT}
    assert replies[-1].text == f"Module {RUNS - 1}: all 120 tests pass."
    triggers = [r.trigger for r in records if isinstance(r, Turn)]
    assert triggers == ["operator_input", "x-agent-step", "x-agent-step"] * RUNS

    history_tokens = sum(default_counter().count(t.output) for t in tools)
    assert history_tokens > 5 * BUDGET
    assert len(model.inputs) == 3 * RUNS
    for r, items in enumerate(model.inputs[::3]):
        # The first call of each run carries that run's request.
        assert f"Please test module {r}." in json.dumps(items)
    if filtered:
        # Every model call, tool loops included, is one fresh request within the budget.
        for items in model.inputs:
            # The history comes as the SDK's own items: every call with its output, in order.
            calls = [i["call_id"] for i in items if i.get("type") == "function_call"]
            outputs = [i["call_id"] for i in items if i.get("type") == "function_call_output"]
            assert calls == outputs
            assert input_tokens(items) <= BUDGET
    else:
        # The ledger's part (before the run's own items) is the budgeted request.
        first_call_of_last_run = model.inputs[-3]
        assert input_tokens(first_call_of_last_run[:-1]) <= BUDGET
        assert first_call_of_last_run[-1]["content"] == f"Please test module {RUNS - 1}."


def test_a_new_process_continues_the_same_ledger(tmp_path: Path) -> None:
    """After three runs here, a fresh interpreter opens the ledger file and runs the next
    conversation: its first request already shows the earlier runs' latest work."""
    db = tmp_path / "agent.db"
    run_conversation(db, range(3), filtered=True)
    child = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        import test_integration_openai_agents as t
        model = t.run_conversation(t.Path({str(db)!r}), range(3, 4), filtered=True)
        print(json.dumps(model.inputs))
    """)
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                         check=True, cwd=tmp_path)
    inputs = json.loads(out.stdout.strip().splitlines()[-1])
    first = json.dumps(inputs[0])
    assert "Please test module 3." in first
    assert "Module 2: all 120 tests pass." in first  # the previous process's last answer
    assert all(input_tokens(items) <= BUDGET for items in inputs)
    with holon_ctx.open_session(db, compaction=None) as session:
        turns = [r for r in session.store.iter_records() if isinstance(r, Turn)]
        assert [t.seq for t in turns] == list(range(12))


def test_the_ledger_cannot_be_popped_or_cleared(tmp_path: Path) -> None:
    """pop_item and clear_session refuse with one line: the ledger is append-only."""
    with holon_ctx.open_session(tmp_path / "a.db") as session:
        ledger = LedgerSession(session, budget_tokens=BUDGET)
        with pytest.raises(holon_ctx.InputError, match="append-only"):
            asyncio.run(ledger.pop_item())
        with pytest.raises(holon_ctx.InputError, match="append-only"):
            asyncio.run(ledger.clear_session())
        assert asyncio.run(ledger.get_items()) == []


def test_chat_messages_become_responses_input_items() -> None:
    """input_items maps the chat-completions format to Responses items: text messages by role,
    an assistant's tool calls as function_call items, a tool message as its output."""
    from holon_ctx.integrations.openai_agents import input_items

    items = input_items([
        {"role": "system", "content": "stable"},
        {"role": "user", "content": [{"type": "text", "text": "go"}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
    ])
    assert items == [
        {"role": "system", "content": "stable"},
        {"role": "user", "content": "go"},
        {"type": "function_call", "call_id": "c1", "name": "ls", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "a.txt"},
    ]


def _history(n: int) -> list[dict[str, Any]]:
    """Items as another session store keeps them: a developer message, then ``n`` rounds of a
    request, a reply with two calls, their outputs and an answer."""
    items: list[dict[str, Any]] = [{"role": "developer", "content": "Run the tests."}]
    for r in range(n):
        items += [{"role": "user", "content": f"Please test module {r}."},
                  {"type": "function_call", "call_id": f"h{r}a", "name": "run_tests",
                   "arguments": '{"path": "a"}'},
                  {"type": "function_call", "call_id": f"h{r}b", "name": "run_tests",
                   "arguments": '{"path": "b"}'},
                  {"type": "function_call_output", "call_id": f"h{r}a", "output": "60 passed"},
                  {"type": "function_call_output", "call_id": f"h{r}b", "output": "60 passed"},
                  {"type": "message", "role": "assistant",
                   "content": [{"type": "output_text", "text": f"Module {r} passes."}]}]
    return items


def test_a_reload_appends_only_what_the_ledger_does_not_hold(tmp_path: Path) -> None:
    """Issue 23: a new LedgerSession given items the ledger holds already (a restart that hands
    the history back, or the same history added twice) appends nothing twice; the developer
    message is not a new runtime note; what follows is appended once."""
    db = tmp_path / "agent.db"
    with holon_ctx.open_session(db, compaction=None) as session:
        asyncio.run(LedgerSession(session, budget_tokens=BUDGET).add_items(_history(3)))
        before = list(session.store.iter_records())
    more = [*_history(4)[-6:]]
    with holon_ctx.open_session(db, compaction=None) as session:
        ledger = LedgerSession(session, budget_tokens=BUDGET)
        asyncio.run(ledger.add_items(_history(3)))
        assert list(session.store.iter_records()) == before
        asyncio.run(ledger.add_items(more))
        asyncio.run(ledger.add_items([{"role": "developer", "content": "Run the tests."}]))
        records = list(session.store.iter_records())
    calls = [r.call_id for r in records if isinstance(r, Tool)]
    assert calls == [f"h{r}{x}" for r in range(4) for x in "ab"]
    assert [r for r in records if isinstance(r, Message) and r.role is MessageRole.SYSTEM] == []
    # A new process given the whole history again, trimmed at its start, adds nothing either.
    with holon_ctx.open_session(db, compaction=None) as session:
        asyncio.run(LedgerSession(session, budget_tokens=BUDGET).add_items(_history(4)[7:]))
        assert list(session.store.iter_records()) == records
