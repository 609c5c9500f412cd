"""Side effects the ledger has not resolved, tracked by a session projection's walk.

A tool run whose side effect is ``unknown`` or ``partial`` may already have changed the world:
until a later run of the same call reports ``none`` or ``completed`` (the keys of
:mod:`holon_ctx.memory.unresolved`), every request's tail says so — before compaction hands the
fact to the governed store (which the tail states too, as a blocking notice). The walk learns of
them from the turns its re-plan read and from every record it appends.
"""

from __future__ import annotations

from collections.abc import Iterable

from holon_ctx.ledger.records import Tool
from holon_ctx.ledger.store import StoredRecord
from holon_ctx.memory.unresolved import call_key, resolves
from holon_ctx.projection.base.formats import code_span, label_value
from holon_ctx.projection.base.items import Block
from holon_ctx.projection.rendering.render import Renderer

__all__ = ["EFFECTS_HEADING", "MAX_EFFECT_LINES", "effect_lines", "track_effects"]

#: Unresolved side effects the tail names one per line; more are counted on one line. The tail
#: is re-sent with every request, so it names the newest few and counts the rest.
MAX_EFFECT_LINES = 5
EFFECTS_HEADING = ("UNRESOLVED SIDE EFFECTS — each may already have happened; reconcile it "
                   "before acting, never retry it blind:")


def track_effects(unresolved: dict[str, str], records: Iterable[StoredRecord]) -> None:
    """Update ``unresolved`` (key → the run's ref) with tool runs in ledger order."""
    for stored in records:
        rec = stored.record
        if not isinstance(rec, Tool):
            continue
        for key in resolves(rec, stored.ref):
            if key.startswith("effect:"):
                unresolved.pop(key, None)
        if rec.side_effect_unresolved:
            unresolved[f"effect:{call_key(rec, stored.ref)}"] = stored.ref


def effect_lines(r: Renderer, unresolved: dict[str, str],
                 describe: dict[str, StoredRecord]) -> list[Block]:
    """The tail's lines: the warning once, each unresolved run (newest last), then how many
    more (with their refs while they are few)."""
    refs = list(unresolved.values())
    if not refs:
        return []
    lines: list[Block] = [r.line(EFFECTS_HEADING)]
    for ref in refs[-MAX_EFFECT_LINES:]:
        stored = describe.get(ref)
        rec = stored.record if stored is not None else None
        what = (f"{label_value(rec.tool_name, r.chars.tool_name)} "
                f"{code_span(rec.args_preview, r.chars.args)} → {rec.side_effect.value}"
                if isinstance(rec, Tool) and rec.side_effect else "unresolved")
        lines.append(r.line(f"- {ref}: {what}", [ref]))
    older = refs[:-MAX_EFFECT_LINES]
    if older:
        named = ", ".join(older[-MAX_EFFECT_LINES:])
        lines.append(r.line(f"- … {len(older)} older: {named}"
                            + (", …" if len(older) > MAX_EFFECT_LINES else ""), older))
    return lines
