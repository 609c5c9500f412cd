"""What the ledger already holds of a framework's message list (RFC 0027, "integrations on
reload"): each integration appends only the rest.

A framework that keeps its own history (a LangGraph checkpointer, an agent's message list, the
Agents SDK's items) hands it back whole after a restart. The ledger does not store the
framework's message ids, so what it holds is found by content and position: every record an
integration appends has a *key* — ``("user", text)`` for an operator message, ``("assistant",
text)`` for a reply, ``("tool", call_id)`` for a call's result, ``("note", text)`` for a runtime
note, ``("run", name)`` for a tool run the runtime made — and the incoming list, mapped to the
keys its messages would append, is aligned with the ledger's keys: the longest start of the list
that is the end of the ledger's keys is held (a list that was trimmed at its start still
aligns); what follows is new. System text is matched by content alone: a system message whose
text the ledger holds (as environment guidance or a runtime note) is not new, wherever it sits,
so a re-sent system prompt never becomes a runtime note. A key of None (a message whose record
cannot be told in advance) matches any key of the same role.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

from holon_ctx.ledger.records import Environment, Message, MessageRole, Tool
from holon_ctx.session import Session

__all__ = ["Key", "LedgerKeys", "ledger_keys", "new_positions"]

#: ``(role, text or call id)``; the text None matches any key of that role.
Key: TypeAlias = tuple[str, str | None]


class LedgerKeys:
    """The keys of what the ledger holds, in ledger order, and the system texts it holds."""

    def __init__(self, keys: list[tuple[str, str]], system: set[str]) -> None:
        self.keys = keys
        self.system = system


def ledger_keys(session: Session) -> LedgerKeys:
    """One pass over the ledger (once per integration object: on its first sync)."""
    keys: list[tuple[str, str]] = []
    system: set[str] = set()
    for record in session.store.iter_records():
        match record:
            case Message(role=MessageRole.OPERATOR):
                keys.append(("user", record.text))
            case Message(role=MessageRole.ASSISTANT):
                keys.append(("assistant", record.text))
            case Message(role=MessageRole.SYSTEM):
                keys.append(("note", record.text))
                system.add(record.text)
            case Tool() if record.call_id:
                keys.append(("tool", record.call_id))
            case Tool():
                keys.append(("run", record.tool_name))
            case Environment() if record.guidance:
                system.add(record.guidance)
            case _:
                pass
    return LedgerKeys(keys, system)


def _matches(key: Key, held: tuple[str, str]) -> bool:
    return key[0] == held[0] and (key[1] is None or key[1] == held[1])


def new_positions(held: LedgerKeys, incoming: Sequence[Key | None],
                  system: Sequence[str | None] = (),
                  roles: frozenset[str] = frozenset({"user", "assistant", "tool", "note"}),
                  ) -> list[int]:
    """The positions in ``incoming`` of what the ledger does not hold yet, in order.

    ``incoming``: each message's key (None: the message appends nothing, it is never new);
    ``system``: beside it, the text of each system message (None for the others), matched by
    content (see the module docstring); ``roles``: the keys the integration appends (records
    the runtime appended by other means, such as its own tool runs, are not in its list).
    """
    texts = list(system) + [None] * (len(incoming) - len(system))
    order = [i for i, key in enumerate(incoming) if key is not None and texts[i] is None]
    new = [i for i, text in enumerate(texts) if text is not None and text not in held.system]
    keys = [k for k in held.keys if k[0] in roles]
    # The largest m such that the first m keyed messages are the ledger's last m keys, tried
    # from the largest down.
    held_count = 0
    if order:
        for start in range(max(0, len(keys) - len(order)), len(keys)):
            size = len(keys) - start
            if all(_matches(incoming[order[j]], keys[start + j])  # type: ignore[arg-type]
                   for j in range(size)):
                held_count = size
                break
    return sorted(new + order[held_count:])
