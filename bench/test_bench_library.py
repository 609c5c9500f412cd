"""The library API per turn in an agent loop, beside a LangChain ``trim_messages`` loop (issue 14).

What is measured. One agent loop, the same history on both sides: every tenth turn the operator
asks for something, the other turns are a model reply with one tool call and its result (20–50
lines of test output). A *turn* is what a runtime does before each model call:

* holon_ctx: append the turn with the public helpers (``operator_message``, or
  ``assistant_message(tool_calls=…)`` + ``tool_result``) to a SQLite ledger, then
  ``session.next_request(budget)`` — the whole public API, compaction under the default policy
  included (every 16 turns, amortised over the turns measured);
* LangChain: append the turn's messages (``HumanMessage``, ``AIMessage`` with ``tool_calls``,
  ``ToolMessage``) to a list, then ``trim_messages(messages, max_tokens=budget, strategy="last",
  include_system=True, start_on="human", token_counter=…)``, the documented way to fit a chat
  history to a budget. Counting is tiktoken (``cl100k_base``) on both sides: message text plus
  tool-call arguments, 3 tokens per message and 3 for the reply (as ``providers.measure`` counts
  ours). Two counters: *uncached* counts the messages it is given every time (what a plain
  tiktoken ``token_counter`` does: ``trim_messages`` binary-searches the history and calls it on
  each prefix it tries); *cached* keeps each message's count (the fair comparison: nothing is
  counted twice).

History sizes 300 and 3,000 turns, budgets 8k and 128k. The first turns are appended without a
request; the last ``WARMUP + ROUNDS`` are run as the loop runs them, and the last ``ROUNDS`` timed
(fewer for the uncached counter at 3,000 turns, which takes seconds a turn). Timings are wall clock
(pytest-benchmark's table) and this process's CPU time (``extra_info``, recorded): on a shared
machine the CPU figure is the one that measures the code. Figures go to docs/performance.md
("Library API"); ``pytest bench/test_bench_library.py --benchmark-only`` runs them all in one run.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

pytest.importorskip("langchain_core")

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    trim_messages,
)

import holon_ctx
from holon_ctx import ToolCall
from holon_ctx.projection.provider_formats.providers import REPLY_PRIMING_TOKENS, TOKENS_PER_MESSAGE
from holon_ctx.tokens import default_counter

TURNS = [300, 3_000]
BUDGETS = [8_192, 131_072]
WARMUP = 10
ROUNDS = 40
#: The uncached counter re-counts the whole history several times a turn: seconds at 3,000 turns.
UNCACHED_ROUNDS = {300: 20, 3_000: 5}
RESULTS = Path("/tmp/holon-bench/library-results.json")
SYSTEM = ("You are a coding agent working in /srv/app. Run one shell command per step, read its "
          "output, and keep the public API stable. " * 8)
COUNTER = default_counter()
_T = TypeVar("_T")


def event(k: int) -> tuple[str, str, str, str]:
    """Turn ``k`` of the shared history: ``(kind, text, command, output)``."""
    if k % 10 == 0:
        return ("human", f"Request {k // 10}: make module_{k} handle empty input without "
                         "raising, and add a test for it.", "", "")
    lines = [f"tests/test_module_{k}.py::test_case_{j} "
             f"{'FAILED' if (j * k) % 11 == 0 else 'PASSED'} [{j * 3 % 100:>3}%]"
             for j in range(20 + k % 31)]
    return ("step", f"Step {k}: running the tests of module_{k}.",
            f"pytest -q tests/test_module_{k}.py", "\n".join(lines))


def holon_turn(session: holon_ctx.Session, k: int) -> None:
    kind, text, command, output = event(k)
    if kind == "human":
        session.operator_message(text)
        return
    session.assistant_message(text, tool_calls=[ToolCall(f"c{k}", "bash", {"command": command})])
    session.tool_result(f"c{k}", output, exit_code=1 if "FAILED" in output else 0,
                        status="error" if "FAILED" in output else "ok")


def langchain_turn(messages: list[BaseMessage], k: int) -> None:
    kind, text, command, output = event(k)
    if kind == "human":
        messages.append(HumanMessage(text))
        return
    messages.append(AIMessage(text, tool_calls=[{"name": "bash", "args": {"command": command},
                                                 "id": f"c{k}"}]))
    messages.append(ToolMessage(output, tool_call_id=f"c{k}"))


def message_tokens(message: BaseMessage) -> int:
    """Tokens of one message as a chat request carries it (text, tool-call arguments, framing)."""
    n = COUNTER.count(message.text) + TOKENS_PER_MESSAGE
    if isinstance(message, AIMessage):
        n += sum(COUNTER.count(json.dumps(c["args"])) for c in message.tool_calls)
    return n


def uncached_counter(messages: list[BaseMessage]) -> int:
    return sum(message_tokens(m) for m in messages) + REPLY_PRIMING_TOKENS


def cached_counter() -> Callable[[list[BaseMessage]], int]:
    counts: dict[int, int] = {}
    keep: list[BaseMessage] = []  # ids stay valid while the messages live

    def count(messages: list[BaseMessage]) -> int:
        total = REPLY_PRIMING_TOKENS
        for m in messages:
            n = counts.get(id(m))
            if n is None:
                n = counts[id(m)] = message_tokens(m)
                keep.append(m)
            total += n
        return total

    return count


def _record(key: str, value: dict[str, Any]) -> None:
    data = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    data[key] = value
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(data, indent=1, sort_keys=True))


def _timed_loop(benchmark: Any, key: str, turn: Callable[[int], _T], n_turns: int,
                rounds: int, tokens: Callable[[_T], int]) -> None:
    """Run turns ``n - rounds - WARMUP .. n`` as the loop does; time the last ``rounds``.
    ``tokens`` (what each turn's prompt holds, checked against the budget) is not timed."""
    first = n_turns - rounds - WARMUP
    for k in range(first, first + WARMUP):
        turn(k)
    todo = iter(range(first + WARMUP, n_turns))
    laps: list[float] = []
    prompts: list[_T] = []

    def once() -> None:
        t0 = time.process_time()
        prompts.append(turn(next(todo)))
        laps.append(time.process_time() - t0)

    benchmark.pedantic(once, rounds=rounds, iterations=1)
    sizes = [tokens(p) for p in prompts]
    cpu_p50 = statistics.median(laps) * 1000
    benchmark.extra_info.update(cpu_p50_ms=round(cpu_p50, 3), prompt_tokens=sizes[-1])
    _record(key, {"cpu_p50_ms": cpu_p50, "wall_p50_ms": benchmark.stats.stats.median * 1000,
                  "prompt_tokens": sizes[-1], "rounds": rounds})


@pytest.mark.parametrize("budget", BUDGETS, ids=lambda b: f"{b // 1024}k")
@pytest.mark.parametrize("n_turns", TURNS, ids=lambda n: f"{n}-turns")
def test_holon_ctx_session(benchmark: Any, tmp_path: Path, n_turns: int, budget: int) -> None:
    """Append + next_request through the public API, on a SQLite ledger, default compaction."""
    with holon_ctx.open_session(tmp_path / "agent.db") as session:
        session.set_environment(guidance=SYSTEM, workspace="/srv/app")
        for k in range(n_turns - ROUNDS - WARMUP):
            holon_turn(session, k)

        def turn(k: int) -> holon_ctx.Request:
            holon_turn(session, k)
            request = session.next_request(budget)
            request.openai_messages  # noqa: B018 - what the runtime sends is part of the turn
            return request

        def tokens(request: holon_ctx.Request) -> int:
            assert request.request_tokens <= budget
            return request.request_tokens

        _timed_loop(benchmark, f"holon/{n_turns}/{budget}", turn, n_turns, ROUNDS, tokens)


@pytest.mark.parametrize("counting", ["cached", "uncached"])
@pytest.mark.parametrize("budget", BUDGETS, ids=lambda b: f"{b // 1024}k")
@pytest.mark.parametrize("n_turns", TURNS, ids=lambda n: f"{n}-turns")
def test_langchain_trim_messages(benchmark: Any, n_turns: int, budget: int,
                                 counting: str) -> None:
    """Append + trim_messages(strategy="last") with a tiktoken counter, cached or not."""
    counter = cached_counter() if counting == "cached" else uncached_counter
    rounds = ROUNDS if counting == "cached" else UNCACHED_ROUNDS[n_turns]
    messages: list[BaseMessage] = [SystemMessage(SYSTEM)]
    for k in range(n_turns - rounds - WARMUP):
        langchain_turn(messages, k)

    def turn(k: int) -> list[BaseMessage]:
        langchain_turn(messages, k)
        return trim_messages(messages, max_tokens=budget, token_counter=counter,
                             strategy="last", include_system=True, start_on="human")

    def tokens(kept: list[BaseMessage]) -> int:
        n = uncached_counter(kept)
        assert n <= budget
        return n

    _timed_loop(benchmark, f"langchain-{counting}/{n_turns}/{budget}", turn, n_turns, rounds,
                tokens)


def test_table(benchmark: Any) -> None:
    """Print the docs/performance.md table from the figures recorded above (run the whole file)."""
    data = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)
    rows = ["| turns | budget | holon_ctx | LangChain, cached counts | LangChain, uncached |",
            "|---:|---:|---:|---:|---:|"]
    for n in TURNS:
        for b in BUDGETS:
            cells = []
            for side in ("holon", "langchain-cached", "langchain-uncached"):
                fig = data.get(f"{side}/{n}/{b}")
                cells.append("–" if fig is None else
                             f"{fig['cpu_p50_ms']:.2f} ms ({fig['prompt_tokens']:,} tok)")
            rows.append(f"| {n:,} | {b // 1024}k | " + " | ".join(cells) + " |")
    print("\n" + "\n".join(rows))
