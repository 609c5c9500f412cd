"""The analysis behind ``holon-ctx diff``: two projections compared.

Refs that entered and left, items that changed form, tokens per section, whether the stable prefix
(the environment section) changed, and how many tokens the two prompts share from the start (what
a provider's prompt cache can reuse). :mod:`holon_ctx.cli.preview` draws the result.
"""

from __future__ import annotations

from typing import Any

import msgspec

from holon_ctx.lowlevel import ItemDecision, Projection, Section, TokenCounter

__all__ = ["Difference", "SectionDelta", "diff"]


class SectionDelta(msgspec.Struct, kw_only=True):
    name: str
    a_tokens: int
    b_tokens: int
    change: int
    a_representation: str
    b_representation: str


class Difference(msgspec.Struct, kw_only=True):
    """Two projections compared (``diff --json`` prints this)."""

    a: dict[str, Any]
    b: dict[str, Any]
    entered: list[str]
    left: list[str]
    form_changes: list[dict[str, str]]
    sections: list[SectionDelta]
    stable_prefix_changed: bool
    stable_prefix_tokens: list[int]
    #: Sections, from the top, whose text is byte-identical in both prompts.
    identical_sections: list[str]
    first_difference: str | None
    #: Tokens the two prompts share from the start: what a provider's prompt cache can reuse.
    shared_prefix_tokens: int
    #: ``session``: the two session requests a runtime gets (the default); ``stateless``.
    mode: str = "session"


def _side(p: Projection) -> dict[str, Any]:
    return {"budget_tokens": p.budget_tokens, "current_turn": p.current_turn,
            "used_tokens": p.used_tokens, "relation": p.relation.value}


def _selected(p: Projection) -> list[str]:
    return [r for s in p.manifest.sections for r in s.selected]


def _form(d: ItemDecision) -> str:
    return "omitted" if d.form is None else "clipped" if d.clipped else d.form.label


def diff(a: Projection, b: Projection, counter: TokenCounter) -> Difference:
    sel_a, sel_b = _selected(a), _selected(b)
    set_a, set_b = set(sel_a), set(sel_b)
    forms_a = {d.key: _form(d) for d in a.decisions}
    changes = [{"key": d.key, "a": forms_a[d.key], "b": _form(d)} for d in b.decisions
               if d.key in forms_a and forms_a[d.key] != _form(d)]
    sections = [SectionDelta(name=sa.name, a_tokens=sa.used_tokens, b_tokens=sb.used_tokens,
                             change=sb.used_tokens - sa.used_tokens,
                             a_representation=sa.representation,
                             b_representation=sb.representation)
                for sa, sb in zip(a.manifest.sections, b.manifest.sections, strict=True)]
    identical: list[str] = []
    first_difference = None
    if a.manifest.session is not None and b.manifest.session is not None:
        # Session requests are compared by their places, not by planned sections: the stable
        # prefix, then everything after it (as_projection keeps the prefix as the environment).
        if a.stable_prefix != b.stable_prefix:
            first_difference = "stable_prefix"
        else:
            identical.append("stable_prefix")
            if a.text != b.text:
                first_difference = "history_or_current_state"
    else:
        for section in Section:  # render order (the enum's order)
            if a.section_text.get(section, "") != b.section_text.get(section, ""):
                first_difference = section.value
                break
            identical.append(section.value)
    ta, tb = counter.encode(a.text), counter.encode(b.text)
    shared = next((i for i, (x, y) in enumerate(zip(ta, tb, strict=False)) if x != y),
                  min(len(ta), len(tb)))
    return Difference(
        a=_side(a), b=_side(b),
        entered=[r for r in sel_b if r not in set_a], left=[r for r in sel_a if r not in set_b],
        form_changes=changes, sections=sections,
        stable_prefix_changed=a.stable_prefix != b.stable_prefix,
        stable_prefix_tokens=[counter.count(a.stable_prefix), counter.count(b.stable_prefix)],
        identical_sections=identical, first_difference=first_difference,
        shared_prefix_tokens=shared)
