"""mini-swe-agent: a model wrapper that lets holon_ctx manage the context (``holon-ctx[mini-swe-agent]``).

``DefaultAgent(LedgerModel(model, session, budget_tokens=N, task=task), env, **config)``: the agent
runs exactly as before (same templates, same parsing, same environment), but every time it asks
the model for the next step, the wrapper first appends the messages it has not seen yet to the
ledger and then sends the inner model one budgeted request instead of the whole message list.
The request is built with the inner model's own ``format_message``, so any mini-swe-agent model
(text-based, tool calls, Responses API) receives messages in the format it expects.

Mapping (the importer's for ``*.traj.json``, docs/import.md, applied online):

====================================  ===========================================================
agent message                         ledger (through the library helpers)
====================================  ===========================================================
system message                        environment guidance (the stable prefix)
first user message                    the task → operator message + work item ``task`` (with
                                      ``task=`` given, the template around it → guidance)
assistant message with its actions    an ``x-agent-step`` turn anchored to the task turn; the
                                      message (model output) and one call per action
observation (``extra.raw_output``)    ``tool_result``: output (untrusted), exit code, status,
                                      files the command writes
format-error / interrupt notice       runtime note
any other user message                operator message (a person typed it: interactive agents)
====================================  ===========================================================

The wrapper sees messages only when the agent queries it, so the final step's observation (the
submission) is not appended. A new wrapper on a ledger that holds the run already (a restarted
process resuming the agent's message list) appends only what the ledger does not hold yet
(:mod:`holon_ctx.integrations.held`) and takes up the run where the ledger left it. Requests are
counted for the inner model (``config.model_name``), and the input tokens its responses report
calibrate the budget (RFC 0022). A new ``agent.run`` (a shorter message list) starts a new task
turn on the same ledger.
"""

from __future__ import annotations

from typing import Any

from holon_ctx.errors import InputError
from holon_ctx.integrations.held import Key, ledger_keys, new_positions
from holon_ctx.ledger.records import Turn
from holon_ctx.ledger.transcript_build import AGENT_STEP
from holon_ctx.ledger.transcript_shell import ShellTracker
from holon_ctx.ledger.transcript_swe import WORK_ITEM_ID, first_paragraph, split_task
from holon_ctx.request import Request
from holon_ctx.session import Session, ToolCall
from holon_ctx.session_args import check_positive, check_text

__all__ = ["LedgerModel"]


