"""The optional Summarizer: a model may add a recap to an episode, as labelled inference only.

A recap never replaces or edits the deterministic episode. :func:`summarize` asks the model, then
runs the *probe check*: the recap must still reference every operator intent and every unresolved
item of the range (by ref, in a claim's refs or written in its text), and may cite only refs the
episode holds. A recap that passes is stored as a :class:`Recap` whose claims are all
``model_output``; one that fails is stored too, as *rejected*, with the reasons, and is never
shown. Either way the episode's fields, digest, trust labels, unresolved items and pinning are
untouched: text like "approval granted" in a recap is the model's claim, and stays one.
"""

from __future__ import annotations

import re
from typing import Final, Protocol, runtime_checkable

import attrs
import msgspec

from holon_ctx.memory.episodes import Claim, Episode, Field, Recap, RecapStatus

__all__ = ["RecapClaim", "RecapDraft", "Summarizer", "probe", "summarize", "with_recaps"]

_REF: Final = re.compile(
    r"\b(?:turn|message|brief|task_result|tool|external_event|work_item|wait|environment|pin)"
    r":[^\s,;)\]\"'“”]+")
#: Longest recap text kept (characters); a longer one is rejected rather than cut.
MAX_RECAP_CHARS: Final = 4000


@attrs.frozen
class RecapClaim:
    text: str
    refs: tuple[str, ...] = ()


@attrs.frozen
class RecapDraft:
    """What a summariser returns: claims, each naming the refs it rests on."""

    claims: tuple[RecapClaim, ...]


@runtime_checkable
class Summarizer(Protocol):
    @property
    def name(self) -> str:
        """The model's name, recorded with every recap it writes."""
        ...

    def recap(self, episode: Episode) -> RecapDraft: ...


def _cited(claim: RecapClaim) -> set[str]:
    return {*claim.refs, *(m.rstrip(".") for m in _REF.findall(claim.text))}


def probe(episode: Episode, draft: RecapDraft) -> list[str]:
    """Reasons to reject ``draft`` (empty when it passes the probe check)."""
    reasons: list[str] = []
    if not draft.claims:
        return ["empty_recap"]
    cited = set().union(*(_cited(c) for c in draft.claims))
    for claim in episode.operator_intents:
        if not cited.intersection(claim.refs[:1]):
            reasons.append(f"dropped_operator_intent:{claim.refs[0]}")
    for claim in episode.unresolved:
        if not cited.intersection(claim.refs):
            reasons.append(f"dropped_unresolved:{claim.refs[0]}")
    known = {*episode.source_refs, *(r for f in Field for c in episode.field(f) for r in c.refs)}
    reasons.extend(f"unknown_ref:{ref}" for ref in sorted(cited - known))
    if sum(len(c.text) for c in draft.claims) > MAX_RECAP_CHARS:
        reasons.append("recap_too_long")
    return reasons


def summarize(episode: Episode, summarizer: Summarizer) -> Recap:
    """Ask ``summarizer`` for a recap and return it accepted or rejected (never raises for it)."""
    try:
        draft = summarizer.recap(episode)
    except Exception as exc:  # a model failing is a rejected recap, never a failed archive
        return Recap(episode_id=episode.id, digest=episode.digest, model=summarizer.name,
                     status=RecapStatus.REJECTED, reasons=[f"summarizer_error:{type(exc).__name__}"])
    reasons = probe(episode, draft)
    claims = [Claim(kind="recap", text=f"recap by model {summarizer.name} (model inference, "
                    "not authority)", refs=sorted(_cited(c)) or [episode.ref], quote=c.text,
                    origin=f"model:{summarizer.name}", trust="model_output")
              for c in draft.claims]
    return Recap(episode_id=episode.id, digest=episode.digest, model=summarizer.name,
                 status=RecapStatus.REJECTED if reasons else RecapStatus.ACCEPTED,
                 reasons=reasons, claims=claims)


def with_recaps(episode: Episode, recaps: list[Recap]) -> Episode:
    """The episode as shown: accepted recaps bound to its digest appended to model inferences.

    Only ``model_inferences`` and ``generated_by`` change; every other field is the stored one.
    """
    usable = [r for r in recaps if r.status is RecapStatus.ACCEPTED and r.digest == episode.digest
              and r.episode_id == episode.id]
    if not usable:
        return episode
    models = sorted({r.model for r in usable})
    return msgspec.structs.replace(episode, model_inferences=[
        *episode.model_inferences, *(c for r in usable for c in r.claims)],
        generated_by=f"{episode.generated_by}+" + "+".join(f"model:{m}" for m in models))
