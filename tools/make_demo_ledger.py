"""The bundled demo ledger, generated from its story in ``tools/demo_story/``.

A dev tool, outside the package: the wheel ships only the data it writes (RFC 0028).
``build_demo_records()`` is a pure, deterministic generator (its only randomness is
``random.Random(DEMO_SEED)``, its only clock is a fixed start time) whose output, written with
:func:`holon_ctx.ledger.codec.write_jsonl`, is the bundled file ``holon_ctx/data/demo.jsonl``.
Run ``python3 dev.py shell tools/make_demo_ledger.py`` to regenerate the file after changing the
story; ``tests/test_demo_ledger.py`` regenerates it and fails while the two disagree.

The story is data (``tools/demo_story/README.md`` tells it): one TOML file per scene, in order,
each a list of ``[[step]]`` tables, and ``texts.toml`` with the texts several steps share and the
pieces of the one output composed here (the ``pytest -v`` log). This module is the interpreter:
:class:`_Day` hands out ids, sequence numbers and timestamps, fills provenance the way a runtime
would, and keeps the ownership rules of RFC 0001 (every owned record names its turn; anchors
point back). A step's first key names one of :data:`_ACTIONS` (a method of :class:`_Day`) and
holds its first argument; the other keys are its other arguments, by name. Values are read by
the method's annotations: an enum by its value, ``false`` for "none" (TOML has no null) where the
parameter is not a bool, ``[a, b]`` for an ``int`` as a random draw in that range, and
``"@name"`` for a landmark turn's id (a ``key`` given earlier) or a text of ``texts.toml``
(``"@last"``: the last record's ref; ``"@@"`` starts a text that starts with ``@``).
``key`` on a turn names it in :data:`KEY_TURNS`; ``ref = "name"`` names the step's last record in
:data:`KEY_REFS`; ``fill = true`` formats the step's texts with the values earlier steps measured
(``{suite_passed}``; a ``mark``'s name gives the time since it as ``1h32m``).
"""

from __future__ import annotations

import hashlib
import inspect
import io
import random
import sys
import tomllib
import types
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from enum import Enum
from pathlib import Path
from typing import Any, Final, Union, get_args, get_origin, get_type_hints

import msgspec

from holon_ctx.ledger.codec import provenance_defaults, write_jsonl
from holon_ctx.ledger.records import (
    Brief,
    BriefKind,
    Environment,
    ExternalEvent,
    Message,
    MessageRole,
    Origin,
    Outcome,
    Pin,
    Record,
    SideEffect,
    TaskResult,
    TaskStatus,
    Todo,
    Tool,
    ToolStatus,
    Trust,
    Turn,
    Wait,
    WaitStatus,
    WorkItem,
    WorkItemStatus,
    record_ref,
)

__all__ = [
    "DEMO_SEED",
    "KEY_REFS",
    "KEY_TURNS",
    "build_demo_records",
    "bundled_demo_path",
    "demo_jsonl_bytes",
]

#: The one seed of the demo's variation (tick spacing, retry backoffs, request ids, durations).
DEMO_SEED: Final = 20261130
_START: Final = datetime(2026, 11, 30, 8, 0, 0, tzinfo=UTC)
_FOCUS: Final = "@focus"
STORY_DIR: Final = Path(__file__).resolve().parent / "demo_story"
_TEXTS: Final[dict[str, Any]] = tomllib.loads((STORY_DIR / "texts.toml").read_text(encoding="utf-8"))


def _digest(tool_name: str, args: str) -> str:
    return "sha256:" + hashlib.sha256(f"{tool_name}\0{args}".encode()).hexdigest()[:16]


