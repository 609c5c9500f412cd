"""A reused tool-call id never settles another call's open items (RFC 0008, decision 9).

A provider may name every reply's call ``call_0``; an id is free again once its call is answered
or written pending. Side effects, pending calls and the episodes' open items were keyed by the id
alone, so ``ls logs`` under a reused ``call_0`` (side effect ``none``) settled the unknown effect
of ``deploy v2`` made under ``call_0`` before: the warning left the prompt and the archive's
obligation closed. A call's runs all carry its tool and arguments, so those are part of its key.
"""

from __future__ import annotations

import holon_ctx
from holon_ctx import ToolCall, open_session
from holon_ctx.ledger.records import SideEffect, Tool, ToolStatus
from holon_ctx.lowlevel import MemoryStore
from holon_ctx.memory.unresolved import call_key, resolves

WARNING = "UNRESOLVED SIDE EFFECTS"
BLOCKED = "BLOCKED ON RECONCILIATION"


def _deploy_then(reused: str, command: str, effect: str) -> holon_ctx.Session:
    """A deploy under call_0 with an unknown effect, then a call under ``reused``."""
    s = open_session(MemoryStore(), compaction=None)
    s.operator_message("Deploy v2, then check the logs.")
    s.assistant_message("Deploying.", tool_calls=[ToolCall("call_0", "bash", {"cmd": "deploy v2"})])
    s.tool_result("call_0", "connection reset", status="error", side_effect="unknown")
    s.assistant_message("Checking.", tool_calls=[ToolCall(reused, "bash", {"cmd": command})])
    s.tool_result(reused, "a.log\n", side_effect=effect)  # type: ignore[arg-type]
    return s


def test_another_command_under_a_reused_id_leaves_the_unknown_effect_in_the_prompt() -> None:
    with _deploy_then("call_0", "ls logs", "none") as s:
        text = s.next_request(4000).text
    assert WARNING in text
    assert "deploy v2" in text.split(WARNING, 1)[1]


def test_the_same_call_reported_again_still_settles_its_effect() -> None:
    """The reconciling run of the same call (same id, tool and arguments) still settles it."""
    with _deploy_then("call_0", "deploy v2", "completed") as s:
        assert WARNING not in s.next_request(4000).text
    with _deploy_then("call_1", "ls logs", "none") as s:  # a fresh id: never settled it
        assert WARNING in s.next_request(4000).text


def test_an_archived_unknown_effect_stays_blocking_when_its_id_is_reused() -> None:
    """Compacted into an episode, the effect is a governed obligation: a reused id's run of
    another command does not close it."""
    policy = holon_ctx.CompactionPolicy(recent_turns=4, every_turns=2)
    with open_session(MemoryStore(), compaction=policy) as s:
        s.operator_message("deploy to production")
        s.assistant_message("deploying", tool_calls=[ToolCall("call_0", "deploy", "prod")])
        s.tool_result("call_0", "connection reset", status="timeout", side_effect="unknown")
        for i in range(40):
            s.wake("scheduler_tick", noop=True, label=f"tick {i}")
        assert BLOCKED in s.next_request(4000).text
        s.operator_message("check the logs")
        s.assistant_message("checking", tool_calls=[ToolCall("call_0", "bash", "ls logs")])
        s.tool_result("call_0", "a.log", side_effect="none")
        for i in range(40):
            s.wake("scheduler_tick", noop=True, label=f"later tick {i}")
        assert BLOCKED in s.next_request(4000).text
        # The deploy's own reconciliation closes it.
        s.assistant_message("reconciling", tool_calls=[ToolCall("call_0", "deploy", "prod")])
        s.tool_result("call_0", "v2 is live", side_effect="completed")
        for i in range(40):
            s.wake("scheduler_tick", noop=True, label=f"last tick {i}")
        assert BLOCKED not in s.next_request(4000).text


def _tool(call_id: str | None, command: str, *, status: ToolStatus = ToolStatus.OK,
          effect: SideEffect | None = None) -> Tool:
    return Tool(id="x", turn_id="t", tool_name="bash", args_digest=f"sha256:{command}",
                args_preview=command, status=status, call_id=call_id, side_effect=effect)


def test_a_call_key_holds_the_id_the_tool_and_the_arguments() -> None:
    a, b = _tool("call_0", "deploy"), _tool("call_0", "ls")
    assert call_key(a, "tool:x1") != call_key(b, "tool:x2")
    assert call_key(a, "tool:x1") == call_key(_tool("call_0", "deploy"), "tool:x9")
    assert call_key(a, "tool:x1") != call_key(_tool("call_1", "deploy"), "tool:x1")
    assert call_key(_tool(None, "deploy"), "tool:x1") == "bash#sha256:deploy"


def test_an_archive_keyed_by_the_id_alone_is_still_settled_by_that_id() -> None:
    """Episodes archived before the key held the tool and arguments name ``effect:<id>``; a
    later run of that id settles them as it did (the safe side for new archives, the old
    behaviour for old ones)."""
    done = resolves(_tool("call_0", "ls", effect=SideEffect.NONE), "tool:x2")
    assert "effect:call_0" in done
    assert "call:call_0" in done
    assert f"effect:{call_key(_tool('call_0', 'ls'), 'tool:x2')}" in done
    assert f"effect:{call_key(_tool('call_0', 'deploy'), 'tool:x1')}" not in done
    assert resolves(_tool(None, "ls", effect=SideEffect.NONE), "tool:x3") == (
        "call:bash#sha256:ls", "effect:bash#sha256:ls")
