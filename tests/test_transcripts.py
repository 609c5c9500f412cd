"""Transcript import (holon_ctx.ledger.transcripts): OpenAI, Anthropic and mini-swe-agent in."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from holon_ctx.cli.main import main
from holon_ctx.errors import DuplicateIdError, LedgerFormatError
from holon_ctx.ledger.importer import export_jsonl, import_jsonl
from holon_ctx.ledger.memory import MemoryStore
from holon_ctx.ledger.records import (
    Environment,
    Message,
    MessageRole,
    Origin,
    Record,
    Tool,
    ToolStatus,
    Trust,
    Turn,
    WorkItem,
    WorkItemStatus,
)
from holon_ctx.ledger.sqlite import SqliteStore
from holon_ctx.ledger.transcript_build import digest
from holon_ctx.ledger.transcripts import TranscriptFormat, detect_format, import_any, read_transcript

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpora" / "swe-trajectories"
TRAJECTORIES = sorted(CORPUS.glob("*.traj.json")) if CORPUS.is_dir() else []
needs_corpus = pytest.mark.skipif(not TRAJECTORIES, reason=f"corpus not found at {CORPUS}")

OPENAI: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a careful release agent."},
    {"role": "user", "content": "Tag v1.2 and tell me the CI state."},
    {"role": "assistant", "content": "Checking.", "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "git_tag", "arguments": "{\"tag\": \"v1.2\"}"}},
        {"id": "call_2", "type": "function",
         "function": {"name": "ci_status", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "call_2", "content": "red: 2 failing tests"},
    {"role": "tool", "tool_call_id": "call_1", "content": "tagged"},
    {"role": "assistant", "content": "Tagged; CI is red."},
    {"role": "user", "content": [{"type": "text", "text": "Look at this"},
                                 {"type": "image_url", "image_url": {"url": "data:..."}}]},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_3", "type": "function", "function": {"name": "ci_logs", "arguments": "{}"}}]},
]

ANTHROPIC: dict[str, Any] = {
    "system": [{"type": "text", "text": "You maintain the docs site."}],
    "messages": [
        {"role": "user", "content": "Build the docs."},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "plan", "signature": "s"},
            {"type": "text", "text": "Building."},
            {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": "make html"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "is_error": True,
             "content": [{"type": "text", "text": "make: *** [html] Error 2"}]}]},
        {"role": "assistant", "content": "The build failed."},
    ],
}

PR = ("Symbols with an extra layer of parentheses lose cls\n\nRunning the code:\n"
      "q, u = symbols(('q:2', 'u:2'), cls=Function)")
TASK = (f"<pr_description>\nConsider the following PR description:\n{PR}\n</pr_description>\n\n"
        "<instructions>\n# Task Instructions\nSubmit with echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n"
        "</instructions>")
LONG = ("<returncode>0</returncode>\n<warning>\nThe output of your last command was too long.\n"
        "</warning><output_head>\nHEAD\n</output_head>\n<elided_chars>\n12345 characters elided\n"
        "</elided_chars>\n<output_tail>\nTAIL\n</output_tail>")


def step(thought: str, command: str) -> dict[str, Any]:
    return {"role": "assistant", "content": f"THOUGHT: {thought}\n\n```bash\n{command}\n```",
            "extra": {"response": {"created": 1763510060}}}


def obs(code: int, output: str) -> dict[str, Any]:
    return {"role": "user", "content": f"<returncode>{code}</returncode>\n<output>\n{output}\n</output>"}


SWE: dict[str, Any] = {
    "trajectory_format": "mini-swe-agent-1",
    "instance_id": "sympy__sympy-0001",
    "info": {"exit_status": "Submitted", "config": {"environment": {"cwd": "/testbed"}}},
    "messages": [
        {"role": "system", "content": "You are a helpful assistant with a shell."},
        {"role": "user", "content": TASK},
        step("Find it.", "grep -rn 'def symbols' sympy"),
        obs(0, "sympy/core/symbol.py:586:def symbols(names, *, cls=Symbol, **args):"),
        step("Reproduce.", "cat <<'EOF' > reproduce.py\nprint(1)\nEOF"),
        obs(0, ""),
        step("Run it.", "python reproduce.py"),
        obs(1, "Traceback: boom"),
        {"role": "assistant", "content": "Two at once\n```bash\nls\n```\n```bash\npwd\n```"},
        {"role": "user", "content": "Please always provide EXACTLY ONE action in triple backticks, "
                                    "found 2 actions."},
        step("Fix.", "sed -i 's/symbols(name, \\*\\*args)/symbols(name, cls=cls, **args)/' "
                     "sympy/core/symbol.py"),
        {"role": "user", "content": "The last command <command>sed</command> timed out and has "
                                    "been killed.\nThe output of the command was:\n <output>\n"
                                    "partial\n</output>\nPlease try another command."},
        step("Read it.", "cat sympy/core/symbol.py"),
        {"role": "user", "content": LONG},
        step("Run again.", "python reproduce.py"),
        obs(0, "ok"),
        step("Submit.", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached"),
        {"role": "user", "content": "diff --git a/sympy/core/symbol.py b/sympy/core/symbol.py\n"},
    ],
}


def write(tmp_path: Path, name: str, data: Any) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def read(tmp_path: Path, name: str, data: Any, fmt: str = "auto") -> list[Record]:
    return read_transcript(write(tmp_path, name, data), fmt)[1]


def of(records: list[Record], kind: type) -> list[Any]:
    return [r for r in records if isinstance(r, kind)]


def test_openai_turns_follow_model_activations(tmp_path: Path) -> None:
    """A user message opens an operator turn; the model called again after tools opens a step."""
    records = read(tmp_path, "chat.json", OPENAI, "openai")
    turns = of(records, Turn)
    assert [(t.id, t.trigger, t.anchor_turn_id) for t in turns] == [
        ("t1", "operator_input", None), ("t5", "x-agent-step", "t1"),
        ("t6", "operator_input", None)]
    env = of(records, Environment)[0]
    assert (env.guidance, env.trust) == ("You are a careful release agent.", Trust.RUNTIME_FACT)
    ops = [m for m in of(records, Message) if m.role is MessageRole.OPERATOR]
    assert [(m.turn_id, m.text, m.trust) for m in ops] == [
        ("t1", "Tag v1.2 and tell me the CI state.", Trust.TRUSTED_OPERATOR),
        ("t6", "Look at this\n[image]", Trust.TRUSTED_OPERATOR)]


def test_openai_tool_record_holds_call_and_result_in_the_calls_turn(tmp_path: Path) -> None:
    """Each call and its result make one untrusted tool record with call_id, owned by the call."""
    tools = {t.call_id: t for t in of(read(tmp_path, "chat.json", OPENAI, "openai"), Tool)}
    tag = tools["call_1"]
    assert (tag.id, tag.turn_id, tag.tool_name, tag.args_preview, tag.output, tag.status) == (
        "x2.0", "t1", "git_tag", '{"tag": "v1.2"}', "tagged", ToolStatus.OK)
    assert tag.args_digest == digest('{"tag": "v1.2"}')
    assert (tag.origin, tag.trust) == (Origin.TOOL, Trust.UNTRUSTED_EXTERNAL)
    assert tools["call_2"].output == "red: 2 failing tests"
    # The last call never got its result: it is written as pending, in its own turn.
    assert (tools["call_3"].status, tools["call_3"].turn_id, tools["call_3"].output) == (
        ToolStatus.PENDING, "t6", "")


@pytest.mark.parametrize(("fmt", "empty"), [("openai", ""), ("openai", []), ("anthropic", ""),
                                            ("anthropic", [])])
def test_an_empty_user_message_is_an_empty_operator_turn(fmt: str, empty: Any,
                                                         tmp_path: Path) -> None:
    """Content given but empty is what was sent: an operator turn with empty text, in order,
    neither refused (as a missing content is) nor dropped."""
    chat = [{"role": "user", "content": empty}, {"role": "assistant", "content": "Say more?"},
            {"role": "user", "content": "Deploy."}]
    records = read(tmp_path, "chat.json", {"messages": chat} if fmt == "anthropic" else chat, fmt)
    assert [(t.id, t.trigger) for t in of(records, Turn)] == [
        ("t0", "operator_input"), ("t2", "operator_input")]
    assert [(m.turn_id, m.role, m.text) for m in of(records, Message)] == [
        ("t0", MessageRole.OPERATOR, ""), ("t0", MessageRole.ASSISTANT, "Say more?"),
        ("t2", MessageRole.OPERATOR, "Deploy.")]


def test_anthropic_tool_results_are_tool_output_not_operator_input(tmp_path: Path) -> None:
    """A user message holding only tool_result blocks opens no operator turn; is_error is kept."""
    records = read(tmp_path, "chat.json", ANTHROPIC)
    assert [(t.trigger, t.anchor_turn_id) for t in of(records, Turn)] == [
        ("operator_input", None), ("x-agent-step", "t0")]
    (tool,) = of(records, Tool)
    assert (tool.call_id, tool.turn_id, tool.status, tool.output, tool.args_preview) == (
        "toolu_1", "t0", ToolStatus.ERROR, "make: *** [html] Error 2", '{"command": "make html"}')
    texts = [(m.role, m.text) for m in of(records, Message)]
    assert texts == [(MessageRole.OPERATOR, "Build the docs."),
                     (MessageRole.ASSISTANT, "Building."),
                     (MessageRole.ASSISTANT, "The build failed.")]
    assert of(records, Environment)[0].guidance == "You maintain the docs site."


def test_swe_trajectory_maps_task_steps_and_results(tmp_path: Path) -> None:
    """The task is the operator's, each step a turn with its command and harness result."""
    records = read(tmp_path, "x.traj.json", SWE)
    env = of(records, Environment)[0]
    assert env.guidance.startswith("You are a helpful assistant with a shell.\n\n<instructions>")
    assert (env.workspace, env.trust) == ("/testbed (sympy__sympy-0001)", Trust.RUNTIME_FACT)
    task = next(m for m in of(records, Message) if m.role is MessageRole.OPERATOR)
    assert (task.turn_id, task.text, task.trust) == ("t1", PR, Trust.TRUSTED_OPERATOR)
    first, last = of(records, WorkItem)
    assert (first.objective, first.status) == ("Symbols with an extra layer of parentheses lose cls",
                                               WorkItemStatus.ACTIVE)
    assert (last.status, last.turn_id) == (WorkItemStatus.DONE, "t16")
    turns = of(records, Turn)
    assert [t.trigger for t in turns] == ["operator_input", *["x-agent-step"] * 8]
    assert {t.anchor_turn_id for t in turns[1:]} == {"t1"}
    assert turns[1].at == "2025-11-18T23:54:20Z"
    tools = {t.id: t for t in of(records, Tool)}
    assert [(t.exit_code, t.status) for t in tools.values()] == [
        (0, ToolStatus.OK), (0, ToolStatus.OK), (1, ToolStatus.ERROR), (None, ToolStatus.TIMEOUT),
        (0, ToolStatus.OK), (0, ToolStatus.OK), (None, ToolStatus.OK)]
    assert tools["x4"].files_written == ["reproduce.py"]
    assert tools["x10"].files_written == ["sympy/core/symbol.py"]
    assert (tools["x10"].output, tools["x10"].turn_id) == ("partial", "t10")
    assert tools["x12"].output == "HEAD\n[… 12345 characters elided by mini-swe-agent …]\nTAIL"
    assert tools["x6"].args_digest == digest("python reproduce.py") == tools["x14"].args_digest
    assert tools["x16"].output.startswith("diff --git")
    # The malformed step keeps its message; the harness's complaint is a runtime note.
    notes = [m for m in of(records, Message) if m.role is MessageRole.SYSTEM]
    assert [(n.turn_id, n.trust) for n in notes] == [("t8", Trust.RUNTIME_FACT)]
    assert "t8" not in {t.turn_id for t in tools.values()}