class _Day:
    """Appends records in ledger order with ids, sequence numbers, timestamps and provenance."""

    def __init__(self) -> None:
        self.rng = random.Random(DEMO_SEED)
        self.records: list[Record] = []
        self.now = _START
        self._counters: dict[str, int] = {}
        self.seq = 0
        self.turn_id = ""
        self.turn_wi: str | None = None
        self.wi_of_turn: dict[str, str | None] = {}
        #: The work item the agent is working on; turns act for it unless told otherwise.
        self.focus: str | None = None
        self.open_waits: list[str] = []
        self.todos: dict[str, list[Todo]] = {}
        #: Landmark turns and records by name (KEY_TURNS, KEY_REFS).
        self.keys: dict[str, str] = {}
        self.refs: dict[str, str] = {}
        #: What steps measured, for later steps' texts (``fill = true``), and marked moments.
        self.values: dict[str, str] = {}
        self.marks: dict[str, datetime] = {}

    # -- plumbing -----------------------------------------------------------------------------
    def next_id(self, prefix: str, width: int = 3) -> str:
        n = self._counters.get(prefix, 0) + 1
        self._counters[prefix] = n
        return f"{prefix}{n:0{width}d}"

    def advance(self, seconds: int) -> None:
        self.now += timedelta(seconds=seconds)

    def clock(self, hh_mm: str) -> None:
        """Move the clock forward to ``hh:mm`` (never backwards)."""
        hh, mm = hh_mm.split(":")
        target = _START.replace(hour=int(hh), minute=int(mm))
        self.now = max(self.now, target)

    def mark(self, name: str) -> None:
        """Remember this moment; a later filled text's ``{name}`` is the time since, ``1h32m``."""
        self.marks[name] = self.now

    def switch(self, wi: str | None) -> None:
        """The agent turns to another work item: later turns act for it unless told otherwise."""
        self.focus = wi

    def add(self, record: Record, secs: int | None = None) -> str:
        self.advance(self.rng.randint(1, 4) if secs is None else max(secs, 1))
        origin, trust = provenance_defaults(record)
        record = msgspec.structs.replace(
            record, at=self.now.strftime("%Y-%m-%dT%H:%M:%SZ"), origin=origin, trust=trust)
        self.records.append(record)
        return record.id

    def last_ref(self) -> str:
        return record_ref(self.records[-1])

    def fill_values(self) -> dict[str, str]:
        since = {name: f"{m // 60}h{m % 60:02d}m" for name, at in self.marks.items()
                 for m in [int((self.now - at).total_seconds() // 60)]}
        return self.values | since

    # -- turns --------------------------------------------------------------------------------
    def turn(self, trigger: str, label: str, outcome: Outcome, *, anchor: str | None = None,
             wi: str | None = _FOCUS, gap: int = 0, key: str | None = None,
             origin: Origin | None = None) -> str:
        self.advance(gap)
        self.seq += 1
        tid = self.next_id("t")
        self.turn_id = tid
        self.turn_wi = self.focus if wi == _FOCUS else wi
        self.wi_of_turn[tid] = self.turn_wi
        self.add(Turn(id=tid, seq=self.seq, trigger=trigger, work_item_id=self.turn_wi,
                      anchor_turn_id=anchor, outcome=outcome, label=label, origin=origin))
        if key is not None:
            self.keys[key] = tid
        return tid

    def tick(self, gap: int) -> str:
        """A scheduler wake with nothing to do; it acts for no work item."""
        waits = ", ".join(self.open_waits)
        choices = [
            "scheduler tick: nothing due",
            "scheduler tick: 0 jobs due, lease renewed",
            f"scheduler tick: open waits [{waits}], none ready" if waits else
            "scheduler tick: no open waits",
            "scheduler tick: heartbeat ok",
            "scheduler tick: cron dependabot-digest (18:00) and stale-branch-sweep (02:00) not due",
            f"scheduler tick: inbox empty, {len(self.open_waits)} open wait(s)",
        ]
        return self.turn("scheduler_tick", self.rng.choice(choices), Outcome.NOOP, gap=gap,
                         wi=None)

    def idle(self, minutes: int) -> None:
        """Scheduler ticks until ``minutes`` have passed."""
        end = self.now + timedelta(minutes=minutes)
        while True:
            step = self.rng.randint(100, 170)
            if self.now + timedelta(seconds=step + 5) > end:
                break
            self.tick(step)
        self.now = max(self.now, end)

    def provider_trouble(self, anchor: str, attempts: int, *, fallback: bool,
                         gap: int = 20) -> None:
        """A burst of failed model calls for the wake ``anchor``: retries that fail (outcome
        error, the provider's error logged as a system message), then either a fallback model or
        a last retry that gets through, both with nothing left to do (outcome noop)."""
        error = self.rng.choice(_TEXTS["provider_error"])
        kind, detail = error["kind"], error["detail"]
        backoff = 2.0
        for attempt in range(1, attempts + 1):
            last_ok = attempt == attempts and not fallback
            label = (f"provider retry {attempt}/{attempts}: anthropic claude-sonnet-4-5 "
                     + ("answered; nothing to do" if last_ok
                        else f"{kind}; backing off {backoff:.1f}s"))
            self.turn("provider_retry", label, Outcome.NOOP if last_ok else Outcome.ERROR,
                      anchor=anchor, wi=self.wi_of_turn[anchor],
                      gap=gap if attempt == 1 else int(backoff) + self.rng.randint(1, 3))
            if not last_ok:
                req = "".join(self.rng.choice("0123456789abcdef") for _ in range(24))
                secs = self.rng.uniform(8.0, 61.0)
                self.system(f"provider error (attempt {attempt}/{attempts}): {kind}: "
                            f"{detail.format(secs=secs)} request_id=req_{req}")
            backoff = min(backoff * 2 + self.rng.random(), 30.0)
        if fallback:
            self.turn("provider_fallback",
                      f"provider fallback: anthropic unavailable after {attempts} attempts; "
                      "openai gpt-4.1 answered (nothing to do)",
                      Outcome.NOOP, anchor=anchor, wi=self.wi_of_turn[anchor],
                      gap=self.rng.randint(3, 8))
            self.system("fallback model openai/gpt-4.1 served this wake; the primary is retried "
                        "on the next one")

    def task_turn(self, task_id: str, spawned_by: str, status: TaskStatus, summary: str, *,
                  outcome: Outcome, gap: int, verification: bool = False,
                  wait_id: str | None = None, output_ref: str | None = None,
                  trigger: str = "task_result", trust: Trust | None = None,
                  key: str | None = None) -> str:
        tid = self.turn(trigger, f"task {task_id} finished: {status.value}", outcome,
                        anchor=spawned_by, gap=gap, key=key)
        self.add(TaskResult(id=self.next_id("r"), turn_id=tid, task_id=task_id, status=status,
                            summary=summary, output_ref=output_ref, spawned_by_turn_id=spawned_by,
                            work_item_id=self.turn_wi, wait_id=wait_id,
                            verification=verification, trust=trust))
        return tid

    def event_turn(self, source: str, text: str, label: str, outcome: Outcome, *, gap: int,
                   anchor: str | None = None, wait_id: str | None = None,
                   wi: str | None = _FOCUS, key: str | None = None) -> str:
        tid = self.turn("external_event", label, outcome, anchor=anchor, gap=gap, wi=wi, key=key)
        self.event(source, text, wait_id=wait_id)
        return tid

    def long_wait(self, wakes: str, *, anchor: str) -> None:
        """Low-value wakes while task ``anchor``'s e2e run goes on, one letter each: T scheduler
        tick, H the e2e heartbeat timer, R a runtime restart and recovery, ``<n>`` / ``<n>f`` a
        burst of n provider retries (``f``: ending in a fallback) on the tick before it."""
        specs = 0
        start = self.now
        last_tick = ""
        for wake in wakes.split():
            if wake == "T":
                last_tick = self.tick(self.rng.randint(110, 190))
            elif wake == "H":
                specs = min(specs + self.rng.randint(36, 46), 384)
                self.turn("timer", "timer: e2e heartbeat (every 10m)", Outcome.NOOP, anchor=anchor,
                          gap=self.rng.randint(40, 90))
                mins = int((self.now - start).total_seconds() // 60)
                self.tool("task_status", "task-e2e-staging-1",
                          f"running: {specs}/388 specs done, 0 failed, 0 retried, elapsed {mins}m",
                          exit_code=None, secs=1)
            elif wake == "R":
                self.turn("restart", "runtime restart: host maintenance (holon-runner-2 drained)",
                          Outcome.NOOP, wi=None, gap=self.rng.randint(60, 120))
                self.system("runtime restarted on holon-runner-3; restored 1 open wait "
                            "(w-e2e-staging) and 1 running task (task-e2e-staging-1, still "
                            "running on the e2e pool)")
                self.turn("recovery", "recovery: reattached to task-e2e-staging-1; no state change",
                          Outcome.NOOP, anchor=anchor, gap=6)
            else:
                self.provider_trouble(last_tick, int(wake.rstrip("f")), fallback=wake.endswith("f"))

    # -- owned records ------------------------------------------------------------------------
    def environment(self, env_id: str, workspace: str, capabilities: list[str], guidance: str,
                    secs: int | None = None) -> str:
        return self.add(Environment(id=env_id, workspace=workspace, capabilities=capabilities,
                                    guidance=guidance), secs)

    def event(self, source: str, text: str, wait_id: str | None = None) -> str:
        return self.add(ExternalEvent(id=self.next_id("e"), turn_id=self.turn_id, source=source,
                                      text=text, wait_id=wait_id, work_item_id=self.turn_wi))

    def op(self, text: str) -> str:
        return self.add(Message(id=self.next_id("m"), turn_id=self.turn_id,
                                role=MessageRole.OPERATOR, text=text))

    def say(self, text: str, secs: int | None = None) -> str:
        return self.add(Message(id=self.next_id("m"), turn_id=self.turn_id,
                                role=MessageRole.ASSISTANT, text=text), secs)

    def system(self, text: str) -> str:
        return self.add(Message(id=self.next_id("m"), turn_id=self.turn_id,
                                role=MessageRole.SYSTEM, text=text))

    def brief(self, kind: BriefKind, text: str) -> str:
        return self.add(Brief(id=self.next_id("b"), turn_id=self.turn_id, kind=kind, text=text,
                              work_item_id=self.turn_wi))

    def tool(self, tool_name: str, args: str, output: str, *, exit_code: int | None = 0,
             status: ToolStatus | None = None, secs: int = 3, files: tuple[str, ...] = (),
             effect: SideEffect | None = None, output_ref: str | None = None) -> str:
        if status is None:
            status = ToolStatus.OK if exit_code in (0, None) else ToolStatus.ERROR
        return self.add(Tool(id=self.next_id("x"), turn_id=self.turn_id, tool_name=tool_name,
                             args_digest=_digest(tool_name, args), args_preview=args,
                             status=status, exit_code=exit_code, output=output,
                             output_ref=output_ref, side_effect=effect,
                             files_written=list(files)), secs)

    def sh(self, command: str, output: str, *, exit_code: int | None = 0, secs: int = 3,
           status: ToolStatus | None = None, effect: SideEffect | None = None,
           output_ref: str | None = None, files: tuple[str, ...] = ()) -> str:
        return self.tool("shell", command, output, exit_code=exit_code, secs=secs, status=status,
                         effect=effect, output_ref=output_ref, files=files)

    def pytest_log(self, command: str, *, output_ref: str) -> str:
        """The whole suite's ``pytest -v`` run with its one failure (an output over 20,000
        characters); later texts may fill in the counts of the rerun once the failure is fixed:
        ``{suite_passed}``, ``{suite_skipped}``, ``{suite_xfailed}``, ``{suite_secs}``."""
        log, counts, elapsed = _pytest_log(self.rng)
        self.values.update(suite_passed=str(counts["PASSED"] + 1),
                           suite_skipped=str(counts["SKIPPED"]),
                           suite_xfailed=str(counts["XFAIL"]),
                           # the rerun skips the failure's traceback and the -v output
                           suite_secs=f"{elapsed * 0.97:.2f}")
        return self.sh(command, log, exit_code=1, secs=int(elapsed) + 2, output_ref=output_ref)

    def edit(self, path: str, diff: str, *, what: str) -> str:
        return self.tool("edit_file", f"{path}: {what}", diff, exit_code=None, secs=6,
                         files=(path,))

    def spawn(self, task_id: str, command: str, note: str) -> str:
        self.tool("spawn_task", f"{task_id}: {command}", f"started {task_id} ({note})",
                  exit_code=None, secs=2)
        return task_id

    def work(self, wi: str, *, objective: str | None = None, plan: list[str] | None = None,
             todos: list[str] | None = None, done: tuple[str, ...] = (),
             status: WorkItemStatus | None = None, blocker: str | None = None,
             waits: list[str] | None = None, completion_report: str | None = None) -> str:
        """A work-item transition. ``todos`` replaces the list; ``done`` ticks items by prefix."""
        new_todos: list[Todo] | None = None
        if todos is not None:
            self.todos[wi] = [Todo(text=t) for t in todos]
            new_todos = self.todos[wi]
        if done:
            current = self.todos[wi]
            ticked = [Todo(text=t.text, done=t.done or t.text.startswith(done)) for t in current]
            assert ticked != current, f"no open todo of {wi} starts with {done}"
            self.todos[wi] = new_todos = ticked
        return self.add(WorkItem(id=self.next_id("wu"), work_item_id=wi, turn_id=self.turn_id,
                                 objective=objective, plan=plan, todos=new_todos, status=status,
                                 waits=waits, blocker=blocker,
                                 completion_report=completion_report))

    def open_wait(self, wait_id: str, condition: str) -> str:
        self.open_waits.append(wait_id)
        return self.add(Wait(id=self.next_id("wt"), wait_id=wait_id, status=WaitStatus.OPEN,
                             turn_id=self.turn_id, work_item_id=self.turn_wi,
                             condition=condition))

    def resolve_wait(self, wait_id: str, by: str, wi: str | None = None) -> str:
        """Resolve ``wait_id`` by the record ``by`` (``"@last"``: the record just written)."""
        self.open_waits.remove(wait_id)
        return self.add(Wait(id=self.next_id("wt"), wait_id=wait_id, status=WaitStatus.RESOLVED,
                             turn_id=self.turn_id, work_item_id=wi or self.turn_wi,
                             resolved_by=by))

    def pin(self, target: str, note: str) -> str:
        return self.add(Pin(id=self.next_id("p", 2), turn_id=self.turn_id, target=target,
                            note=note))


#: The methods a story step may name.
_ACTIONS: Final = frozenset({
    "advance", "brief", "clock", "edit", "environment", "event", "event_turn", "idle",
    "long_wait", "mark", "op", "open_wait", "pin", "provider_trouble", "pytest_log",
    "resolve_wait", "say", "sh", "spawn", "switch", "system", "task_turn", "tick", "tool", "turn",
    "work",
})


# ---------------------------------------------------------------------------------------------
# The long pytest log (tool output over 20,000 characters)
# ---------------------------------------------------------------------------------------------
def _pytest_log(rng: random.Random) -> tuple[str, dict[str, int], float]:
    """A ``pytest -v`` log of texts.toml's suite with its one failure: (text, outcome counts,
    seconds). In the suite a test id's ``:S`` means skipped, ``:X`` xfail, ``:F`` failed."""
    pytest = _TEXTS["pytest"]
    words = {"": "PASSED", "S": "SKIPPED", "X": "XFAIL", "F": "FAILED"}
    items: list[tuple[str, str]] = []
    for module, names in pytest["suite"].items():
        for spec in names.split():
            name, _, mark = spec.partition(":")
            if mark not in words:  # a ':' inside a parametrised id, not an outcome mark
                name, mark = spec, ""
            items.append((f"{module}::{name}", words[mark]))
    total = len(items)
    lines = [*pytest["header"].splitlines(), f"collected {total} items", ""]
    counts: dict[str, int] = {}
    for i, (nodeid, word) in enumerate(items, 1):
        counts[word] = counts.get(word, 0) + 1
        head = f"{nodeid} {word}"
        lines.append(f"{head:<73} [{100 * i // total:3d}%]")
    # Most tests take milliseconds; a few (fakeredis windows, checkout flows) take seconds.
    timings = sorted(((rng.lognormvariate(-3.6, 1.4), nodeid) for nodeid, _ in items),
                     reverse=True)
    durations = timings[:10]
    elapsed = sum(secs for secs, _ in timings) + rng.uniform(4.0, 6.0)  # plus collection, fixtures
    lines += ["", pytest["failure"], pytest["warnings"],
              "============================= slowest 10 durations ============================="]
    lines += [f"{secs:.2f}s call     {nodeid}" for secs, nodeid in durations]
    lines += [
        "=========================== short test summary info ============================",
        pytest["short_summary"],
        f"====== 1 failed, {counts['PASSED']} passed, {counts['SKIPPED']} skipped, "
        f"{counts['XFAIL']} xfailed, 2 warnings in {elapsed:.2f}s ======",
    ]
    return "\n".join(lines) + "\n", counts, elapsed


# ---------------------------------------------------------------------------------------------
# Reading the story
# ---------------------------------------------------------------------------------------------
def _choices(hint: Any) -> tuple[Any, ...]:
    """The types a parameter's annotation allows (the members of a union)."""
    if get_origin(hint) in (Union, types.UnionType):
        return get_args(hint)
    return (hint,)


def _value(day: _Day, raw: Any, hint: Any, fill: bool) -> Any:
    """A step's TOML value as the argument the method's annotation asks for."""
    allowed = _choices(hint)
    if raw is False and bool not in allowed:
        return None
    if isinstance(raw, list):
        if int in allowed and len(raw) == 2 and all(isinstance(n, int) for n in raw):
            return day.rng.randint(raw[0], raw[1])
        items = [_value(day, item, str, fill) for item in raw]
        return tuple(items) if any(get_origin(t) is tuple for t in allowed) else items
    if not isinstance(raw, str):
        return raw
    text = _text(day, raw)
    if fill:
        text = text.format_map(day.fill_values())
    enum = next((t for t in allowed if isinstance(t, type) and issubclass(t, Enum)), None)
    return text if enum is None else enum(text)


def _text(day: _Day, raw: str) -> str:
    """``@last`` (the last record's ref), ``@name`` (a landmark turn or a shared text), or the
    text itself (``@@`` for a text starting with ``@``)."""
    if not raw.startswith("@") or raw.startswith("@@"):
        return raw.removeprefix("@")
    name = raw[1:]
    if name == "last":
        return day.last_ref()
    if name in day.keys:
        return day.keys[name]
    return str(_TEXTS["text"][name])


def _step(day: _Day, step: dict[str, Any]) -> None:
    step = dict(step)
    ref = step.pop("ref", None)
    fill = bool(step.pop("fill", False))
    action = next(iter(step))
    if action not in _ACTIONS:
        raise ValueError(f"unknown story action {action!r} in {step}")
    method: Callable[..., object] = getattr(day, action)
    hints = get_type_hints(method)
    first = next(iter(inspect.signature(method).parameters))
    args = {(first if name == action else name): value for name, value in step.items()}
    method(**{name: _value(day, value, hints[name], fill) for name, value in args.items()})
    if ref is not None:
        day.refs[ref] = day.last_ref()


def _build() -> _Day:
    day = _Day()
    for scene in sorted(STORY_DIR.glob("[0-9][0-9]-*.toml")):
        for step in tomllib.loads(scene.read_text(encoding="utf-8"))["step"]:
            _step(day, step)
    return day


_DAY: Final = _build()
#: Landmark turns of the story (its ``key``s; tools/demo_story/README.md); the tests check each.
KEY_TURNS: Final[dict[str, str]] = dict(_DAY.keys)
#: Landmark records other than turns (its ``ref``s).
KEY_REFS: Final[dict[str, str]] = dict(_DAY.refs)


def build_demo_records() -> list[Record]:
    """The demo day as ledger records, in ledger order; the same list on every call."""
    return _build().records


def demo_jsonl_bytes() -> bytes:
    """The canonical JSONL v1 text of :func:`build_demo_records` (what the bundled file holds)."""
    out = io.BytesIO()
    write_jsonl(build_demo_records(), out)
    return out.getvalue()


def bundled_demo_path() -> Path:
    """The checkout's ``holon_ctx/data/demo.jsonl``, the file the package ships."""
    return Path(__file__).resolve().parents[1] / "holon_ctx" / "data" / "demo.jsonl"


if __name__ == "__main__":  # pragma: no cover - maintenance entry: regenerate the bundled file
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else bundled_demo_path()
    target.write_bytes(demo_jsonl_bytes())
    print(f"wrote {target}")
