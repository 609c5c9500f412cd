"""The session request a runtime gets, as ``preview``, ``explain`` and ``diff`` show it.

How it works (RFC 0024, decision 5). The preview family shows by default the request
``Session.next_request`` returns at that turn: :func:`runtime_request` walks the session
projection (messages layout, the provider's framing) over the ledger's *saved* epochs, read
through :class:`~holon_ctx.ledger.epochs.ReadThroughEpochs` so that nothing is written, after the
request of the turn before it, so that its cached share is the one a runtime asking every turn
sees. :func:`as_projection` gives that request the shape the printers read (a
:class:`~holon_ctx.projection.planning.projector.Projection`): its tokens are ``request_tokens`` (what is
sent, framing included), its decisions the manifest's items (the plan the request froze at its
last re-plan: nothing else of a plan is kept), its sections the manifest's. The prompt itself is
shown part by part (:func:`part_blocks`): each part's role and place in the request, then its
content, tagged by the blocks the renderer made it from (the spans each part keeps).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from holon_ctx import LedgerStore
from holon_ctx.cli._api import Block, Part, SessionRequest
from holon_ctx.cli.epochs_view import EpochView, epoch_view
from holon_ctx.lowlevel import (
    Form,
    ItemDecision,
    Manifest,
    Priority,
    Projection,
    Projector,
    Relation,
    Section,
)

__all__ = ["MODES", "as_projection", "part_blocks", "runtime_request"]

#: ``--mode`` of preview, explain, diff and project: the runtime's session request (default) or
#: the stateless plan of the turn alone.
MODES = ("session", "stateless")

_PRIORITIES = {p.label: p for p in Priority}
_FORMS = {f.label: f for f in Form}


def runtime_request(store: LedgerStore, projector: Projector, budget: int,
                    at: str | None) -> EpochView:
    """The session request a runtime gets at ``at`` (default: the newest turn) under ``budget``,
    read from the ledger's saved epochs without writing to them."""
    return epoch_view(store, projector, budget, at)


def as_projection(request: SessionRequest) -> Projection:
    """``request`` as the preview's printers read a projection (see the module docstring)."""
    m = request.manifest
    return Projection(text=request.text, budget_tokens=request.budget_tokens,
                      used_tokens=request.request_tokens, counter=m.counter,
                      current_turn=m.current_turn, relation=Relation(m.relation),
                      anchor_turn=m.anchor_turn, decisions=tuple(_decisions(m)),
                      folds=tuple(m.folded), manifest=m,
                      # The stable prefix (what a provider's cache keeps across re-plans) as
                      # the environment's text: Projection.stable_prefix reads it there.
                      section_text={Section.ENVIRONMENT: "".join(
                          p.content for p in request.parts[:request.prefix_count])},
                      stable_fenced=any(b.fenced for p in request.parts[:request.prefix_count]
                                        for b in p.blocks()))


def _decisions(m: Manifest) -> Iterator[ItemDecision]:
    """One decision per manifest item of the planned sections (the current state is stated,
    not planned: it has none)."""
    for sec in m.sections:
        try:
            section = Section(sec.name)
        except ValueError:
            continue
        for item in sec.items:
            yield _decision(section, item)


def _decision(section: Section, item: dict[str, Any]) -> ItemDecision:
    form_label = str(item.get("form", "omitted"))
    clipped = form_label == "clipped"
    # A clipped item's form is not kept; clipped is what the reason reads (omission_reason).
    form = None if form_label == "omitted" else _FORMS.get(form_label, Form.FULL)
    key = str(item["key"])
    return ItemDecision(
        key=key, section=section, priority=_PRIORITIES.get(str(item.get("priority")),
                                                           Priority.NORMAL),
        reasons=tuple(str(r) for r in item.get("reasons", ()) or ()),
        chain=None if item.get("chain") is None else str(item["chain"]), refs=(key,),
        form=form, clipped=clipped, tokens=int(item.get("tokens", 0)),
        full_tokens=int(item.get("full_tokens", item.get("tokens", 0))),
        # The manifest's next_budget is the re-plan's, at its low-water plan budget: not a
        # budget a caller could ask for (`--mode stateless` shows the turn's own).
        next_budget=None,
        kind=str(item.get("kind", "item")))


def part_place(request: SessionRequest, index: int) -> str:
    """Where part ``index`` sits in the request (what a prompt cache keeps of it)."""
    if index < request.prefix_count:
        return "stable prefix"
    if index < request.frozen_count:
        return "history (frozen at the last re-plan)"
    if request.has_tail and index == len(request.parts) - 1:
        return "current state"
    return "history (appended since)"


def part_blocks(request: SessionRequest) -> Iterator[tuple[str, Part, tuple[Block, ...]]]:
    """``(place, part, blocks)`` of every part that sends content, in request order: the blocks
    say what each line is, for the preview's trust gutter."""
    for i, part in enumerate(request.parts):
        if not (part.content or part.calls):
            continue  # a turn heading: in the text layout only
        yield part_place(request, i), part, part.blocks()
