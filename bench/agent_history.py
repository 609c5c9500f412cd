"""A seeded agent conversation for the import and fleet benchmarks (issue 29 items 3-4).

``chat(n_messages, seed)`` is an OpenAI message list of about ``n_messages`` messages, the shape a
runtime brings to ``Session.import_history``: a system prompt, then steps of a coding agent — an
operator request every tenth step, otherwise an assistant reply calling one tool and the tool's
output (0.2-8 KB: test runs, greps, file listings, diffs). ``step(session, k, seed)`` appends
step ``k`` of the same agent through the library's helpers, what a runtime does before each model
call. The same arguments always give the same text, so runs compare the same work.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

import holon_ctx

__all__ = ["SYSTEM", "chat", "planned_step", "step"]

SYSTEM = ("You are a coding agent working in /srv/app. Run one shell command per step, read its "
          "output, and keep the public API stable.")
_MODULES = ("billing", "ledger", "invoices", "auth", "search", "export", "reports", "sync")
_VERBS = ("handle empty input", "keep totals exact", "retry on timeout", "log the request id",
          "reject negative amounts", "stream large files")


def _output(rng: random.Random, k: int) -> tuple[str, str, bool]:
    """``(command, output, failed)`` of step ``k``: 0.2-8 KB of plausible tool output."""
    size = int(rng.uniform(200, 8192))
    module = _MODULES[k % len(_MODULES)]
    kind = rng.randrange(4)
    lines: list[str] = []
    failed = False
    if kind == 0:
        command = f"pytest -q tests/test_{module}.py"
        j = 0
        while sum(map(len, lines)) < size:
            bad = rng.random() < 0.05
            failed |= bad
            lines.append(f"tests/test_{module}.py::test_case_{j} {'FAILED' if bad else 'PASSED'}"
                         f" [{min(99, j * 3)}%]")
            j += 1
    elif kind == 1:
        command = f"grep -rn '{module}_total' src/"
        while sum(map(len, lines)) < size:
            lines.append(f"src/{module}/{rng.choice(_MODULES)}.py:{rng.randrange(1, 900)}:    "
                         f"{module}_total = sum(x.amount for x in rows)  # {rng.randrange(10**6)}")
    elif kind == 2:
        command = f"git diff src/{module}/core.py"
        while sum(map(len, lines)) < size:
            sign = rng.choice("+- ")
            lines.append(f"{sign}    def {rng.choice(_VERBS).replace(' ', '_')}(self, rows):"
                         f" return [r for r in rows if r.id != {rng.randrange(10**4)}]")
    else:
        command = f"ls -la src/{module}"
        while sum(map(len, lines)) < size:
            lines.append(f"-rw-r--r-- 1 agent agent {rng.randrange(10**5):>6} Dec  3 10:"
                         f"{rng.randrange(60):02d} {rng.choice(_MODULES)}_{rng.randrange(999)}.py")
    return command, "\n".join(lines)[:size], failed


def chat(n_messages: int, seed: int = 0) -> list[dict[str, Any]]:
    """The conversation as an OpenAI message list (see the module docstring)."""
    rng = random.Random(seed)
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    k = 0
    while len(messages) < n_messages:
        if k % 10 == 0:
            module = _MODULES[(k // 10) % len(_MODULES)]
            messages.append({"role": "user", "content": f"Request {k // 10}: make {module} "
                                                        f"{rng.choice(_VERBS)}, with a test."})
        command, output, _ = _output(rng, k)
        messages.append({"role": "assistant", "content": f"Step {k}: running `{command}`.",
                         "tool_calls": [{"id": f"c{k}", "type": "function", "function": {
                             "name": "bash", "arguments": json.dumps({"command": command})}}]})
        messages.append({"role": "tool", "tool_call_id": f"c{k}", "content": output})
        k += 1
    return messages


def step(session: holon_ctx.Session, k: int, seed: int = 1) -> None:
    """Append step ``k`` of the agent loop: a request every tenth step, otherwise a reply with
    one tool call and the tool's result."""
    planned_step(k, seed)(session)


def planned_step(k: int, seed: int = 1) -> Callable[[holon_ctx.Session], None]:
    """Step ``k``'s texts made now, appended when the result is called: a benchmark times the
    appends, not this generator (~0.5 ms of random text a step)."""
    rng = random.Random(seed * 1_000_003 + k)
    request = (f"Request {k}: make {_MODULES[k % len(_MODULES)]} {rng.choice(_VERBS)}, "
               "with a test.") if k % 10 == 0 else None
    command, output, failed = _output(rng, k)
    call = f"s{seed}-{k}"

    def append(session: holon_ctx.Session) -> None:
        if request is not None:
            session.operator_message(request)
        session.assistant_message(f"Step {k}: running `{command}`.", tool_calls=[
            holon_ctx.ToolCall(call, "bash", {"command": command})])
        session.tool_result(call, output, exit_code=1 if failed else 0,
                            status="error" if failed else "ok")
    return append
