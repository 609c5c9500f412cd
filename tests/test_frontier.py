"""The execution frontier on real agent histories (issue 7): holon_ctx vs keep-the-newest.

For each mini-swe-agent trajectory of the corpus, at 25%, 50%, 75% and 100% of its steps, the
provider-format projection at 4,096 and 8,192 tokens must: state the task (the PR description
verbatim, or a pinned excerpt holding its first paragraph); show the last two steps (command and
result) verbatim, or the result clipped with a ref; name every file modified so far; state the
counts of commands run, failed and repeated, and fold repeated identical commands; and hold the
budget re-measured on the provider output. The same checks run, in the same run, on the
LangChain-style "keep the newest messages that fit" baseline (``bench/langchain_baseline.py``);
``python3 dev.py shell bench/langchain_baseline.py`` prints both tables for ``docs/performance.md``.
"""

from __future__ import annotations

import importlib.util
import json
import re
import statistics
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import attrs
import pytest
from folded_output import shown_whole

from holon_ctx.ledger.body import record_body
from holon_ctx.ledger.memory import MemoryStore
from holon_ctx.ledger.records import Message, MessageRole, Record, Tool, ToolStatus, Turn
from holon_ctx.ledger.transcript_swe import ACTION_RE, first_paragraph
from holon_ctx.ledger.transcripts import import_any
from holon_ctx.projection.measure.density import density
from holon_ctx.projection.planning.projector import Projector
from holon_ctx.projection.provider_formats.providers import (
    framing_tokens,
    measure,
    to_anthropic_messages,
    to_openai_messages,
)
from holon_ctx.projection.rendering.folding import hidden_differences
from holon_ctx.tokens import default_counter

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpora" / "swe-trajectories"
TRAJECTORIES = sorted(CORPUS.glob("*.traj.json")) if CORPUS.is_dir() else []
FRACTIONS = (0.25, 0.5, 0.75, 1.0)
BUDGETS = (4096, 8192)
CHECKS = {
    "task": "task statement present (verbatim or pinned first paragraph)",
    "last_two_steps": "last two steps: command and result (verbatim, or clipped with a ref)",
    "files_named": "every file modified so far named",
    "counts_stated": "commands run / failed / repeated stated (and correct)",
    "repeats_folded": "repeated identical commands folded",
    "budget_holds": "budget holds, re-measured on the provider output",
}
SYSTEMS = ("holon_ctx", "keep-newest")
_COUNTS = re.compile(r"(\d+) tool runs \((\d+) failed, (\d+) re-runs of an earlier command")
_FENCE = re.compile(r'<data tool:([^\s>]+)[ >]')


