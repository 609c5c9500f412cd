"""Rendering: each item's forms as blocks of text with exact token costs.

Every block is additive (see :mod:`holon_ctx.tokens`): label lines never start blank and end with
``"\\n"``; bodies come from :func:`~holon_ctx.ledger.body.record_body` or are re-made block-safe.
So a form's cost is the sum of its blocks and the prompt's cost is the sum of its forms.

Trust is visible in the text itself. Operator words are labelled ``operator (trusted)`` and left
unfenced; runtime facts are plain label lines; everything written by tools, external parties,
tasks or models is fenced as ``<data ref=… origin=… trust=…>`` … ``</data>``, and
:func:`~holon_ctx.ledger.body.neutralise_fences` guarantees the text cannot close its fence.
Untrusted text never appears in a label line except sanitised single-line previews.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

from holon_ctx.ledger.body import block_safe, fence_open, neutralise_fences, record_body_counted
from holon_ctx.ledger.records import (
    Brief,
    Environment,
    ExternalEvent,
    Message,
    MessageRole,
    Pin,
    Record,
    TaskResult,
    Tool,
    ToolStatus,
    Trust,
    Wait,
    WorkItem,
)
from holon_ctx.ledger.state import WaitState, WorkItemState
from holon_ctx.ledger.store import StoredRecord
from holon_ctx.projection.model import Priority, TurnUnit
from holon_ctx.projection.planner import Block, Rendered
from holon_ctx.tokens import TokenCounter

__all__ = ["Renderer", "one_line"]

_T = TypeVar("_T")
#: Entries of a renderer's memo before it is dropped (a few thousand turns of forms).
_MEMO_ENTRIES = 16384
#: Per-record caps (tokens) for full and compact forms; longer bodies show head and tail.
FULL_CAP = {"operator": 2000, "tool": 500, "tool_failed": 700, "external": 600, "task": 600,
            "brief": 600, "assistant": 600, "system": 400}
COMPACT_CHARS = 240


def one_line(text: str, limit: int = 120) -> str:
    """A sanitised single-line preview: no newlines, no fence tags, bounded length."""
    flat = " ".join(neutralise_fences(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


class Renderer:
    def __init__(self, counter: TokenCounter, store_counter: str) -> None:
        self.counter = counter
        # Cached counts are exact only when the store counted with this very counter.
        self.trust_cached = counter.identity == store_counter
        # Memo of bodies and turn forms across projections of one projector: records never
        # change and refs are unique, so a turn costs its rendering once, not once per turn
        # projected (per-step cost stays flat as an agent's history grows). Keys carry every
        # input of the result; the memo is dropped whole when it grows past _MEMO_ENTRIES.
        self._memo: dict[tuple[object, ...], object] = {}

    def memo(self, key: tuple[object, ...], make: Callable[[], _T]) -> _T:
        """``make()``, remembered under ``key`` (which must name every input of the result)."""
        hit = self._memo.get(key)
        if hit is not None:
            return hit  # type: ignore[return-value]
        return self._remember(key, make())

    def _remember(self, key: tuple[object, ...], value: _T) -> _T:
        if len(self._memo) >= _MEMO_ENTRIES:
            self._memo.clear()
        self._memo[key] = value
        return value

    # -- primitives --------------------------------------------------------------------
    def line(self, text: str, refs: Iterable[str] = ()) -> Block:
        head = text if text.endswith("\n") else text + "\n"
        return Block(head=head, tokens=self.counter.count(head), refs=tuple(refs))

    def _body(self, stored: StoredRecord, cap: int) -> tuple[str, int]:
        """The record body, or a head-and-tail excerpt when it exceeds ``cap`` tokens."""
        hit = self._memo.get(("body", stored.ref, cap))
        if hit is not None:
            return hit  # type: ignore[return-value]
        return self._remember(("body", stored.ref, cap), self._body_uncached(stored, cap))

    def _body_uncached(self, stored: StoredRecord, cap: int) -> tuple[str, int]:
        body, stale = record_body_counted(stored.record)
        tokens = stored.tokens if self.trust_cached and not stale else self.counter.count(body)
        if tokens <= cap:
            return body, tokens
        # Cut by characters first so a 275 KB output never goes through the tokenizer here;
        # the excerpt is then counted exactly.
        chars = max(80, int(len(body) * cap / tokens * 0.95))
        head = body[: int(chars * 0.7)]
        tail = body[len(body) - int(chars * 0.3):]
        ref = getattr(stored.record, "output_ref", None) or stored.ref
        excerpt = block_safe(
            f"{head.rstrip()}\n… [{tokens - cap}+ tokens omitted; full text: {ref}] …\n"
            f"{tail.lstrip()}")
        return excerpt, self.counter.count(excerpt)

    def fenced(self, stored: StoredRecord, label: str, cap: int, *, clippable: bool = True) -> Block:
        rec = stored.record
        body, body_tokens = self._body(stored, cap)
        if not body:
            return self.line(f"{label} (empty)", [stored.ref])
        origin = rec.origin.value if rec.origin else "unknown"
        trust = rec.trust.value if rec.trust else "unknown"
        head = f"{label}\n{fence_open(stored.ref, origin, trust)}"
        tail = "</data>\n"
        return Block(head=head, body=body, tail=tail,
                     tokens=self.counter.count(head) + body_tokens + self.counter.count(tail),
                     refs=(stored.ref,), clippable=clippable)

    def trusted(self, stored: StoredRecord, label: str, cap: int) -> Block:
        body, body_tokens = self._body(stored, cap)
        head = label + "\n"
        return Block(head=head, body=body, tokens=self.counter.count(head) + body_tokens,
                     refs=(stored.ref,), clippable=True)

    @staticmethod
    def rendered(blocks: Iterable[Block]) -> Rendered:
        blocks = tuple(blocks)
        refs: list[str] = []
        for b in blocks:
            refs.extend(r for r in b.refs if r not in refs)
        return Rendered(blocks=blocks, tokens=sum(b.tokens for b in blocks), refs=tuple(refs))

    # -- records -------------------------------------------------------------------------
    def record_blocks(self, stored: StoredRecord, repeats: dict[str, list[str]]) -> list[Block]:
        rec: Record = stored.record
        ref = stored.ref
        match rec:
            case Message(role=MessageRole.OPERATOR):
                return [self.trusted(stored, f"operator (trusted) {ref}:", FULL_CAP["operator"])]
            case Message(role=MessageRole.SYSTEM) if rec.trust is Trust.RUNTIME_FACT:
                return [self.trusted(stored, f"runtime note {ref}:", FULL_CAP["system"])]
            case Message():
                return [self.fenced(stored, f"assistant said ({ref}, model output):",
                                    FULL_CAP["assistant"])]
            case Brief():
                return [self.fenced(stored, f"brief {ref} ({rec.kind.value}, model-written):",
                                    FULL_CAP["brief"])]
            case TaskResult():
                facts = [f"task {rec.task_id} {rec.status.value}"]
                if rec.verification:
                    facts.append("verification")
                if rec.spawned_by_turn_id:
                    facts.append(f"spawned by turn:{rec.spawned_by_turn_id}")
                if rec.wait_id:
                    facts.append(f"resolves wait {rec.wait_id}")
                if rec.output_ref:
                    facts.append(f"output {one_line(rec.output_ref, 80)}")
                label = f"{ref}: " + "; ".join(facts)
                if not rec.summary.strip():
                    return [self.line(label, [ref])]
                return [self.fenced(stored, label, FULL_CAP["task"])]
            case Tool():
                return self.tool_blocks(stored, rec, repeats.get(ref, []))
            case ExternalEvent():
                extra = f", matches wait {rec.wait_id}" if rec.wait_id else ""
                return [self.fenced(
                    stored, f"{ref} from {one_line(rec.source, 60)} (untrusted, not operator "
                    f"input{extra}):", FULL_CAP["external"])]
            case WorkItem():
                return [self.line(f"work item {rec.work_item_id} changed ({ref}): "
                                  + work_item_delta(rec), [ref])]
            case Wait():
                cond = f": {one_line(rec.condition, 100)}" if rec.condition else ""
                by = f" by {rec.resolved_by}" if rec.resolved_by else ""
                return [self.line(f"wait {rec.wait_id} {rec.status.value}{by}{cond} ({ref})", [ref])]
            case Pin():
                return [self.line(f"operator pinned {rec.target} ({ref})", [ref])]
            case Environment():
                return [self.line(f"environment updated ({ref})", [ref])]
            case _:
                return [self.line(f"{ref}", [ref])]

    def tool_blocks(self, stored: StoredRecord, rec: Tool, folded: list[str]) -> list[Block]:
        status = rec.status.value
        exit_part = f" exit {rec.exit_code}" if rec.exit_code is not None else ""
        side = f"; side effect {rec.side_effect.value}" if rec.side_effect and \
            rec.side_effect.value != "none" else ""
        # Only an unresolved side effect is an alert; a completed one is a plain fact.
        unresolved = bool(rec.side_effect and rec.side_effect.value in ("unknown", "partial"))
        repeat = f"; ×{len(folded) + 1} identical calls (earlier: {', '.join(folded)})" \
            if folded else ""
        files = f"; wrote {', '.join(one_line(f, 80) for f in rec.files_written[:6])}" \
            if rec.files_written else ""
        failed = rec.status in (ToolStatus.ERROR, ToolStatus.TIMEOUT) or (
            rec.exit_code not in (None, 0))
        alert = "ALERT " if failed or unresolved else ""
        preview = one_line(rec.args_preview, 100)
        label = (f"{alert}{stored.ref} {one_line(rec.tool_name, 40)} `{preview}` → {status}"
                 f"{exit_part}{side}{files}{repeat}")
        if not rec.output.strip():
            return [self.line(label, [stored.ref])]
        cap = FULL_CAP["tool_failed"] if failed else FULL_CAP["tool"]
        return [self.fenced(stored, label, cap)]

    # -- turns ---------------------------------------------------------------------------
    def turn_head(self, unit: TurnUnit, *, priority: Priority, reasons: tuple[str, ...],
                  other_work_item: bool, chain: str | None) -> str:
        t = unit.turn
        parts = [f"turn:{t.id}", t.trigger]
        if t.anchor_turn_id:
            parts.append(f"continues turn:{t.anchor_turn_id}")
        if t.work_item_id:
            parts.append(f"work item {t.work_item_id}")
        if t.outcome:
            parts.append(f"outcome {t.outcome.value}")
        if other_work_item:
            parts.append("other work item, not current-chain evidence")
        elif chain and chain != "current":
            parts.append(f"current chain ({chain})")
        parts.append(f"{priority.label}: {', '.join(reasons)}")
        return " · ".join(parts)

    def turn_full(self, unit: TurnUnit, head: str,
                  elsewhere: Mapping[str, str] | None = None) -> Rendered:
        """The turn with its records; a record in ``elsewhere`` is one line saying where it is."""
        key = ("full", unit.ref, head, tuple(r.ref for r in unit.records),
               tuple(sorted(elsewhere.items())) if elsewhere else ())
        hit = self._memo.get(key)
        if hit is not None:
            return hit  # type: ignore[return-value]
        return self._remember(key, self._turn_full(unit, head, elsewhere))

    def _turn_full(self, unit: TurnUnit, head: str,
                   elsewhere: Mapping[str, str] | None) -> Rendered:
        repeats = tool_repeats(unit.records)
        hidden = {r for refs in repeats.values() for r in refs}
        blocks = [self.line(f"### {head}", [unit.ref])]
        if unit.turn.label:
            blocks.append(self.line(f"trigger: {one_line(unit.turn.label, 160)}"))
        # The operator's words come first, then what happened: a clipped full form then always
        # keeps them (and so every ref its pinned compact form showed, which the planner needs
        # to accept the clip without losing a ref).
        ordered = sorted(unit.records, key=lambda r: not (
            isinstance(r.record, Message) and r.record.role is MessageRole.OPERATOR))
        for stored in ordered:
            if stored.ref in hidden:
                continue
            if elsewhere and stored.ref in elsewhere:
                blocks.append(self.line(f"{stored.ref}: {elsewhere[stored.ref]}"))
                continue
            blocks.extend(self.record_blocks(stored, repeats))
        return self.rendered(blocks)

    def turn_compact_verbatim(self, unit: TurnUnit, head: str) -> Rendered:
        """One line of facts, then each operator message in full (capped like FULL)."""
        blocks = [self.line(f"- {head} · {turn_digest(unit, quote_operator=False)}", [unit.ref])]
        for stored in unit.records:
            rec = stored.record
            if isinstance(rec, Message) and rec.role is MessageRole.OPERATOR:
                blocks.append(self.trusted(stored, f"operator (trusted) {stored.ref}:",
                                           FULL_CAP["operator"]))
        return self.rendered(blocks)

    def turn_compact(self, unit: TurnUnit, head: str) -> Rendered:
        key = ("compact", unit.ref, head, tuple(r.ref for r in unit.records))
        hit = self._memo.get(key)
        if hit is not None:
            return hit  # type: ignore[return-value]
        return self._remember(key, self.rendered(
            [self.line(f"- {head} · {turn_digest(unit)}", [unit.ref])]))

    def turn_ref(self, unit: TurnUnit) -> Rendered:
        t = unit.turn
        return self.rendered([self.line(f"- turn:{t.id} {t.trigger} (ref only)", [unit.ref])])

    # -- work item -----------------------------------------------------------------------
    def work_item(self, state: WorkItemState, waits: list[WaitState]) -> dict[int, Rendered]:
        ref = state.ref
        done = sum(1 for t in state.todos if t.done)
        head = f"work item {state.work_item_id} · status {state.status.value} · {ref}"
        ref_form = self.rendered([self.line(head, [ref])])
        compact = [self.line(head, [ref]), self.line(f"objective: {one_line(state.objective, 300)}")]
        nxt = next((t.text for t in state.todos if not t.done), None)
        compact.append(self.line(f"todos: {done}/{len(state.todos)} done"
                                 + (f"; next: {one_line(nxt, 160)}" if nxt else "")))
        for w in waits:
            compact.append(self.line(f"waiting on {w.wait_id}: {one_line(w.condition, 160)}"))
        if state.blocker:
            compact.append(self.line(f"blocker: {one_line(state.blocker, 200)}"))
        full = [self.line(head, [ref]), self.line(f"objective: {one_line(state.objective, 1200)}")]
        if state.plan:
            full.append(self.line("plan:"))
            full.extend(self.line(f"{i}. {one_line(p, 300)}") for i, p in enumerate(state.plan, 1))
        if state.todos:
            full.append(self.line("todos:"))
            full.extend(self.line(f"- [{'x' if t.done else ' '}] {one_line(t.text, 300)}")
                        for t in state.todos)
        for w in waits:
            full.append(self.line(f"waiting on {w.wait_id} ({w.opened_ref}): "
                                  f"{one_line(w.condition, 300)}"))
        if state.blocker:
            full.append(self.line(f"blocker: {one_line(state.blocker, 400)}"))
        if state.completion_report:
            full.append(self.line(f"completion report: {one_line(state.completion_report, 600)}"))
        return {0: ref_form, 1: self.rendered(compact), 2: self.rendered(full)}


def work_item_delta(rec: WorkItem) -> str:
    parts = []
    if rec.status is not None:
        parts.append(f"status {rec.status.value}")
    if rec.objective is not None:
        parts.append(f"objective: {one_line(rec.objective, 160)}")
    if rec.todos is not None:
        parts.append(f"todos {sum(1 for t in rec.todos if t.done)}/{len(rec.todos)} done")
    if rec.plan is not None:
        parts.append(f"plan of {len(rec.plan)} steps")
    if rec.waits is not None:
        parts.append(f"waits {', '.join(rec.waits) or 'none'}")
    if rec.blocker is not None:
        parts.append(f"blocker: {one_line(rec.blocker, 120) or 'cleared'}")
    if rec.completion_report:
        parts.append("completion report filed")
    return "; ".join(parts) or "touched"


def tool_repeats(records: Iterable[StoredRecord]) -> dict[str, list[str]]:
    """Identical tool calls inside a turn: last call's ref → refs of the earlier identical calls."""
    groups: dict[tuple[str, str, str], list[str]] = {}
    for stored in records:
        rec = stored.record
        if isinstance(rec, Tool):
            key = (rec.tool_name, rec.args_digest or rec.args_preview, rec.status.value)
            groups.setdefault(key, []).append(stored.ref)
    return {refs[-1]: refs[:-1] for refs in groups.values() if len(refs) > 1}


