"""Unresolved items: what an episode must carry forward, how it is keyed, and what resolves it.

An item is *unresolved* when it is still open at the end of its episode's range. Each has a kind
(the table :data:`KINDS`) and a *key* that a later record can resolve:

=====================  ==========================  ===========================================
kind                   key                          resolved by
=====================  ==========================  ===========================================
tool_call_pending      ``call:<call>``              a later tool run of the same call that is
                                                    not pending
side_effect_unknown,   ``effect:<call>``            a later run of the same call whose side
side_effect_partial                                 effect is ``none`` or ``completed``
approval_pending,      ``wait_id:<wait id>``        the wait is no longer open
wait_open
todo_open              ``todo:<work item>:<hash>``  the todo is done or gone, or the work item
                                                    is done or abandoned
work_item_blocked      ``blocked:<work item>``      the blocker is cleared or the work item is
                                                    done or abandoned
=====================  ==========================  ===========================================

``<call>`` is ``<provider call id>/<tool>#<8 hex digits of the args digest>`` when the runtime
recorded a call id (a provider may reuse an id for another call once the first is answered: the
id alone would let the second settle the first's items; an archive made before 2026-12-06 keyed
such a call by its id alone, and a run of that id still settles those), else
``<tool>#<args digest>``, else the tool record's own ref (which nothing later can resolve: such
an item stays open, which is the safe side). Kinds marked *pinned* put their episode in the
PINNED retention class until they are resolved: a pending tool call, approval or unknown side
effect must never drop out of view.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import Final

import attrs

from holon_ctx.ledger.records import SideEffect, Tool, ToolStatus, WorkItemStatus
from holon_ctx.ledger.state import WorkItemState
from holon_ctx.ledger.store import StoredRecord

__all__ = [
    "KINDS",
    "LedgerFacts",
    "OpenKind",
    "call_key",
    "call_label",
    "is_approval",
    "is_open",
    "key_work_item",
    "resolves",
    "todo_key",
    "tool_events",
]


class OpenKind(StrEnum):
    TOOL_CALL_PENDING = "tool_call_pending"
    APPROVAL_PENDING = "approval_pending"
    SIDE_EFFECT_UNKNOWN = "side_effect_unknown"
    SIDE_EFFECT_PARTIAL = "side_effect_partial"
    WAIT_OPEN = "wait_open"
    TODO_OPEN = "todo_open"
    WORK_ITEM_BLOCKED = "work_item_blocked"


@attrs.frozen
class KindRule:
    pinned: bool
    label: str


#: The kinds, in the order an episode lists them; ``pinned`` kinds pin their episode.
KINDS: Final[dict[OpenKind, KindRule]] = {
    OpenKind.TOOL_CALL_PENDING: KindRule(True, "tool call pending"),
    OpenKind.APPROVAL_PENDING: KindRule(True, "approval pending"),
    OpenKind.SIDE_EFFECT_UNKNOWN: KindRule(True, "side effect unknown"),
    OpenKind.SIDE_EFFECT_PARTIAL: KindRule(True, "side effect partial"),
    OpenKind.WAIT_OPEN: KindRule(False, "waiting"),
    OpenKind.TODO_OPEN: KindRule(False, "open todo"),
    OpenKind.WORK_ITEM_BLOCKED: KindRule(False, "blocked"),
}

_APPROVAL = re.compile(r"approv|sign[- ]?off|批准|审批|审核|承認|決裁", re.IGNORECASE)
_DONE = (WorkItemStatus.DONE, WorkItemStatus.ABANDONED)


def is_approval(wait_id: str, condition: str) -> bool:
    """A wait that waits for someone's approval (by its id or condition)."""
    return bool(_APPROVAL.search(wait_id) or _APPROVAL.search(condition))


def call_key(tool: Tool, ref: str) -> str:
    """What identifies one call across its runs (see the module docstring)."""
    if tool.call_id:
        # A provider may reuse an id once its call is answered (RFC 0008, decision 9): the id
        # alone would let `ls logs` under `call_0` settle the unknown effect of `deploy v2`
        # made under `call_0` before. A call's runs all carry its tool and arguments.
        return f"{tool.call_id}/{tool.tool_name}#{_short_digest(tool)}"
    if tool.args_digest:
        return f"{tool.tool_name}#{tool.args_digest}"
    return f"ref:{ref}"