def test_detection_says_which_format_and_why(tmp_path: Path) -> None:
    """Auto-detection names the format and the feature that decided it."""
    cases = [
        ("a.traj.json", SWE, TranscriptFormat.SWE_TRAJ, "trajectory_format"),
        ("b.json", ANTHROPIC, TranscriptFormat.ANTHROPIC, "system"),
        ("c.json", OPENAI, TranscriptFormat.OPENAI, "role"),
        ("d.json", [{"role": "user", "content": "hi"}], TranscriptFormat.OPENAI, "plain"),
        ("e.json", {"messages": [{"role": "assistant", "content": [
            {"type": "tool_use", "id": "t", "name": "n", "input": {}}]}]},
         TranscriptFormat.ANTHROPIC, "tool_use"),
    ]
    for name, data, fmt, why in cases:
        found = detect_format(write(tmp_path, name, data))
        assert found.format is fmt, (name, found)
        assert why in found.reason, (name, found)
    ledger = tmp_path / "l.txt"
    ledger.write_bytes(b'{"v":1,"type":"turn","id":"t1","seq":0,"trigger":"operator_input"}\n')
    assert detect_format(ledger).format is TranscriptFormat.LEDGER


Bad = tuple[str, str, Any, str, str]
#: A provider naming both replies' calls ``call_1``: the first answered before the second.
REUSED: list[dict[str, Any]] = [OPENAI[1], {"role": "assistant", "tool_calls": [
    OPENAI[2]["tool_calls"][0]]}, OPENAI[4], {"role": "assistant", "tool_calls": [
        OPENAI[2]["tool_calls"][0]]}, OPENAI[4]]
