"""mini-swe-agent trajectories (``*.traj.json``) → ledger records.

A trajectory is an OpenAI-style message list written by one agent loop: a system prompt, one user
message holding the task (a PR description inside the harness's instructions), then assistant
messages (a THOUGHT and one ```` ```bash ```` block) each answered by a user-role message that the
*harness* wrote: ``<returncode>N</returncode>`` and ``<output>…</output>`` (or head and tail of a
long output), a timeout notice, or a format-error notice. So the user role is not the operator's
voice after the first message, and the mapping follows who actually wrote each text:

=========================================  ==================================================
source                                     ledger
=========================================  ==================================================
system message + the instructions around   ``environment`` (runtime configuration): guidance
the PR description                         = system prompt + instructions; workspace = cwd
the PR description (first user message)    ``operator_input`` turn ``t1`` + operator message
                                           (trusted) + ``work_item`` ``task`` (objective = its
                                           first paragraph, status active)
assistant message *k*                      ``x-agent-step`` turn ``tk`` anchored to ``t1``,
                                           assistant message ``mk`` (model output, verbatim)
its bash block + the next user message     one ``tool`` record ``xk`` in turn ``tk``:
                                           args_preview = the exact command, args_digest =
                                           its sha256, exit_code/status from ``<returncode>``,
                                           output (untrusted), files_written from the command
format-error / unrecognised harness text   runtime note (runtime fact) in turn ``tk``
``info.exit_status``                       final ``work_item`` transition: done (Submitted)
                                           or blocked, in the last turn
=========================================  ==================================================
"""

from __future__ import annotations

import re
from typing import Any, Final

from holon_ctx.errors import quote_value
from holon_ctx.ledger.records import (
    Origin,
    Record,
    ToolStatus,
    Trust,
    WorkItem,
    WorkItemStatus,
)
from holon_ctx.ledger.transcript_build import LedgerBuilder, expect, required, rfc3339
from holon_ctx.ledger.transcript_shell import ShellTracker

__all__ = ["ACTION_RE", "WORK_ITEM_ID", "first_paragraph", "read_swe_traj", "split_task"]

#: mini-swe-agent 1.x's own action regex: exactly one match is a valid step.
ACTION_RE: Final = re.compile(r"```bash\s*\n(.*?)\n```", re.DOTALL)
WORK_ITEM_ID: Final = "task"
_PR: Final = re.compile(r"<pr_description>\s*\n(?:Consider the following PR description:\n)?"
                        r"(?P<task>.*?)\n?</pr_description>", re.DOTALL)
_RETURNCODE: Final = re.compile(r"\A<returncode>(?P<code>-?\d+)</returncode>\n?(?P<rest>.*)\Z",
                                re.DOTALL)
_OUTPUT: Final = re.compile(r"\A\s*<output>\n?(?P<out>.*?)\n?</output>\s*\Z", re.DOTALL)
_LONG: Final = re.compile(
    r"<output_head>\n?(?P<head>.*?)\n?</output_head>\s*<elided_chars>\s*(?P<n>\d+) characters "
    r"elided\s*</elided_chars>\s*<output_tail>\n?(?P<tail>.*?)\n?</output_tail>", re.DOTALL)
_TIMEOUT: Final = re.compile(r"\AThe last command <command>.*?</command> timed out and has been "
                             r"killed\.\nThe output of the command was:\n ?<output>\n?(?P<out>.*?)"
                             r"\n?</output>", re.DOTALL)


def split_task(text: str) -> tuple[str, str]:
    """``(task, instructions)``: the PR description, and the harness text around it."""
    m = _PR.search(text)
    if m is None:
        return text, ""
    task = m.group("task").strip("\n")
    instructions = (text[: m.start()] + text[m.end():]).strip()
    return task, instructions


def first_paragraph(text: str) -> str:
    """The first blank-line-separated paragraph of ``text`` (stripped)."""
    return re.split(r"\n\s*\n", text.strip(), maxsplit=1)[0].strip()


def _observation(content: str) -> tuple[ToolStatus, int | None, str] | None:
    """Status, exit code and output of a harness observation, or None when it is not one."""
    m = _RETURNCODE.match(content)
    if m:
        code = int(m.group("code"))
        rest = m.group("rest")
        long = _LONG.search(rest)
        if long:
            output = (f"{long.group('head')}\n[… {long.group('n')} characters elided by "
                      f"mini-swe-agent …]\n{long.group('tail')}")
        else:
            plain = _OUTPUT.match(rest)
            output = plain.group("out") if plain else rest
        return (ToolStatus.OK if code == 0 else ToolStatus.ERROR), code, output
    m = _TIMEOUT.match(content)
    if m:
        return ToolStatus.TIMEOUT, None, m.group("out")
    return None


