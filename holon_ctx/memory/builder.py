"""The deterministic episode builder: a closed range of turns in, an Episode out. No model.

Theory of operation. The range's records are walked once, in append order, and each record kind
contributes claims to fixed fields (:data:`FIELD_OF` documents the mapping):

* operator messages → ``operator_intents`` verbatim (within :class:`FieldBudget`), and also
  ``decisions`` when they state one (:data:`DECISION_MARKERS`) or answer the assistant's question
  (the operator's first words after the assistant asked, a short reply (:data:`SHORT_REPLY`) or
  any other that does not ask back);
* work-item and wait transitions, pins, approval and override turns → ``decisions`` (runtime
  facts and the operator's words);
* briefs, task results, completions, external events → ``results``;
* tool runs, written files, environment changes → ``artifact_trail``;
* assistant messages → ``model_inferences`` (model output is never presented as fact);
* whatever is still open when the range ends → ``unresolved`` (see :mod:`.unresolved`): pending
  tool calls, unknown or partial side effects, open waits and approvals, open todos, blockers.
  Items opened and resolved inside the range are not carried.

The same records always give the same bytes: nothing here reads a clock, a counter or a model.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Final

import attrs

from holon_ctx.ledger.answers import closed_before
from holon_ctx.ledger.questions import ends_with_question
from holon_ctx.ledger.records import (
    Brief,
    Environment,
    ExternalEvent,
    Message,
    MessageRole,
    Outcome,
    Pin,
    Record,
    SideEffect,
    TaskResult,
    Todo,
    Tool,
    Trigger,
    Turn,
    Wait,
    WaitStatus,
    WorkItem,
    WorkItemStatus,
)
from holon_ctx.ledger.store import LedgerStore, StoredRecord
from holon_ctx.ledger.units import TurnUnit
from holon_ctx.memory.episodes import Claim, Episode, Field, Span, episode_id, source_digest
from holon_ctx.memory.unresolved import (
    OpenKind,
    call_key,
    call_label,
    is_approval,
    resolves,
    todo_key,
)
from holon_ctx.projection.base.formats import code_span, label_value, one_line, speech

__all__ = ["DECISION_MARKERS", "FIELD_OF", "SHORT_REPLY", "FieldBudget", "build_episode",
           "link_keys", "source_records"]

#: Which field each record kind feeds (documentation of the walk in :func:`build_episode`).
FIELD_OF: Final[dict[str, tuple[Field, ...]]] = {
    "message(operator)": (Field.OPERATOR_INTENTS, Field.DECISIONS),
    "message(assistant)": (Field.MODEL_INFERENCES,),
    "message(system)": (Field.RESULTS,),
    "turn(operator_override, approval_decision)": (Field.DECISIONS,),
    "work_item": (Field.DECISIONS, Field.RESULTS, Field.UNRESOLVED),
    "wait": (Field.DECISIONS, Field.RESULTS, Field.UNRESOLVED),
    "pin": (Field.DECISIONS,),
    "brief": (Field.RESULTS,),
    "task_result": (Field.RESULTS,),
    "external_event": (Field.RESULTS,),
    "tool": (Field.ARTIFACT_TRAIL, Field.UNRESOLVED),
    "environment": (Field.ARTIFACT_TRAIL,),
}

#: Operator words that state a decision (English, Chinese, Japanese); questions never do.
DECISION_MARKERS: Final = re.compile(
    r"\b(decid\w*|decision|let'?s (go with|use|do)|we('ll| will| should) (use|go with|keep|drop)"
    r"|go with|agreed?|approved?|chose|picked|settled? on|final answer|must not|never)\b"
    r"|决定|決定|就用|采用|採用|选定|选择|選択|同意|批准|定了|确定|确认|承認|にします|にしましょう",
    re.IGNORECASE)
#: A short operator reply that accepts what the assistant just asked ("可以", "the second one").
SHORT_REPLY: Final = re.compile(
    r"^\s*(yes|yep|ok(ay)?|sure|go ahead|do it|sounds good|agreed|approved?|no|nope"
    r"|the (first|second|third|last) one|option \w+|可以|好的?|行|需要|不需要|是的?|对|同意|不用"
    r"|はい|いいえ|お願いします|それで)\s*[.!。！]?\s*$", re.IGNORECASE)


@attrs.frozen
class FieldBudget:
    """How much verbatim text an episode keeps (characters; the episode is pure, no counter)."""

    #: One operator intent kept verbatim up to this many characters.
    intent_chars: int = 1500
    #: All operator intents of a range together; later ones keep a one-line preview only.
    intents_total_chars: int = 6000
    #: A quoted brief, task summary, event, assistant message or failed tool output.
    quote_chars: int = 400
    #: The output of a tool run that succeeded (its result, briefly).
    tool_output_chars: int = 160
    #: Claims per field; the rest fold into one claim that lists their refs.
    max_claims: int = 48


def _bounded(text: str, limit: int, *, tail: bool = False) -> tuple[str, bool]:
    """``text`` within ``limit`` characters, and whether it was cut: its head, or with ``tail``
    its first third and last two thirds (a tool's output ends with what it came to: the error,
    the timeout, the count of tests passed; its head is mostly the command's preamble)."""
    text = text.strip("\n")
    if len(text) <= limit:
        return text, False
    if not tail:
        return text[:limit].rstrip() + " …", True
    # The head ends at ``cut``, the tail starts at ``resume``: on line boundaries where that
    # keeps a third of each part at least (a line cut in two reads as two half facts; a long
    # line is cut rather than dropped).
    cut = limit // 3
    resume = len(text) - (limit - cut)
    if text[cut] != "\n" and (nl := text.rfind("\n", 0, cut)) >= cut // 3:
        cut = nl
    if text[resume - 1] != "\n" and 0 <= (nl := text.find("\n", resume)) - resume < (
            len(text) - resume) * 2 // 3:
        resume = nl + 1
    whole_first, whole_last = text[cut] == "\n", text[resume - 1] == "\n"
    first = text[:cut].rstrip()
    # A whole line keeps its indent (code reads by it); white space at a cut inside one goes.
    last = text[resume:].lstrip("\n") if whole_last else text[resume:].lstrip()
    # The '…' stands where the text was cut: a line of its own between whole lines, on the line
    # of a part cut inside a line (a half line that ended bare would read as a whole one), once
    # between the two parts of one line.
    if "\n" not in text[cut:resume]:
        kept = f"{first} … {last}"
    elif whole_first and whole_last:
        kept = f"{first}\n…\n{last}"
    else:
        kept = (first if whole_first else f"{first} …") + "\n" + (
            last if whole_last else f"… {last}")
    # A head with nothing in it leaves no blank before the '…'.
    return (kept.rstrip() if first.strip() else kept.strip()), True


def _claim(kind: str, text: str, refs: list[str], stored: StoredRecord | None = None, *,
           quote: str | None = None, limit: int = 0, key: str = "",
           tail: bool = False) -> Claim:
    """A claim; with ``stored`` it carries that record's provenance, with ``quote`` its words."""
    origin = trust = ""
    if stored is not None:
        rec = stored.record
        origin = rec.origin.value if rec.origin else ""
        trust = rec.trust.value if rec.trust else ""
    elif kind in _RUNTIME_KINDS:
        origin, trust = "runtime", "runtime_fact"
    if quote is None:
        return Claim(kind=kind, text=text, refs=refs, origin=origin, trust=trust, key=key)
    kept, cut = _bounded(quote, limit, tail=tail)
    return Claim(kind=kind, text=text, refs=refs, quote=kept, truncated=cut, origin=origin,
                 trust=trust, key=key)


_RUNTIME_KINDS = frozenset({"file_written", OpenKind.TODO_OPEN.value,
                            OpenKind.WORK_ITEM_BLOCKED.value})


def source_records(units: Sequence[TurnUnit]) -> list[StoredRecord]:
    """The records an episode covers, turns included, in append order."""
    out = [s for unit in units for s in (unit.stored, *unit.records)]
    out.sort(key=lambda s: s.pos)
    return out


class _Walk:
    """One pass over a range's records, filling the claim fields."""

    def __init__(self, budget: FieldBudget, waits: LedgerStore | None = None) -> None:
        self.budget = budget
        self.fields: dict[Field, list[Claim]] = {f: [] for f in Field}
        self.open: dict[str, Claim] = {}
        self.intent_chars = 0
        self.turn: Turn | None = None
        self.last_question: StoredRecord | None = None
        self.todos: dict[str, tuple[str, list[Todo]]] = {}
        self.wi_status: dict[str, WorkItemStatus] = {}
        self.blockers: dict[str, tuple[str, str]] = {}
        self.files: dict[str, list[str]] = {}
        self.tool_groups: dict[tuple[str, str, str, str], list[StoredRecord]] = {}
        #: The ledger, asked how a wait a record names stood before it (the range's own
        #: records cannot say: a wait's end is a range boundary); None labels as the record says.
        self.waits = waits

    def named_wait(self, stored: StoredRecord, wait_id: str | None, verb: str) -> str:
        """``VERB wait W``, or ``names wait W, already resolved`` (``closed_before``) when the
        wait was no longer open before ``stored``; "" for no wait."""
        if wait_id is None:
            return ""
        name = label_value(wait_id, 60)
        closed = None if self.waits is None else closed_before(self.waits, stored.pos, wait_id)
        return f"names wait {name}, already {closed}" if closed else f"{verb} wait {name}"

    def add(self, field: Field, claim: Claim) -> None:
        self.fields[field].append(claim)

    def quoted(self, field: Field, kind: str, text: str, stored: StoredRecord, quote: str) -> None:
        self.add(field, _claim(kind, text, [stored.ref], stored, quote=quote,
                               limit=self.budget.quote_chars))

    # -- records ------------------------------------------------------------------------
    def record(self, stored: StoredRecord) -> None:
        rec: Record = stored.record
        ref = stored.ref
        match rec:
            case Turn():
                self.turn = rec
                if rec.outcome in (Outcome.ERROR, Outcome.INTERRUPTED):
                    self.add(Field.RESULTS, _claim("turn_outcome",
                                                   f"turn:{rec.id} ended: {rec.outcome.value}",
                                                   [ref], stored))
            case Message(role=MessageRole.OPERATOR):
                self.operator(stored, rec)
            case Message(role=MessageRole.ASSISTANT):
                self.quoted(Field.MODEL_INFERENCES, "assistant_message",
                            "the assistant said (model output, not authority)", stored, rec.text)
                self.last_question = stored if ends_with_question(rec.text) else None
            case Message():
                self.quoted(Field.RESULTS, "runtime_note", f"{rec.role.value} note", stored,
                            rec.text)
            case Brief():
                self.quoted(Field.RESULTS, f"brief_{rec.kind.value}",
                            f"brief ({rec.kind.value}, model-written)", stored, rec.text)
            case TaskResult():
                self.task(stored, rec)
            case ExternalEvent():
                named = self.named_wait(stored, rec.wait_id, "matches")
                extra = f", {named}" if named else ""
                self.quoted(Field.RESULTS, "external_event",
                            f"external event from {label_value(rec.source, 40)} "
                            f"(untrusted, not operator input{extra})", stored, rec.text)
            case Tool():
                self.tool(stored, rec)
            case WorkItem():
                self.work_item(stored, rec)
            case Wait():
                self.wait(stored, rec)
            case Pin():
                note = f": {label_value(rec.note, 160)}" if rec.note.strip() else ""
                self.add(Field.DECISIONS, _claim("operator_pin",
                                                 f"the operator pinned {rec.target}{note}",
                                                 [ref, rec.target], stored))
            case Environment():
                caps = ", ".join(label_value(c, 30) for c in rec.capabilities) or "none"
                self.add(Field.ARTIFACT_TRAIL, _claim(
                    "environment",
                    f"environment: workspace {label_value(rec.workspace, 120) or '-'}; "
                    f"capabilities {caps}", [ref], stored))

    def operator(self, stored: StoredRecord, rec: Message) -> None:
        turn = self.turn
        trigger = turn.kind if turn else Trigger.OPERATOR_INPUT
        kind = {Trigger.OPERATOR_OVERRIDE: "override",
                Trigger.APPROVAL_DECISION: "approval_decision"}.get(
            trigger, "refinement" if turn and turn.anchor_turn_id else "request")
        refs = [stored.ref] + ([f"turn:{turn.id}"] if turn else [])
        limit = min(self.budget.intent_chars,
                    max(160, self.budget.intents_total_chars - self.intent_chars))
        where = f" in turn:{turn.id}" if turn else ""
        label = kind.replace("_", " ")
        intent = _claim(kind, f"operator {label}{where}", refs, stored, quote=rec.text,
                        limit=limit)
        self.intent_chars += len(intent.quote)
        self.add(Field.OPERATOR_INTENTS, intent)
        preview = speech(rec.text, 200)
        if kind in ("override", "approval_decision"):
            self.add(Field.DECISIONS, _claim(f"operator_{kind}", f"operator {label}: {preview}",
                                             refs, stored))
        elif self.last_question is not None and (SHORT_REPLY.match(rec.text)
                                                 or not ends_with_question(rec.text)):
            # The operator's first words after the assistant asked settle the question, however
            # long and however worded (runtime facts: who spoke, in what order), unless they ask
            # back (issue 25, item 3).
            asked = self.last_question.ref
            self.add(Field.DECISIONS, _claim(
                "operator_reply", f"operator answered the question in {asked}: {preview}",
                [*refs, asked], stored))
        elif DECISION_MARKERS.search(rec.text) and not ends_with_question(rec.text):
            self.add(Field.DECISIONS, _claim("operator_decision", f"operator decided: {preview}",
                                             refs, stored))
        self.last_question = None

    def task(self, stored: StoredRecord, rec: TaskResult) -> None:
        facts = [f"task {label_value(rec.task_id, 60)} {rec.status.value}"]
        if rec.verification:
            facts.append("verification")
        if rec.spawned_by_turn_id:
            facts.append(f"spawned by turn:{rec.spawned_by_turn_id}")
        if named := self.named_wait(stored, rec.wait_id, "answers"):
            facts.append(named)
        if rec.output_ref:
            facts.append(f"output {label_value(rec.output_ref, 80)}")
        self.quoted(Field.RESULTS, "verification" if rec.verification else "task_outcome",
                    "; ".join(facts), stored, rec.summary)

    def tool(self, stored: StoredRecord, rec: Tool) -> None:
        key = call_key(rec, stored.ref)
        for resolved in resolves(rec, stored.ref):
            self.open.pop(resolved, None)
        preview = f"{label_value(rec.tool_name, 40)} {code_span(rec.args_preview, 100)}"
        call = label_value(call_label(rec, stored.ref), 80)
        if rec.pending:
            self.open[f"call:{key}"] = _claim(
                OpenKind.TOOL_CALL_PENDING.value, f"tool call pending: {preview} (call {call})",
                [stored.ref], stored, key=f"call:{key}")
        if rec.side_effect_unresolved and rec.side_effect is not None:
            kind = (OpenKind.SIDE_EFFECT_UNKNOWN if rec.side_effect is SideEffect.UNKNOWN
                    else OpenKind.SIDE_EFFECT_PARTIAL)
            self.open[f"effect:{key}"] = _claim(
                kind.value, f"side effect {rec.side_effect.value}: {preview} (call {call})",
                [stored.ref], stored, key=f"effect:{key}")
        for path in rec.files_written:
            self.files.setdefault(path, []).append(stored.ref)
        group = (self.turn.id if self.turn else "", *rec.run_key, rec.status.value)
        self.tool_groups.setdefault(group, []).append(stored)

    def tool_claims(self) -> None:
        for runs in self.tool_groups.values():
            stored = runs[-1]
            rec = stored.record
            assert isinstance(rec, Tool)
            exit_part = f" exit {rec.exit_code}" if rec.exit_code is not None else ""
            side = (f"; side effect {rec.side_effect.value}"
                    if rec.side_effect and rec.side_effect is not SideEffect.NONE else "")
            files = (f"; wrote {', '.join(label_value(f, 80) for f in rec.files_written[:6])}"
                     if rec.files_written else "")
            repeat = f"; ×{len(runs)} identical calls" if len(runs) > 1 else ""
            failed = rec.failed
            text = (f"{label_value(rec.tool_name, 40)} {code_span(rec.args_preview, 100)} → "
                    f"{rec.status.value}{exit_part}{side}{files}{repeat}")
            refs = [r.ref for r in reversed(runs)]
            quote = rec.output if rec.output.strip() else None
            limit = self.budget.quote_chars if failed else self.budget.tool_output_chars
            self.add(Field.ARTIFACT_TRAIL, _claim("tool_failed" if failed else "tool_run", text,
                                                  refs, stored, quote=quote, limit=limit,
                                                  tail=True))
        for path, refs in self.files.items():
            self.add(Field.ARTIFACT_TRAIL, _claim("file_written",
                                                  f"file written: {label_value(path, 200)}",
                                                  list(dict.fromkeys(refs))))

    def work_item(self, stored: StoredRecord, rec: WorkItem) -> None:
        wid = rec.work_item_id
        ref = stored.ref
        name = label_value(wid, 60)
        if rec.objective is not None:
            self.add(Field.DECISIONS, _claim(
                "objective", f"work item {name} objective: {label_value(rec.objective, 300)}",
                [ref], stored))
        if rec.plan is not None:
            steps = "; ".join(f"{i}. {label_value(p, 120)}" for i, p in enumerate(rec.plan, 1))
            self.add(Field.DECISIONS, _claim(
                "plan", f"work item {name} plan: {one_line(steps, 600) or 'cleared'}", [ref],
                stored))
        if rec.todos is not None:
            self.todos[wid] = (ref, list(rec.todos))
        if rec.blocker is not None:
            if rec.blocker:
                self.blockers[wid] = (ref, rec.blocker)
            else:
                self.blockers.pop(wid, None)
        if rec.status is not None:
            self.wi_status[wid] = rec.status
            if rec.status.closed:
                self.add(Field.RESULTS, _claim("completion", f"work item {name} {rec.status.value}",
                                               [ref], stored))
            else:
                self.add(Field.DECISIONS, _claim(
                    "work_item_status", f"work item {name} status {rec.status.value}", [ref],
                    stored))
        if rec.completion_report:
            self.quoted(Field.RESULTS, "completion_report", f"work item {name} completion report",
                        stored, rec.completion_report)

    def wait(self, stored: StoredRecord, rec: Wait) -> None:
        key = f"wait_id:{rec.wait_id}"
        name = label_value(rec.wait_id, 60)
        if rec.status is WaitStatus.OPEN:
            approval = is_approval(rec.wait_id, rec.condition)
            kind = OpenKind.APPROVAL_PENDING if approval else OpenKind.WAIT_OPEN
            label = "approval pending" if approval else "waiting"
            self.open[key] = _claim(kind.value,
                                    f"{label}: wait {name}: {label_value(rec.condition, 200)}",
                                    [stored.ref], stored, key=key)
            return
        self.open.pop(key, None)
        by = f" by {rec.resolved_by}" if rec.resolved_by else ""
        refs = [stored.ref, *([rec.resolved_by] if rec.resolved_by else [])]
        field = Field.RESULTS if rec.status is WaitStatus.RESOLVED else Field.DECISIONS
        self.add(field, _claim(f"wait_{rec.status.value}", f"wait {name} {rec.status.value}{by}",
                               refs, stored))

    def close(self) -> None:
        """End of range: carry what is still open into ``unresolved``."""
        self.tool_claims()
        for wid, (ref, todos) in self.todos.items():
            if _closed(self.wi_status.get(wid)):
                continue
            for todo in todos:
                if not todo.done:
                    key = todo_key(wid, todo.text)
                    self.open.setdefault(key, _claim(
                        OpenKind.TODO_OPEN.value,
                        f"open todo of work item {label_value(wid, 60)}: {label_value(todo.text, 200)}",
                        [ref], key=key))
        for wid, (ref, blocker) in self.blockers.items():
            if _closed(self.wi_status.get(wid)):
                continue
            key = f"blocked:{wid}"
            self.open[key] = _claim(
                OpenKind.WORK_ITEM_BLOCKED.value,
                f"work item {label_value(wid, 60)} blocked: {label_value(blocker, 200)}", [ref], key=key)
        self.fields[Field.UNRESOLVED] = list(self.open.values())

    def bounded(self, field: Field) -> list[Claim]:
        """At most ``max_claims`` claims; the overflow folds into one claim naming its refs.

        Operator intents and unresolved items are never folded: each keeps its own claim.
        """
        claims = self.fields[field]
        limit = self.budget.max_claims
        if field in (Field.OPERATOR_INTENTS, Field.UNRESOLVED) or len(claims) <= limit:
            return claims
        kept, rest = claims[: limit - 1], claims[limit - 1 :]
        refs = list(dict.fromkeys(r for c in rest for r in c.refs))
        kinds = sorted({c.kind for c in rest})
        return [*kept, Claim(kind="folded", text=f"… and {len(rest)} more ({', '.join(kinds)})",
                             refs=refs)]


def _closed(status: WorkItemStatus | None) -> bool:
    return status is not None and status.closed


def build_episode(units: Sequence[TurnUnit], *, closed_by: str,
                  budget: FieldBudget | None = None, waits: LedgerStore | None = None) -> Episode:
    """The episode of a closed range of turns (oldest first, records as the range settled);
    ``waits``, the ledger they come from, tells a record answering a wait that was no longer
    open (a late or repeated answer) from the one that matched it."""
    if not units:
        raise ValueError("an episode covers at least one turn")
    records = source_records(units)
    walk = _Walk(budget or FieldBudget(), waits)
    for stored in records:
        walk.record(stored)
    walk.close()
    first, last = units[0].turn, units[-1].turn
    owner = next((f"work_item:{u.turn.work_item_id}" for u in units if u.turn.work_item_id),
                 "conversation")
    return Episode(
        id=episode_id(first.seq, last.seq),
        span=Span(first_turn=f"turn:{first.id}", last_turn=f"turn:{last.id}",
                  first_seq=first.seq, last_seq=last.seq),
        turn_ids=[u.turn.id for u in units],
        source_refs=[s.ref for s in records],
        digest=source_digest(s.record for s in records),
        owner=owner,
        closed_by=closed_by,
        operator_intents=walk.bounded(Field.OPERATOR_INTENTS),
        decisions=walk.bounded(Field.DECISIONS),
        results=walk.bounded(Field.RESULTS),
        artifact_trail=walk.bounded(Field.ARTIFACT_TRAIL),
        unresolved=walk.bounded(Field.UNRESOLVED),
        model_inferences=walk.bounded(Field.MODEL_INFERENCES),
        links=sorted(link_keys(s.record for s in records)),
    )


def link_keys(records: Iterable[Record]) -> set[str]:
    """Keys a later turn can share with these records (files, waits, tasks, provider calls)."""
    keys: set[str] = set()
    for rec in records:
        match rec:
            case Tool():
                keys.update(f"file:{path}" for path in rec.files_written)
                if rec.call_id:
                    keys.add(f"call:{rec.call_id}")
            case TaskResult():
                keys.add(f"task:{rec.task_id}")
                if rec.wait_id:
                    keys.add(f"wait_id:{rec.wait_id}")
            case Wait():
                keys.add(f"wait_id:{rec.wait_id}")
            case ExternalEvent() if rec.wait_id:
                keys.add(f"wait_id:{rec.wait_id}")
            case _:
                pass
    return keys
