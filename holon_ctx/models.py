"""Which tokenizer and framing a model's provider counts with, and how far a budget can be trusted.

A budget is only as true as the count behind it (RFC 0022). :func:`model_profile` maps a model
name, as a runtime or framework spells it (``gpt-4o``, ``openai/gpt-4.1-mini``,
``claude-sonnet-4-5``, ``anthropic/claude-3-5-haiku-latest``), to a :class:`ModelProfile`: the
encoding that counts its text offline, the provider's framing rule, and the guarantee that
follows. The families are a table, matched in order on the name without a routing prefix
(``openai/``, ``azure/``, ``anthropic/``, …):

==============================  ==============  ==========  ===============
family                          encoding        framing     guarantee
==============================  ==============  ==========  ===============
gpt-4o, gpt-4.1, gpt-4.5,       o200k_base      openai      framing-exact
gpt-5, o1/o3/o4, gpt-oss, codex
gpt-4 (turbo), gpt-3.5          cl100k_base     openai      framing-exact
claude-*                        cl100k_base     anthropic   calibrated
(anything else)                 cl100k_base     openai      calibrated
==============================  ==============  ==========  ===============

*framing-exact*: the text is counted with the model's own tokenizer and the framing by the
provider's published rule (an upper bound where the rule is not published: tool calls, Responses
items); *calibrated*: the tokenizer is not public (Anthropic) or not known, so the estimate is
corrected by a safety factor learned from the usage the provider reports
(:mod:`holon_ctx.calibration`). ``docs/providers.md`` states each guarantee with its measured
miss rate. An unknown model falls back to the default with a one-line warning
(:class:`UnknownModelWarning`).
"""

from __future__ import annotations

import re
import warnings
from enum import StrEnum
from typing import Final

import attrs

from holon_ctx.errors import InputError, quote_value
from holon_ctx.projection.base.framing import ANTHROPIC, OPENAI, Framing, FramingRule
from holon_ctx.tokens import DEFAULT_ENCODING, TokenCounter, counter_for_encoding

__all__ = ["DEFAULT_MODEL_PROFILE", "FAMILIES", "Guarantee", "ModelProfile", "UnknownModelWarning",
           "model_profile"]


class Guarantee(StrEnum):
    """How close a request's count is to the provider's (see the module docstring)."""

    EXACT = "exact"
    FRAMING_EXACT = "framing-exact"
    CALIBRATED = "calibrated"


class UnknownModelWarning(UserWarning):
    """A model name no family matches: counted with the default encoding and framing."""


@attrs.frozen
class ModelProfile:
    """How requests for one model are counted."""

    #: The model as given ("" when none was).
    model: str
    #: The family that matched (``openai-o200k``, ``openai-cl100k``, ``anthropic``, ``default``).
    family: str
    encoding: str
    framing: FramingRule
    guarantee: Guarantee
    #: The safety factor planned under before any usage of this model was observed: 1 where the
    #: count is an upper bound already; above 1 where the tokenizer is not public (Anthropic's
    #: is reported to produce roughly 1.1-1.35x cl100k's count depending on the text: not
    #: measurable offline, so the prior takes the top of that range until usage is observed).
    prior_factor: float = 1.0

    @property
    def calibration_key(self) -> str:
        """Observations of one model calibrate that model: the name, or the family's default."""
        return self.model or f"default:{self.family}"

    def counter(self) -> TokenCounter:
        """The counter of this model's encoding (offline, verified: holon_ctx.tokens)."""
        return counter_for_encoding(self.encoding)

    def counted_framing(self) -> Framing:
        """This model's framing rule bound to its counter: what each piece of framing costs."""
        return Framing(self.framing, self.counter())


@attrs.frozen
class _Family:
    name: str
    pattern: re.Pattern[str]
    encoding: str
    framing: FramingRule
    guarantee: Guarantee
    prior_factor: float = 1.0


#: The model families, matched in order (the first match wins; gpt-4o before gpt-4).
FAMILIES: Final = (
    _Family("openai-o200k", re.compile(
        r"^(?:gpt-4o|chatgpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|gpt-oss|o[1-9](?:$|-)|codex-|"
        r"computer-use-)"), "o200k_base", OPENAI, Guarantee.FRAMING_EXACT),
    _Family("openai-cl100k", re.compile(
        r"^(?:gpt-4|gpt-3\.5|text-embedding-3|text-embedding-ada-002)"), "cl100k_base", OPENAI,
        Guarantee.FRAMING_EXACT),
    _Family("anthropic", re.compile(r"^claude"), DEFAULT_ENCODING, ANTHROPIC, Guarantee.CALIBRATED,
            prior_factor=1.35),
)
#: What a request is counted with when no model is named: cl100k and OpenAI's framing (the
#: behaviour before models were named), an upper bound for OpenAI's cl100k models.
DEFAULT_MODEL_PROFILE: Final = ModelProfile(model="", family="default", encoding=DEFAULT_ENCODING,
                                            framing=OPENAI, guarantee=Guarantee.FRAMING_EXACT)
_ROUTE: Final = re.compile(r"^(?:[a-z0-9_.-]+/)+")


def model_profile(model: str | None, *, where: str = "model") -> ModelProfile:
    """The profile of ``model`` (None: the default). An unknown name warns once per call, in one
    line, and is counted with the default encoding and framing, calibrated from usage."""
    if model is None:
        return DEFAULT_MODEL_PROFILE
    if not isinstance(model, str) or not model.strip():
        got = type(model).__name__ if not isinstance(model, str) else "an empty string"
        raise InputError(f"expected a model name such as 'gpt-4o', got {got}", source=where,
                         path="model")
    name = model.strip()
    bare = _ROUTE.sub("", name.lower())
    for family in FAMILIES:
        if family.pattern.match(bare):
            return ModelProfile(model=name, family=family.name, encoding=family.encoding,
                                framing=family.framing, guarantee=family.guarantee,
                                prior_factor=family.prior_factor)
    warnings.warn(UnknownModelWarning(
        f"unknown model {quote_value(name)}: counting with {DEFAULT_ENCODING} and OpenAI's framing, "
        "calibrated from reported usage (observe_usage)"), stacklevel=3)
    return ModelProfile(model=name, family="default", encoding=DEFAULT_ENCODING, framing=OPENAI,
                        guarantee=Guarantee.CALIBRATED)
