"""Provider-ready projections: the same prompt, laid out for OpenAI- and Anthropic-style calls.

Layout (``docs/providers.md``). A projection's text is its sections in order, stable content first.
The *stable part* is the environment section (workspace, capabilities, runtime guidance): it goes
where the provider caches a prefix. Everything after it — work item, work refs, episodes, recent
turns, continuation anchor and current input — goes into **one user message**, fenced and labelled
exactly as the projection rendered it:

* OpenAI: ``[{"role": "system", "content": STABLE}, {"role": "user", "content": REST}]``. The
  system message is first and byte-identical across turns while the environment is unchanged, so
  the provider's automatic prefix cache reuses it.
* Anthropic: ``{"system": [{"type": "text", "text": STABLE, "cache_control": {"type":
  "ephemeral"}}], "messages": [{"role": "user", "content": [{"type": "text", "text": REST}]}]}``:
  one cache breakpoint, at the end of the stable part.

Trust placement. Only runtime configuration and trusted operator text may sit in the system role.
The stable part goes there only when it holds no data fence and the engine did not mark the
environment untrusted; otherwise it is the first (cached) block of the user message instead.
Untrusted and model-written text therefore only ever appears inside the user message, inside
``<data REF ORIGIN TRUST>`` fences.

Tool calls. The history is not replayed as provider ``tool_calls`` / ``tool`` messages: tool
output is untrusted and must stay in fenced user-role data, and the renderer already shows each
call with its own result in one block (``bash `ls` → ok`` then ``<data tool:x7 untrusted_external>``),
or an explicit stub naming a ref (``output folded …``, ``[clipped …; full text: REF]``). So no
request built here can carry an orphaned tool result or an unanswered call — the HTTP 400 that
trimming libraries cause — and the tests check the rendered pairing (``tests/tool_pairing.py``).

Token accounting. :func:`measure` counts a request as its provider frames it
(:mod:`holon_ctx.projection.base.framing`, RFC 0022): the text contents, each message's role and markers,
each tool call's and result's fields, and the reply priming — by default under OpenAI's published
accounting (the token-counting guide in OpenAI's cookbook), or under the rule a model's provider
uses. Splitting the prompt at a section boundary keeps the content count exact (sections are
additive blocks), so ``measure`` equals the projection's ``used_tokens`` plus framing;
:func:`framing_tokens` is what a caller subtracts from its budget before projecting (``holon-ctx
project --format openai|anthropic`` does).
"""

from __future__ import annotations

from typing import Final

from holon_ctx.projection.base.framing import (
    Framing,
    Payload,
    arguments_json,
    default_framing,
    measure_request,
)
from holon_ctx.projection.base.model import Section
from holon_ctx.projection.base.provider_types import (
    AnthropicContentBlock,
    AnthropicRequest,
    AnthropicUserMessage,
    CacheControl,
    OpenAIMessage,
)
from holon_ctx.projection.planning.projector import Projection
from holon_ctx.tokens import TokenCounter, default_counter

__all__ = [
    "CACHE_CONTROL",
    "REPLY_PRIMING_TOKENS",
    "TOKENS_PER_MESSAGE",
    "TOKENS_PER_TOOL_CALL",
    "Payload",
    "arguments_json",
    "framing_tokens",
    "measure",
    "shares_stable_prefix",
    "split_stable",
    "to_anthropic_messages",
    "to_openai_messages",
]

#: Fixed framing tokens per chat message (start, end and separator markers), per OpenAI's
#: token-counting guide; the role's own tokens come on top (:mod:`.framing`).
TOKENS_PER_MESSAGE: Final = 3
#: Fixed framing tokens per tool call (separators), on top of its id, type, name and arguments.
TOKENS_PER_TOOL_CALL: Final = 3
#: Tokens that prime the assistant's reply, counted once per request.
REPLY_PRIMING_TOKENS: Final = 3
CACHE_CONTROL: Final[CacheControl] = {"type": "ephemeral"}
#: The most messages a request built here holds (system + user): what ``framing_tokens`` assumes.
MAX_MESSAGES: Final = 2


def split_stable(projection: Projection) -> tuple[str, str, bool]:
    """``(stable, rest, system_ok)``: the cacheable prefix, the remainder, and whether the prefix
    may sit in the system role (no fence, environment not marked untrusted)."""
    stable = projection.stable_prefix
    text = projection.text
    if not stable or not text.startswith(stable):
        return "", text, False
    untrusted_env = any(d.section is Section.ENVIRONMENT and "untrusted" in d.reasons
                        for d in projection.decisions)
    system_ok = not untrusted_env and not projection.stable_fenced
    return stable, text[len(stable):], system_ok


def to_openai_messages(projection: Projection) -> list[OpenAIMessage]:
    """Chat-completions ``messages``: the stable part as the system message, the rest as user
    (shapes in :mod:`holon_ctx.projection.base.provider_types`)."""
    stable, rest, system_ok = split_stable(projection)
    if stable and system_ok:
        return [{"role": "system", "content": stable}, {"role": "user", "content": rest}]
    # No trusted stable part: one user message, still starting with whatever is stable.
    return [{"role": "user", "content": stable + rest}]


def to_anthropic_messages(projection: Projection) -> AnthropicRequest:
    """A Messages request body fragment: ``system`` (cached) and one user message."""
    stable, rest, system_ok = split_stable(projection)
    if stable and system_ok:
        user: AnthropicUserMessage = {"role": "user", "content": [{"type": "text", "text": rest}]}
        return {"system": [{"type": "text", "text": stable, "cache_control": CACHE_CONTROL.copy()}],
                "messages": [user]}
    content: list[AnthropicContentBlock] = []
    if stable:
        # Untrusted environment: still cached, but as the first block of the user message.
        content.append({"type": "text", "text": stable, "cache_control": CACHE_CONTROL.copy()})
    content.append({"type": "text", "text": rest})
    only: AnthropicUserMessage = {"role": "user", "content": content}
    return {"system": [], "messages": [only]}


def shares_stable_prefix(a: Projection, b: Projection) -> bool:
    """True when both projections have the same non-empty stable part in the same place, so a
    provider's prompt cache written by one is read by the other."""
    sa, _, oka = split_stable(a)
    sb, _, okb = split_stable(b)
    return bool(sa) and sa == sb and oka == okb


def measure(payload: Payload, counter: TokenCounter, framing: Framing | None = None) -> int:
    """Tokens of a request (chat messages, Responses input items or an Anthropic body) as
    ``framing`` counts it (default: OpenAI's rule on ``counter``; :mod:`.framing`)."""
    return measure_request(payload, framing or default_framing(counter))


def framing_tokens(messages: int = MAX_MESSAGES, framing: Framing | None = None) -> int:
    """Framing of a stateless request of ``messages`` messages (system, then user), reply priming
    included, under ``framing`` (default: OpenAI's rule on the default counter)."""
    return (framing or default_framing(default_counter())).stateless(messages)