def call_label(tool: Tool, ref: str) -> str:
    """How a call is named to the model: its provider id when it has one, else its key."""
    return tool.call_id or call_key(tool, ref)


def _legacy_keys(tool: Tool, keys: Iterable[str]) -> list[str]:
    """Keys an archive made before 2026-12-06 holds for a call with an id (``call:<id>``,
    ``effect:<id>``): a run of the same id still settles those, as it did then."""
    if not tool.call_id:
        return []
    return [f"{key.partition(':')[0]}:{tool.call_id}" for key in keys]


def _short_digest(tool: Tool) -> str:
    """Eight hex digits of the call's arguments: they tell apart the calls of one reused id and
    tool (a collision keeps the older behaviour, never loses an item), and the key is shown in
    every governed notice, so each digit costs tokens in the current state."""
    digest = tool.args_digest.removeprefix("sha256:")
    if not re.fullmatch(r"[0-9a-f]{8,}", digest):
        digest = hashlib.sha256((tool.args_digest or tool.args_preview).encode(
            "utf-8", "surrogatepass")).hexdigest()
    return digest[:8]


def todo_key(work_item_id: str, text: str) -> str:
    return f"todo:{work_item_id}:{hashlib.sha256(text.encode()).hexdigest()[:16]}"


def key_work_item(key: str) -> str | None:
    """The work item a todo or blocker key belongs to (None for other keys)."""
    kind, _, rest = key.partition(":")
    if kind == "blocked":
        return rest
    if kind == "todo":
        return rest.rpartition(":")[0]
    return None


def resolves(tool: Tool, ref: str) -> tuple[str, ...]:
    """The keys a tool run resolves: a definite result ends a pending call, a known side effect
    ends an unknown one."""
    keys: list[str] = []
    call = call_key(tool, ref)
    if tool.status is not ToolStatus.PENDING:
        keys.append(f"call:{call}")
    if tool.side_effect in (SideEffect.NONE, SideEffect.COMPLETED):
        keys.append(f"effect:{call}")
    return (*keys, *_legacy_keys(tool, keys))


def tool_events(stored: StoredRecord) -> Iterable[tuple[str, str]]:
    """What one record does to call and side-effect keys, for
    :func:`~holon_ctx.ledger.answers.keyed_events`: a tool run's tag is ``resolve`` for the
    keys :func:`resolves` names, and ``reopen`` for its call's side effect (unknown or partial
    again) or its call (pending again)."""
    tool = stored.record
    if not isinstance(tool, Tool):
        return ()
    out = [(key, "resolve") for key in resolves(tool, stored.ref)]
    reopened = [f"effect:{call_key(tool, stored.ref)}"] if tool.side_effect_unresolved else []
    if tool.pending:
        reopened.append(f"call:{call_key(tool, stored.ref)}")
    out.extend((key, "reopen") for key in (*reopened, *_legacy_keys(tool, reopened)))
    return out


@attrs.frozen
class LedgerFacts:
    """What the ledger says now (as of some position) about open items' keys."""

    open_wait_ids: frozenset[str]
    work_items: Mapping[str, WorkItemState | None]
    #: Keys (``call:…``/``effect:…``) resolved by a tool run seen before the position.
    resolved_calls: frozenset[str] = frozenset()


def is_open(key: str, facts: LedgerFacts) -> bool:
    """Whether the item keyed ``key`` is still open according to ``facts``."""
    kind, _, rest = key.partition(":")
    if kind == "wait_id":
        return rest in facts.open_wait_ids
    if kind in ("call", "effect"):
        return key not in facts.resolved_calls
    wid = key_work_item(key)
    if wid is None:
        return True
    state = facts.work_items.get(wid)
    if state is None:
        return True
    if state.status in _DONE:
        return False
    if kind == "blocked":
        return bool(state.blocker) or state.status is WorkItemStatus.BLOCKED
    return any(todo_key(wid, t.text) == key and not t.done for t in state.todos)
