"""One-line digests of records: a turn's facts, a work item's changes. Runtime facts only.

No untrusted text reaches a digest but sanitised previews (:func:`~.formats.one_line`): the
compact form of a turn is its heading and this digest, so it must be safe on a label line.
"""

from __future__ import annotations

from holon_ctx.ledger.records import (
    Brief,
    ExternalEvent,
    Message,
    MessageRole,
    TaskResult,
    Tool,
    Wait,
    WorkItem,
)
from holon_ctx.ledger.store import StoredRecord
from holon_ctx.projection.base.formats import code_span, label_value, quote_text, run_status
from holon_ctx.projection.base.model import TurnUnit
from holon_ctx.projection.base.policy import TextLimits

__all__ = ["tool_outcome", "turn_digest", "work_item_delta"]

#: Tool calls a turn's digest names one by one (command and outcome); more are counted.
_TOOLS_NAMED = 2


def tool_outcome(rec: Tool, chars: TextLimits | None = None) -> str:
    """A tool run on one line: its command (a sanitised preview) and how it ended."""
    c = chars or TextLimits()
    args = code_span(rec.args_preview, c.args_in_digest, marked=True)
    return (f"{label_value(rec.tool_name, c.tool_name_in_digest)}"
            f"{f' {args}' if rec.args_preview.strip() else ''} "
            f"→ {run_status(rec.status.value, rec.exit_code)}")


def work_item_delta(rec: WorkItem, chars: TextLimits | None = None, *,
                    current_objective: bool = False) -> str:
    """A work-item transition on one line: the fields it changed (an objective that is still
    the current work item's, which its section states, named as that: ``current_objective``)."""
    c = chars or TextLimits()
    parts = []
    if rec.status is not None:
        parts.append(f"status {rec.status.value}")
    if rec.objective is not None:
        parts.append("objective set (the current one)" if current_objective else
                     f"objective: {label_value(rec.objective, c.objective_in_delta, marked=True)}")
    if rec.todos is not None:
        parts.append(f"todos {sum(1 for t in rec.todos if t.done)}/{len(rec.todos)} done")
    if rec.plan is not None:
        parts.append(f"plan of {len(rec.plan)} steps")
    if rec.waits is not None:
        parts.append(f"waits {', '.join(label_value(w, c.ident) for w in rec.waits) or 'none'}")
    if rec.blocker is not None:
        parts.append(f"blocker: {label_value(rec.blocker, c.blocker_in_delta) or 'cleared'}")
    if rec.completion_report:
        parts.append("completion report filed")
    return "; ".join(parts) or "touched"


def turn_digest(unit: TurnUnit, chars: TextLimits | None = None, *,
                quote_operator: bool = True) -> str:
    """Runtime facts of a turn on one line (no untrusted text; operator words as an excerpt)."""
    c = chars or TextLimits()
    parts: list[str] = []
    tools = [r.record for r in unit.records if isinstance(r.record, Tool)]
    for stored in unit.records:
        part = _record_fact(stored, c, quote_operator)
        if part is not None:
            parts.append(part)
    if tools:
        # A reply that issued commands is named by its commands (what the model did).
        parts = [p for p in parts if p != "assistant replied"]
        parts.extend(_tool_facts(tools, c))
    return "; ".join(parts) or "no records"


def _record_fact(stored: StoredRecord, c: TextLimits, quote_operator: bool) -> str | None:
    """One record's fact in a turn's digest (None: the record says nothing there)."""
    rec = stored.record
    match rec:
        case Message(role=MessageRole.OPERATOR):
            return (f"operator said: {quote_text(rec.text, c.operator_excerpt, marked=True)}"
                    if quote_operator else f"operator message {stored.ref} below")
        case Message(role=MessageRole.ASSISTANT):
            return "assistant replied"
        case TaskResult():
            return (f"task {label_value(rec.task_id, c.ident)} {rec.status.value}"
                    + (" (verification)" if rec.verification else ""))
        case Brief():
            return f"brief {rec.kind.value}"
        case ExternalEvent():
            return f"external event from {label_value(rec.source, c.source_in_digest)}"
        case WorkItem():
            return f"work item {label_value(rec.work_item_id, c.ident)}: {work_item_delta(rec, c)}"
        case Wait():
            return f"wait {label_value(rec.wait_id, c.ident)} {rec.status.value}"
        case _:
            return None


def _tool_facts(tools: list[Tool], c: TextLimits) -> list[str]:
    """A turn's tool runs in its digest: each one's outcome, or a count, the tools' names and
    the last outcome when there are more than :data:`_TOOLS_NAMED`."""
    if len(tools) <= _TOOLS_NAMED:
        return [tool_outcome(t, c) for t in tools]
    failed = sum(1 for t in tools if t.failed)
    names = sorted({t.tool_name for t in tools})
    return [f"{len(tools)} tool calls "
            f"[{', '.join(label_value(n, c.tool_name_in_digest) for n in names)}]"
            + (f", {failed} failed" if failed else "")
            + f"; last {tool_outcome(tools[-1], c)}"]