#: (name, --from, content, JSON path, message): each a transcript that must import nothing. A bare
#: message list's paths start at ``$[i]``: a path names a place the input has (issue 27).
BAD: list[Bad] = [
    ("result-without-call", "openai",
     [*OPENAI[:5], {"role": "tool", "tool_call_id": "call_9", "content": "?"}],
     "$[5].tool_call_id", "no tool call 'call_9' before this result"),
    ("second-result", "openai", [*OPENAI[:5], OPENAI[4]],
     "$[5].tool_call_id", "a second result for tool call 'call_1' "
                                   "(first at $[4].tool_call_id)"),
    ("result-after-turn-closed", "openai",
     [OPENAI[1], OPENAI[2], {"role": "user", "content": "?"}, OPENAI[3]],
     "$[3].tool_call_id", "tool call 'call_2' ($[1].tool_calls[1]) was left "
     "without a result when its turn ended; a result must come before the next user or "
     "assistant turn"),
    ("duplicate-call-id", "openai",
     [OPENAI[1], {"role": "assistant", "tool_calls": [OPENAI[2]["tool_calls"][0]] * 2}],
     "$[1].tool_calls[1]", "duplicate tool call id 'call_1'"),
    # An id may be reused once its call is answered (RFC 0008, decision 9): a result pairs with
    # the newest call of its id, and the errors name that call and its result.
    ("second-result-after-reuse", "openai", [*REUSED, REUSED[2]],
     "$[5].tool_call_id", "a second result for tool call 'call_1' (first at $[4].tool_call_id)"),
    ("reused-call-left-unanswered", "openai",
     [*REUSED[:4], {"role": "user", "content": "?"}, REUSED[4]],
     "$[5].tool_call_id", "tool call 'call_1' ($[3].tool_calls[0]) was left without a result "
     "when its turn ended; a result must come before the next user or assistant turn"),
    ("missing-role", "openai", [{"content": "hi"}], "$[0].role", "missing required field"),
    ("user-without-content", "openai", [{"role": "user"}], "$[0].content",
     "missing required field"),
    ("user-content-null", "openai", [{"role": "user", "content": None}], "$[0].content",
     "expected a string or an array, got null"),
    ("system-without-content", "openai", [{"role": "system"}, OPENAI[1]], "$[0].content",
     "missing required field"),
    ("tool-without-content", "openai", [*OPENAI[1:4], {"role": "tool", "tool_call_id": "call_1"}],
     "$[3].content", "missing required field"),
    ("assistant-without-content-or-calls", "openai", [OPENAI[1], {"role": "assistant"}],
     "$[1].content", "missing required field (an assistant message may leave it out only when "
                     "it has tool_calls)"),
    ("unknown-role", "openai", [{"role": "admin", "content": "hi"}], "$[0].role",
     "expected one of system, developer, user, assistant, tool, got 'admin'"),
    ("legacy-function", "openai", [OPENAI[1], {"role": "function", "name": "f", "content": "1"}],
     "$[1].role", "legacy 'function' messages are not supported; use 'tool' "
                           "messages with tool_call_id"),
    ("content-wrong-type", "openai", [{"role": "user", "content": 7}], "$[0].content",
     "expected a string or an array, got integer"),
    ("part-without-text", "openai", [{"role": "user", "content": [{"type": "text"}]}],
     "$[0].content[0].text", "expected a string, got null"),
    ("tool-calls-not-list", "openai", [OPENAI[1], {"role": "assistant", "tool_calls": {}}],
     "$[1].tool_calls", "expected an array, got object"),
    ("arguments-wrong-type", "openai", [OPENAI[1], {"role": "assistant", "tool_calls": [
        {"id": "c", "function": {"name": "f", "arguments": 3}}]}],
     "$[1].tool_calls[0].function.arguments", "expected an object, got integer"),
    ("no-conversation", "openai", [], "$",
     "no conversation: the transcript holds no user or assistant message"),
    ("not-a-transcript", "openai", 42, "$", "expected an object or an array, got integer"),
    ("anthropic-system-role", "anthropic",
     {"messages": [{"role": "system", "content": "x"}]}, "$.messages[0].role",
     "Anthropic messages have no 'system' role; give the system prompt as the top-level "
     "'system' field"),
    ("anthropic-unknown-tool-use", "anthropic",
     {"messages": [ANTHROPIC["messages"][0], ANTHROPIC["messages"][2]]},
     "$.messages[1].content[0].tool_use_id", "no tool call 'toolu_1' before this result"),
    ("anthropic-is-error-type", "anthropic",
     {"messages": [*ANTHROPIC["messages"][:2], {"role": "user", "content": [
         {"type": "tool_result", "tool_use_id": "toolu_1", "is_error": "yes"}]}]},
     "$.messages[2].content[0].is_error", "expected a boolean, got str"),
    ("anthropic-block-without-type", "anthropic",
     {"messages": [{"role": "user", "content": [{"text": "x"}]}]},
     "$.messages[0].content[0].type", "expected a string, got null"),
    ("anthropic-messages-missing", "anthropic", {"system": "x"}, "$.messages",
     "missing required field"),
    ("anthropic-user-without-content", "anthropic", {"messages": [{"role": "user"}]},
     "$.messages[0].content", "missing required field"),
    ("swe-no-messages", "swe-traj", {"info": {}}, "$.messages", "missing required field"),
    ("swe-step-without-content", "swe-traj",
     {"messages": [*SWE["messages"][:2], {"role": "assistant"}]},
     "$.messages[2].content", "missing required field"),
    ("swe-no-task", "swe-traj", {"messages": [SWE["messages"][0]]}, "$.messages",
     "no task: a trajectory needs a user message after the system prompt"),
    ("swe-task-not-user", "swe-traj", {"messages": [SWE["messages"][0], SWE["messages"][2]]},
     "$.messages[1].role", "expected 'user' (the task message), got 'assistant'"),
    ("swe-content-not-text", "swe-traj",
     {"messages": [*SWE["messages"][:2], {"role": "assistant", "content": ["x"]}]},
     "$.messages[2].content", "expected a string, got array"),
    ("swe-unknown-role", "swe-traj",
     {"messages": [*SWE["messages"][:2], {"role": "tool", "content": "x"}]},
     "$.messages[2].role", "expected one of system, user, assistant, got 'tool'"),
]