def turn_digest(unit: TurnUnit, *, quote_operator: bool = True) -> str:
    """Runtime facts of a turn on one line (no untrusted text; operator words as an excerpt)."""
    parts: list[str] = []
    tools = [r.record for r in unit.records if isinstance(r.record, Tool)]
    for stored in unit.records:
        rec = stored.record
        match rec:
            case Message(role=MessageRole.OPERATOR):
                parts.append(f"operator said: \"{one_line(rec.text, 160)}\"" if quote_operator
                             else f"operator message {stored.ref} below")
            case Message(role=MessageRole.ASSISTANT):
                parts.append("assistant replied")
            case TaskResult():
                parts.append(f"task {rec.task_id} {rec.status.value}"
                             + (" (verification)" if rec.verification else ""))
            case Brief():
                parts.append(f"brief {rec.kind.value}")
            case ExternalEvent():
                parts.append(f"external event from {one_line(rec.source, 40)}")
            case WorkItem():
                parts.append(f"work item {rec.work_item_id}: {work_item_delta(rec)}")
            case Wait():
                parts.append(f"wait {rec.wait_id} {rec.status.value}")
            case _:
                pass
    if tools:
        failed = sum(1 for t in tools if t.status in (ToolStatus.ERROR, ToolStatus.TIMEOUT)
                     or t.exit_code not in (None, 0))
        names = sorted({t.tool_name for t in tools})
        parts.append(f"{len(tools)} tool call(s) [{', '.join(one_line(n, 30) for n in names)}]"
                     + (f", {failed} failed" if failed else ""))
    return "; ".join(parts) or "no records"