class LedgerModel:
    """A mini-swe-agent ``Model`` (the package's Protocol) wrapping another one."""

    def __init__(self, model: Any, session: Session, *, budget_tokens: int,
                 task: str | None = None, workspace: str = "") -> None:
        if not isinstance(session, Session):
            raise InputError(f"expected a holon_ctx.Session, got {type(session).__name__}",
                             source="LedgerModel", path="session")
        self.model = model
        self.config = model.config
        self.session = session
        # The inner model's name (LiteLLM's, e.g. "anthropic/claude-sonnet-4-5"): requests are
        # counted with its provider's tokenizer and framing (RFC 0022).
        name = getattr(model.config, "model_name", None)
        if isinstance(name, str) and name:
            session.use_model(name)
        self.budget_tokens = check_positive("LedgerModel", "budget_tokens", budget_tokens)
        self.task = None if task is None else check_text("LedgerModel", "task", task,
                                                         required=True)
        self.workspace = check_text("LedgerModel", "workspace", workspace)
        #: Every request sent to the inner model, newest last (their manifests explain them).
        self.requests: list[Request] = []
        self._seen: list[dict[str, Any]] = []
        self._task_turn: str | None = None
        self._system: list[str] = []
        self._waiting: list[str] = []
        self._commands: dict[str, str] = {}
        self._steps = 0
        self._shell = ShellTracker(workspace)

    # -- the Model protocol ---------------------------------------------------------------------
    def query(self, messages: list[dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
        """Append what is new, then ask the inner model with one budgeted request."""
        self._sync(messages)
        request = self.session.next_request(self.budget_tokens)
        self.requests.append(request)
        # Every key of each message is handed on (role and content today; tool calls and call
        # ids too when a request carries them), in the inner model's own format.
        prompt = [self.model.format_message(**m) for m in request.openai_messages]
        reply: dict[str, Any] = self.model.query(prompt, **kwargs)
        used = _input_tokens(reply)
        if used:
            self.session.observe_usage(used, request=request)
        return reply

    def format_message(self, **kwargs: Any) -> dict[str, Any]:
        message: dict[str, Any] = self.model.format_message(**kwargs)
        return message

    def format_observation_messages(self, message: dict[str, Any], outputs: list[dict[str, Any]],
                                    template_vars: dict[str, Any] | None = None,
                                    ) -> list[dict[str, Any]]:
        observations: list[dict[str, Any]] = self.model.format_observation_messages(
            message, outputs, template_vars)
        return observations

    def get_template_vars(self, **kwargs: Any) -> dict[str, Any]:
        template_vars: dict[str, Any] = self.model.get_template_vars(**kwargs)
        return template_vars

    def serialize(self) -> dict[str, Any]:
        data: dict[str, Any] = self.model.serialize()
        return data

    # -- messages → ledger ----------------------------------------------------------------------
    def _sync(self, messages: list[dict[str, Any]]) -> None:
        seen = len(self._seen)
        if seen > len(messages) or messages[:seen] != self._seen:
            # A new run of the agent: its messages start over.
            seen, self._task_turn, self._waiting = 0, None, []
            self._system.clear()
        if not self._seen and self.session.current_turn is not None:
            # A new wrapper on a ledger that holds a run: what it holds of these messages is
            # taken up (the state they left), not appended again.
            seen = self._take_up(messages)
        for message in messages[seen:]:
            self._append(message)
        self._seen = list(messages)

    def _take_up(self, messages: list[dict[str, Any]]) -> int:
        """How many of ``messages`` (from the first) the ledger holds; the wrapper's state set
        as appending them would have left it."""
        keys = [self._append(m, write=False) for m in messages]
        new = new_positions(ledger_keys(self.session), keys)
        held = min(new, default=len(messages))
        self._task_turn, self._waiting = None, []
        self._system.clear()
        self._steps = 0
        for message in messages[:held]:
            self._append(message, write=False)
        if self._task_turn is not None:
            # The task's turn in the ledger: the newest operator turn (a run starts with one).
            turns = [r for r in self.session.store.iter_records()
                     if isinstance(r, Turn) and r.trigger == "operator_input"]
            self._task_turn = turns[-1].id if turns else None
        return held

    def _append(self, message: dict[str, Any], *, write: bool = True) -> Key | None:
        """Append ``message`` (the mapping in the module docstring); ``write=False``: only the
        wrapper's state moves on, as appending would move it. Returns the key of the record it
        appends (:mod:`holon_ctx.integrations.held`; None: it appends none)."""
        role = message.get("role")
        text = _text(message.get("content"))
        extra = message.get("extra") if isinstance(message.get("extra"), dict) else {}
        assert isinstance(extra, dict)
        s = self.session
        if self._task_turn is None:
            if role == "system":
                self._system.append(text)
                return None
            return self._start_task(text, write=write)
        if role == "assistant":
            return self._assistant(text, extra, self._task_turn, write=write)
        if self._waiting and ("raw_output" in extra or "returncode" in extra):
            return self._observation(message, text, extra, write=write)
        if extra.get("interrupt_type") or role != "user":
            note = text or f"({extra.get('interrupt_type', role)})"
            if write:
                s.runtime_note(note)
            return ("note", note)
        if write:
            s.operator_message(text)
        return ("user", text)

    def _assistant(self, text: str, extra: dict[str, Any], task_turn: str, *,
                   write: bool) -> Key:
        """The model's step: a wake continuing the task's turn, its message and its calls."""
        s = self.session
        if write:
            s.wake(AGENT_STEP, continues=task_turn)
        calls = []
        for j, action in enumerate(extra.get("actions") or []):
            self._steps += 1
            call_id = str(action.get("tool_call_id") or f"step{self._steps}.{j}")
            command = str(action.get("command", ""))
            calls.append(ToolCall(call_id, "bash", command))
        if write:
            s.assistant_message(text, tool_calls=calls)
        self._waiting = [c.call_id for c in calls]
        self._commands = {c.call_id: c.arguments for c in calls}
        return ("assistant", text)

    def _observation(self, message: dict[str, Any], text: str, extra: dict[str, Any], *,
                     write: bool) -> Key:
        """A command's output: the result of the call it answers (the oldest one waiting)."""
        call_id = str(message.get("tool_call_id") or self._waiting[0])
        if call_id in self._waiting:
            self._waiting.remove(call_id)
        code = extra.get("returncode")
        code = code if isinstance(code, int) and not isinstance(code, bool) else None
        failed = code != 0 or bool(extra.get("exception_info"))
        command = self._commands.get(call_id, "")
        if write:
            self.session.tool_result(call_id, str(extra.get("raw_output", text)), exit_code=code,
                                     status="error" if failed else "ok",
                                     files_written=self._shell.files_written(command))
        return ("tool", call_id)

    def _start_task(self, text: str, *, write: bool = True) -> Key:
        """The first user message: the task (trusted), the template around it (guidance)."""
        system = "\n\n".join(self._system)
        if self.task is not None and self.task in text:
            task = self.task
            instructions = text.replace(self.task, "[the task: see the operator's message]", 1)
        else:
            task, instructions = split_task(text)
        if not write:
            # Taking up a run the ledger holds: a stand-in until the ledger names its turn.
            self._task_turn = ""
            self._system.clear()
            return ("user", task)
        guidance = "\n\n".join(t for t in (system, instructions) if t.strip())
        s = self.session
        s.set_environment(guidance=guidance, workspace=self.workspace,
                          capabilities=["bash: one command per step, each in a fresh subshell"])
        s.operator_message(task, work_item=WORK_ITEM_ID)
        s.set_work_item(WORK_ITEM_ID, objective=first_paragraph(task), status="active")
        self._task_turn = s.current_turn
        self._system.clear()
        return ("user", task)


def _input_tokens(reply: dict[str, Any]) -> int | None:
    """The input tokens the provider reported for a reply (LiteLLM's response, in
    ``extra.response.usage``: ``prompt_tokens``, or ``input_tokens``), when it did."""
    extra = reply.get("extra")
    response = extra.get("response") if isinstance(extra, dict) else None
    usage = response.get("usage") if isinstance(response, dict) else None
    if not isinstance(usage, dict):
        return None
    for key in ("prompt_tokens", "input_tokens"):
        value = usage.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def _text(content: Any) -> str:
    """A message's text: a string, or the text parts of a multimodal/Responses content list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)