def read_swe_traj(data: Any, b: LedgerBuilder) -> list[Record]:
    """Records of a mini-swe-agent trajectory (see the module docstring for the mapping)."""
    obj = expect(data, dict, "$", b.source)
    messages = required(obj, "messages", list, "$", b.source)
    info = _obj(obj.get("info"))
    cwd = _obj(_obj(info.get("config")).get("environment")).get("cwd")
    cwd = cwd if isinstance(cwd, str) else ""
    tracker = ShellTracker(cwd)
    wid = f"{b.prefix}{WORK_ITEM_ID}"
    i = _read_task(obj, messages, cwd, wid, b)
    while i < len(messages):
        i = _read_step(messages, i, tracker, wid, b)
    exit_status = info.get("exit_status")
    if isinstance(exit_status, str) and exit_status:
        done = exit_status == "Submitted"
        b.records.append(WorkItem(
            id=b.rid("w", "end"), work_item_id=wid, turn_id=b.turn_id,
            status=WorkItemStatus.DONE if done else WorkItemStatus.BLOCKED,
            completion_report=f"agent submitted its patch (exit status {exit_status})"
            if done else None,
            blocker=None if done else f"agent stopped: exit status {exit_status}",
            origin=Origin.RUNTIME, trust=Trust.RUNTIME_FACT))
    return b.finish()


def _read_task(obj: dict[str, Any], messages: list[Any], cwd: str, wid: str,
               b: LedgerBuilder) -> int:
    """The system messages and the task: the environment, the operator's turn, the work item.
    Returns the index of the first message after the task."""
    system: list[str] = []
    i = 0
    while i < len(messages):
        msg = expect(messages[i], dict, f"$.messages[{i}]", b.source)
        role = required(msg, "role", str, f"$.messages[{i}]", b.source)
        if role != "system":
            break
        system.append(_content(msg, i, b))
        i += 1
    if i >= len(messages):
        raise b.fail("$.messages", "no task: a trajectory needs a user message after the "
                                   "system prompt")
    task_msg = expect(messages[i], dict, f"$.messages[{i}]", b.source)
    if task_msg.get("role") != "user":
        raise b.fail(f"$.messages[{i}].role",
                     f"expected 'user' (the task message), got {quote_value(task_msg.get('role'))}")
    task, instructions = split_task(_content(task_msg, i, b))
    guidance = "\n\n".join(t for t in (*system, instructions) if t.strip())
    instance = obj.get("instance_id") if isinstance(obj.get("instance_id"), str) else ""
    workspace = " ".join(p for p in (cwd, f"({instance})" if instance else "") if p)
    b.environment(str(i), guidance=guidance, workspace=workspace,
                  capabilities=["bash: one command per step, each in a fresh subshell"])
    b.open_turn(str(i), "operator_input", origin=Origin.OPERATOR, trust=Trust.TRUSTED_OPERATOR,
                work_item_id=wid)
    b.operator(str(i), task)
    b.records.append(WorkItem(id=b.rid("w", str(i)), work_item_id=wid, turn_id=b.turn_id,
                              objective=first_paragraph(task), status=WorkItemStatus.ACTIVE,
                              origin=Origin.RUNTIME, trust=Trust.RUNTIME_FACT))
    return i + 1


def _read_step(messages: list[Any], i: int, tracker: ShellTracker, wid: str,
               b: LedgerBuilder) -> int:
    """Message ``i`` after the task: a step (the assistant's message, its command and the
    observation answering it) or a runtime note. Returns the index of the next message."""
    path = f"$.messages[{i}]"
    msg = expect(messages[i], dict, path, b.source)
    role = required(msg, "role", str, path, b.source)
    content = _content(msg, i, b)
    key = str(i)
    if role != "assistant":
        if role not in ("user", "system"):
            raise b.fail(f"{path}.role", f"expected one of system, user, assistant, got "
                                         f"{quote_value(role)}")
        # Harness text that answers no step (or a system message mid-run).
        b.runtime_note(key, content)
        return i + 1
    b.open_step(key, at=_created(msg), work_item_id=wid)
    b.assistant(key, content)
    actions = ACTION_RE.findall(content)
    reply = messages[i + 1] if i + 1 < len(messages) else None
    reply_text = None
    if isinstance(reply, dict) and reply.get("role") == "user":
        reply_text = _content(reply, i + 1, b)
    if len(actions) == 1:
        command = actions[0].strip()
        files = tracker.files_written(command)
        if reply_text is None:
            b.executed(key, "bash", command, status=ToolStatus.PENDING, exit_code=None,
                       output="", files_written=files)
            return i + 1
        obs = _observation(reply_text)
        if obs is None:
            # The submit command's output comes back bare (mini-swe-agent strips the marker
            # line and ends the run); anything else unrecognised is kept as output.
            obs = (ToolStatus.OK, None, reply_text)
        status, code, output = obs
        b.executed(key, "bash", command, status=status, exit_code=code, output=output,
                   files_written=files)
        return i + 2
    if reply_text is not None:
        b.runtime_note(str(i + 1), reply_text)
        return i + 2
    return i + 1


def _obj(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one (optional metadata)."""
    return value if isinstance(value, dict) else {}


def _content(msg: dict[str, Any], i: int, b: LedgerBuilder) -> str:
    return str(required(msg, "content", str, f"$.messages[{i}]", b.source))


def _created(msg: dict[str, Any]) -> str | None:
    extra = msg.get("extra")
    response = extra.get("response") if isinstance(extra, dict) else None
    return rfc3339(response.get("created")) if isinstance(response, dict) else None