def _baseline() -> ModuleType:
    """bench/langchain_baseline.py (loaded by path: bench is not a package)."""
    spec = importlib.util.spec_from_file_location("langchain_baseline",
                                                  ROOT / "bench" / "langchain_baseline.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _norm(text: str) -> str:
    return " ".join(text.split())


@attrs.frozen
class Step:
    """One agent step: its turn, message, command and tool record (None for a malformed step)."""

    turn_id: str
    message: Message
    tool: Tool | None
    others: tuple[Record, ...]


class Trajectory:
    """A corpus trajectory imported into a MemoryStore, with its steps in order."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.name = path.name.removesuffix(".traj.json")
        self.data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        self.store = MemoryStore()
        import_any(path, self.store)
        records = list(self.store.iter_records())
        owned: dict[str, list[Record]] = {}
        for rec in records:
            tid = getattr(rec, "turn_id", None)
            if tid is not None:
                owned.setdefault(tid, []).append(rec)
        self.task = next(r.text for r in records
                         if isinstance(r, Message) and r.role is MessageRole.OPERATOR)
        self.steps: list[Step] = []
        for turn in (r for r in records if isinstance(r, Turn) and r.trigger == "x-agent-step"):
            mine = owned[turn.id]
            message = next(r for r in mine if isinstance(r, Message))
            tool = next((r for r in mine if isinstance(r, Tool)), None)
            self.steps.append(Step(turn.id, message, tool,
                                   tuple(r for r in mine if r is not message and r is not tool)))

    def points(self) -> Iterator[int]:
        """Step counts at 25%, 50%, 75% and 100% of the trajectory."""
        for fraction in FRACTIONS:
            yield max(1, round(len(self.steps) * fraction))

    def truth(self, k: int) -> tuple[list[str], tuple[int, int, int], list[Tool]]:
        """Files written, (run, failed, repeated) and the tool runs of the first ``k`` steps."""
        runs = [s.tool for s in self.steps[:k]
                if s.tool is not None and s.tool.status is not ToolStatus.PENDING]
        files = list(dict.fromkeys(f for t in runs for f in t.files_written))
        failed = sum(1 for t in runs
                     if t.status in (ToolStatus.ERROR, ToolStatus.TIMEOUT) or t.exit_code)
        repeated = len(runs) - len({t.args_digest for t in runs})
        return files, (len(runs), failed, repeated), runs


@attrs.frozen
class Point:
    """The checks of one system on one trajectory at one step count and budget."""

    trajectory: str
    step: int
    steps: int
    budget: int
    system: str
    tokens: int
    results: dict[str, bool]
    #: holon_ctx only (issue 12, beside the checks): the prompt's markup share by both measures,
    #: whether a newest step is cut while a token is left, earlier runs folded as repeats, and
    #: of those the ones whose result differs from the run shown for them.
    figures: dict[str, float] = attrs.field(factory=dict)

    @property
    def passed(self) -> bool:
        return all(self.results.values())


def _task_present(traj: Trajectory, text: str) -> bool:
    return traj.task.strip() in text or _norm(first_paragraph(traj.task)) in _norm(text)


def _result_shown(tool: Tool, text: str) -> bool:
    """The tool's output verbatim (repeated lines shown once, RFC 0016), or its fence with a ref
    to the full text."""
    body = record_body(tool)
    label = f"tool:{tool.id} "
    if not body:
        return label in text
    if shown_whole(tool, f"tool:{tool.id}", text):
        return True  # verbatim, or with repeated lines shown once (RFC 0016), read back exactly
    # Its fence names the ref and, when its kind does not imply them, origin and trust.
    opened = re.search(rf"<data tool:{re.escape(tool.id)}[ >]", text)
    if opened is None:
        return False
    after = text[opened.start():]
    end = after.find("</data>")
    return (f"full text: tool:{tool.id}" in after[:end]
            or after[end:end + 200].startswith("</data>\n[clipped"))


def _message_shown(message: Message, text: str) -> bool:
    body = record_body(message)
    return body in text or f"full text: message:{message.id}" in text


def check_holon_ctx(traj: Trajectory, projector: Projector, k: int, budget: int) -> Point:
    """Project as of step ``k`` in the provider formats and run every check on the output."""
    step = traj.steps[k - 1]
    projection = projector.project(budget_tokens=budget - framing_tokens(), at=step.turn_id,
                                   verify=True)
    openai, anthropic = to_openai_messages(projection), to_anthropic_messages(projection)
    text = "".join(m["content"] for m in openai)
    counter = default_counter()
    tokens = max(measure(openai, counter), measure(anthropic, counter))
    files, counts, runs = traj.truth(k)
    last_two = traj.steps[max(0, k - 2):k]
    stated = _COUNTS.search(text)
    # Identical runs: the same command with the same result. A re-run that printed something
    # else is not a repeat to fold (issue 12): the earlier run keeps the lines that differ.
    shown_by_digest: dict[tuple[object, ...], set[str]] = {}
    shown = set(_FENCE.findall(text))
    for run in runs:
        if run.id in shown:
            key = (run.args_digest, run.status, run.exit_code, run.output, run.output_ref)
            shown_by_digest.setdefault(key, set()).add(run.id)
    verbatim_pair = {s.tool.id for s in last_two if s.tool is not None}
    results = {
        "task": _task_present(traj, text),
        "last_two_steps": all(
            (s.tool is None and _message_shown(s.message, text)
             and all(record_body(o) in text for o in s.others if isinstance(o, Message)))
            or (s.tool is not None and _result_shown(s.tool, text)
                and (s.tool.args_preview in text or _message_shown(s.message, text)))
            for s in last_two),
        "files_named": all(f in text for f in files),
        "counts_stated": stated is not None and tuple(map(int, stated.groups())) == counts,
        # One output per distinct command and result, except the last two steps (verbatim).
        "repeats_folded": all(len(ids) <= 1 or ids <= verbatim_pair
                              for ids in shown_by_digest.values()),
        "budget_holds": tokens <= budget,
    }
    d = density(projection, counter, [f"turn:{s.turn_id}" for s in last_two])
    figures = {"markup": d.markup_share, "strict": d.strict_markup_share,
               "cut_with_room": float(d.cut_with_room),
               "folded_runs": float(sum(len(f.refs) - 1 for f in projection.folds
                                        if "repeated_tool_call" in f.kinds)),
               "fold_hides_different_output": float(len(hidden_differences(
                   projection.folds, traj.store.get)))}
    return Point(traj.name, k, len(traj.steps), budget, "holon_ctx", tokens, results, figures)


def check_baseline(traj: Trajectory, k: int, budget: int) -> Point:
    """Trim the raw chat history as of step ``k`` and run the same checks on what is kept."""
    baseline = _baseline()
    counter = default_counter()
    kept = baseline.keep_newest(baseline.trajectory_messages(traj.data["messages"], k), budget,
                                counter)
    text = "".join(m["content"] for m in kept)
    tokens = measure(kept, counter)
    files, counts, _ = traj.truth(k)
    raw = baseline.trajectory_messages(traj.data["messages"], k)
    # The last two steps: their assistant messages and the harness replies that follow them.
    tail: list[str] = []
    seen = 0
    for msg in reversed(raw):
        tail.append(msg["content"])
        seen += msg["role"] == "assistant"
        if seen == 2:
            break
    commands: dict[str, int] = {}
    for i, msg in enumerate(kept):
        actions = ACTION_RE.findall(msg["content"]) if msg["role"] == "assistant" else []
        has_reply = i + 1 < len(kept) and kept[i + 1]["role"] == "user"
        if len(actions) == 1 and has_reply and msg["content"] not in tail:
            commands[actions[0].strip()] = commands.get(actions[0].strip(), 0) + 1
    stated = _COUNTS.search(text)
    results = {
        "task": _task_present(traj, text),
        "last_two_steps": all(t in text for t in tail),
        "files_named": all(f in text for f in files),
        "counts_stated": stated is not None and tuple(map(int, stated.groups())) == counts,
        "repeats_folded": all(n == 1 for n in commands.values()),
        "budget_holds": tokens <= budget,
    }
    return Point(traj.name, k, len(traj.steps), budget, "keep-newest", tokens, results)


@cache
def load(path: Path) -> Trajectory:
    return Trajectory(path)


def evaluate(path: Path) -> list[Point]:
    """Both systems at every step count and budget of one trajectory."""
    traj = load(path)
    projector = Projector(traj.store)
    points = []
    for k in traj.points():
        for budget in BUDGETS:
            points.append(check_holon_ctx(traj, projector, k, budget))
            points.append(check_baseline(traj, k, budget))
    return points


def evaluate_corpus() -> list[Point]:
    return [p for path in TRAJECTORIES for p in evaluate(path)]


def markdown_tables(points: list[Point]) -> str:
    """The two tables of docs/performance.md: checks by system and budget, and by trajectory."""
    def cell(system: str, budget: int, check: str | None) -> str:
        chosen = [p for p in points if p.system == system and p.budget == budget]
        ok = sum(1 for p in chosen if (p.passed if check is None else p.results[check]))
        return f"{ok}/{len(chosen)}"

    cols = [(s, b) for s in SYSTEMS for b in BUDGETS]
    lines = ["| check | " + " | ".join(f"{s} {b:,}" for s, b in cols) + " |",
             "|---|" + "---:|" * len(cols)]
    for check, title in CHECKS.items():
        lines.append(f"| {title} | " + " | ".join(cell(s, b, check) for s, b in cols) + " |")
    lines.append("| **all six checks** | " + " | ".join(f"**{cell(s, b, None)}**"
                                                       for s, b in cols) + " |")
    lines += ["", "| trajectory | steps | " + " | ".join(
        f"{s}: all checks" for s in SYSTEMS) + " | keep-newest: fails |", "|---|---:|---:|---:|---|"]
    for name in dict.fromkeys(p.trajectory for p in points):
        mine = [p for p in points if p.trajectory == name]
        fails: dict[str, int] = {}
        for p in mine:
            if p.system == "keep-newest":
                for check, ok in p.results.items():
                    fails[check] = fails.get(check, 0) + (not ok)
        shown = ", ".join(f"{c} {n}" for c, n in fails.items() if n)
        row = [f"{sum(p.passed for p in mine if p.system == s)}/"
               f"{sum(1 for p in mine if p.system == s)}" for s in SYSTEMS]
        lines.append(f"| {name} | {mine[0].steps} | " + " | ".join(row) + f" | {shown} |")
    lines += ["", "| holon_ctx at these points | budget | markup p50 | strict p50 | cut with room "
              "| earlier runs folded | folds hiding a different output |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    for budget in BUDGETS:
        mine = [p.figures for p in points if p.system == "holon_ctx" and p.budget == budget]
        lines.append(
            f"| {len(mine)} points | {budget:,} | "
            f"{statistics.median(f['markup'] for f in mine):.1%} | "
            f"{statistics.median(f['strict'] for f in mine):.1%} | "
            f"{sum(f['cut_with_room'] for f in mine):.0f} | "
            f"{sum(f['folded_runs'] for f in mine):.0f} | "
            f"{sum(f['fold_hides_different_output'] for f in mine):.0f} |")
    return "\n".join(lines)


needs_corpus = pytest.mark.skipif(not TRAJECTORIES, reason=f"corpus not found at {CORPUS}")


@needs_corpus
@pytest.mark.parametrize("path", TRAJECTORIES, ids=[p.name.split(".")[0] for p in TRAJECTORIES])
def test_holon_ctx_keeps_the_execution_frontier(path: Path) -> None:
    """At 25/50/75/100% of the steps and 4,096/8,192 tokens, every check holds for holon_ctx."""
    failures = [(p.step, p.budget, [c for c, ok in p.results.items() if not ok])
                for p in evaluate(path) if p.system == "holon_ctx" and not p.passed]
    assert failures == []


@needs_corpus
@pytest.mark.parametrize("path", TRAJECTORIES, ids=[p.name.split(".")[0] for p in TRAJECTORIES])
def test_at_the_frontier_points_no_fold_hides_a_result_and_no_newest_step_is_cut_with_room(
        path: Path) -> None:
    """Issue 12's figures beside the six checks, at the same points: no newest step cut while
    a token of the budget is left, and no fold of a re-run hiding a result that differs."""
    points = [p for p in evaluate(path) if p.system == "holon_ctx"]
    assert [(p.step, p.budget) for p in points if p.figures["cut_with_room"]] == []
    assert [(p.step, p.budget) for p in points if p.figures["fold_hides_different_output"]] == []


@needs_corpus
def test_the_baseline_is_checked_in_the_same_run() -> None:
    """Keep-the-newest is measured by the same checks; it holds the budget and loses the rest, and
    docs/performance.md shows the tables of this run (printed by bench/langchain_baseline.py)."""
    points = evaluate_corpus()
    baseline = [p for p in points if p.system == "keep-newest"]
    assert len(baseline) == len(TRAJECTORIES) * len(FRACTIONS) * len(BUDGETS)
    assert all(p.results["budget_holds"] for p in baseline)
    assert not any(p.results["counts_stated"] for p in baseline)
    assert sum(not p.results["task"] for p in baseline) > len(baseline) // 2
    # Compared, not printed: a table among pytest's progress dots is noise (issue 16).
    tables = markdown_tables(points)
    assert tables in (ROOT / "docs" / "performance.md").read_text(encoding="utf-8"), (
        "docs/performance.md is out of date; paste the output of "
        "`python3 dev.py shell bench/langchain_baseline.py`:\n" + tables)