def located(content: Any, path: str) -> int:
    """The line of ``path``'s value in ``json.dumps(content, indent=1)`` (for a key its object
    lacks, the object's line), found without the scanner under test: the value is replaced by a
    marker and the marker's line read, since nothing before a value depends on what it holds."""
    steps = [k or int(i) for k, i in re.findall(r"\.(\w+)|\[(\d+)\]", path[1:])]
    root = holder = [json.loads(json.dumps(content))]
    key: str | int = 0
    for step in steps:
        node = holder[key]  # type: ignore[index]
        if isinstance(step, str) and step not in node:
            break  # missing: the marker replaces the object that lacks it
        holder, key = node, step
    holder[key] = "\u2063MARK"  # type: ignore[index]
    text = json.dumps(root[0], indent=1, ensure_ascii=False)
    return text.count("\n", 0, text.index("\u2063MARK")) + 1


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_bad_transcript_is_one_located_line_and_writes_nothing(
        case: Bad, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A bad transcript exits 2 with one line naming file, line and JSON path; no database is
    left. The line is where the value named starts (for a missing field, its object's)."""
    name, fmt, content, path, message = case
    src = tmp_path / f"{name}.json"
    src.write_text(json.dumps(content, indent=1), encoding="utf-8")
    db = tmp_path / "ledger.db"
    code = main(["import", str(src), "--db", str(db), "--from", fmt])
    out = capsys.readouterr()
    assert (code, out.out) == (2, "")
    assert out.err == f"holon-ctx: error: {src}:{located(content, path)}: {path}: {message}\n"
    assert not db.exists()


@pytest.mark.parametrize(("content", "line", "message"), [
    (b'[{"role": "user",\n "content": "hi"},\n oops]', 3, "invalid JSON: "),
    (b'\xef\xbb\xbf[]', 1, "file starts with a UTF-8 byte-order mark; transcripts must be plain "
                           "UTF-8"),
    (b'[{"role": "user", "content": "\xff"}]', 1, "invalid UTF-8 at byte 30"),
    (b"  \n", 1, "empty file: no transcript"),
], ids=["invalid-json", "bom", "invalid-utf8", "empty"])
def test_unreadable_bytes_name_the_line(content: bytes, line: int, message: str,
                                        tmp_path: Path) -> None:
    """Bytes that are not a JSON document raise an error naming file and line."""
    src = tmp_path / "t.json"
    src.write_bytes(content)
    with pytest.raises(LedgerFormatError) as info:
        read_transcript(src, "openai")
    assert (info.value.source, info.value.line) == (str(src), line)
    assert info.value.message.startswith(message)


def test_a_failed_import_leaves_a_populated_database_unchanged(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """All-or-nothing: a transcript whose last message is bad adds nothing to an existing ledger."""
    db = tmp_path / "ledger.db"
    assert main(["import", str(write(tmp_path, "ok.json", OPENAI)), "--db", str(db),
                 "--from", "openai"]) == 0
    before = SqliteStore(db).stats().records
    bad = [*ANTHROPIC["messages"][:3], {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "nope"}]}]
    src = write(tmp_path, "bad.json", {"system": "s", "messages": bad})
    assert main(["import", str(src), "--db", str(db)]) == 2
    assert "$.messages[3].content[0].tool_use_id: no tool call 'nope'" in capsys.readouterr().err
    assert SqliteStore(db).stats().records == before


def test_cli_says_the_detected_format_on_stderr(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """--from auto reports the format on stderr; an explicit --from does not."""
    src = write(tmp_path, "run.traj.json", SWE)
    assert main(["import", str(src), "--db", str(tmp_path / "a.db")]) == 0
    out = capsys.readouterr()
    assert out.err == (f"holon-ctx: read {src} as swe-traj (trajectory_format "
                       "'mini-swe-agent-1')\n")
    assert re.fullmatch(r"imported \d+ records from .* \(9 turns, \d+ records in the ledger\)\n",
                        out.out)
    assert main(["import", str(src), "--db", str(tmp_path / "b.db"), "--from", "swe-traj"]) == 0
    assert capsys.readouterr().err == ""


def test_a_second_transcript_continues_the_sequence(tmp_path: Path) -> None:
    """Importing after an existing ledger numbers turns after it; an id prefix avoids clashes."""
    store = MemoryStore()
    import_any(write(tmp_path, "a.json", OPENAI), store, "openai")
    src = write(tmp_path, "b.json", ANTHROPIC)
    with pytest.raises(LedgerFormatError, match=r"b\.json: \$\.id: duplicate id: environment:e0"):
        import_any(src, store)
    import_any(src, store, id_prefix="b.")
    seqs = [r.seq for r in store.iter_records() if isinstance(r, Turn)]
    assert seqs == list(range(5))
    assert store.get("turn:b.t0") is not None


def test_a_transcript_clashing_with_one_imported_says_to_give_it_a_prefix(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A transcript imported a second time (or beside another, without a prefix) stops at the
    first id it shares, names it, says how to import it beside (the CLI's flag, the library's
    argument) and writes nothing; with --id-prefix it imports."""
    src = write(tmp_path, "chat.json", OPENAI)
    db = tmp_path / "l.db"
    assert main(["import", str(src), "--db", str(db), "--from", "openai"]) == 0
    capsys.readouterr()
    before = SqliteStore(db).end_pos()
    assert main(["import", str(src), "--db", str(db), "--from", "openai"]) == 2
    hint = ("a transcript's ids name its messages, so this one was imported already, or another "
            "one was: give this one its own ids with ")
    assert capsys.readouterr().err == (
        f"holon-ctx: error: {src}: $.id: duplicate id: environment:e0 is already in the ledger; "
        f"{hint}--id-prefix b.\n")
    assert SqliteStore(db).end_pos() == before
    with pytest.raises(DuplicateIdError) as info:
        import_any(src, SqliteStore(db), "openai")
    assert (info.value.ref, str(info.value).endswith(f'{hint}id_prefix="b."')) == (
        "environment:e0", True)
    assert main(["import", str(src), "--db", str(db), "--from", "openai", "--id-prefix", "b."]) == 0
    assert SqliteStore(db).end_pos() == 2 * before


def test_transcript_sources_work_wherever_a_ledger_does(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """project, stats and export accept a transcript file as SOURCE, and it round-trips as JSONL."""
    src = write(tmp_path, "run.traj.json", SWE)
    assert main(["project", str(src), "--budget", "600", "--mode", "stateless"]) == 0
    text = capsys.readouterr().out
    # The relation line right above the current turn's heading names its anchor (RFC 0015).
    assert ("(continuation anchor: turn:t1)\n### turn:t16 · x-agent-step\n") in text
    assert main(["stats", str(src), "--plain"]) == 0
    capsys.readouterr()
    store = MemoryStore()
    import_any(src, store)
    jsonl = tmp_path / "run.jsonl"
    with jsonl.open("wb") as out:
        export_jsonl(store, out)
    again = MemoryStore()
    import_jsonl(jsonl, again)
    assert list(again.iter_records()) == list(store.iter_records())


@needs_corpus
@pytest.mark.parametrize("path", TRAJECTORIES, ids=[p.name.split(".")[0] for p in TRAJECTORIES])
def test_real_trajectory_imports_with_an_honest_trail(path: Path) -> None:
    """Every corpus trajectory imports; every submitted file a command names is in the trail."""
    data = json.loads(path.read_text(encoding="utf-8"))
    store = MemoryStore()
    detection, _ = import_any(path, store)
    assert detection.format is TranscriptFormat.SWE_TRAJ
    records = list(store.iter_records())
    written = {f for t in of(records, Tool) for f in t.files_written}
    commands = "\n".join(t.args_preview for t in of(records, Tool))
    submitted = set(re.findall(r"^diff --git a/(\S+)", data["info"]["submission"], re.MULTILINE))
    assert {f for f in submitted if f in commands} <= written
    assert {t.trust for t in of(records, Tool)} == {Trust.UNTRUSTED_EXTERNAL}
    operator = [m for m in of(records, Message) if m.role is MessageRole.OPERATOR]
    assert len(operator) == 1
    assert operator[0].text in data["messages"][1]["content"]
    steps = sum(1 for m in data["messages"] if m["role"] == "assistant")
    assert sum(1 for t in of(records, Turn) if t.trigger == "x-agent-step") == steps
