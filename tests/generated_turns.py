"""One generated agent turn through the session helpers, shared by the properties that drive a
compacting runtime (tests/test_session_restart.py, tests/test_session_rebuild.py)."""

from __future__ import annotations

import random

import holon_ctx
from holon_ctx.session import ToolCall


def agent_turn(session: holon_ctx.Session, i: int, rng: random.Random, waits: list[str], *,
               condition: str = "CI run", longest: int = 80) -> None:
    """The operator's words, a tool call and its result (now and then a side effect left unknown:
    a blocking notice), and a wait closed or opened (obligations); a wait's condition is
    ``condition`` with up to ``longest`` characters more."""
    session.operator_message(f"step {i}: fix module m{i % 5} " + "word " * rng.randint(1, 40))
    call = f"c{i}"
    session.assistant_message("looking", tool_calls=[ToolCall(call, "shell", {"cmd": f"make {i}"})])
    session.tool_result(call, "line\n" * rng.randint(1, 40),
                        side_effect="unknown" if rng.random() < 0.1 else None)
    if waits and rng.random() < 0.4:
        session.close_wait(waits.pop(0))
    elif rng.random() < 0.4:
        waits.append(f"w{i}")
        session.open_wait(waits[-1], f"{condition} {i} " + "x" * rng.randint(0, longest))
