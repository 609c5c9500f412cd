"""Replaying a ledger as a runtime would, turn by turn, to see what each request costs.

At every model call of the ledger (:func:`call_points`: right before each reply it holds, at the
end of each turn without one, and at the end), each
*approach* builds the request a runtime would send then, and
:class:`~holon_ctx.projection.measure.cost.CostMeter` prices it against the one before it. Approaches:

``session``    the session projection (RFC 0010), provider messages: what ``holon-ctx project
               --format openai|anthropic`` and the library send.
``stateless``  the stateless projection (RFC 0002) as one provider request per turn.
``full``       the whole history, untrimmed: every record of every turn as native messages
               (over budget once the history outgrows it; shown for the cache ceiling).
``newest``     keep the newest messages of that history that fit the budget, system message
               kept, starting on a user message (LangChain's ``trim_messages(strategy="last",
               include_system=True, start_on="human")``).
``masking``    observation masking (Lindenbauer et al., "The Complexity Trap", 2025): that
               history with every tool output but the newest M = 10 replaced by a placeholder
               (the run's line stays), then trimmed as ``newest`` trims, to hold the budget.

Every approach sends the same environment and history title, rendered as the session renders
them (RFC 0025): the bills compare how each keeps the history, not how it words the system
prompt.

Every request is serialised the same way before its tokens are compared (:func:`request_tokens`:
each message's role, then its content and its calls, each message encoded on its own as a
provider's chat format does), so the approaches are priced alike.

Cost (RFC 0021). A replay makes one request per call point for each approach, and a request
mostly repeats the one before it: the same messages, a few new ones. So each approach keeps its
previous request's messages encoded (:class:`_Encoded`), and a call encodes only the messages
that are new. Budget counts add per message (the renderer's blocks are additive, RFC 0002), so the
whole history is never counted again either: a replay costs O(new text) per call, not O(history).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence, Set
from typing import Any, Final

import attrs
import msgspec

from holon_ctx.ledger.records import Environment, Message, MessageRole, Tool, Turn
from holon_ctx.ledger.store import LedgerStore, StoredRecord
from holon_ctx.projection.base.framing import FramingRule
from holon_ctx.projection.base.items import BlockKind
from holon_ctx.projection.base.model import EpisodeSource, Section
from holon_ctx.projection.base.policy import Policy, TokenCaps
from holon_ctx.projection.measure.cost import CostMeter, PriceTable, RequestCost
from holon_ctx.projection.planning.manifest import SECTION_TITLES
from holon_ctx.projection.planning.projector import Projector
from holon_ctx.projection.planning.sections import environment_blocks
from holon_ctx.projection.provider_formats.native import (
    Part,
    call_ids,
    openai_messages,
    parts_of_blocks,
    system_part,
    text_part,
)
from holon_ctx.projection.provider_formats.providers import (
    framing_tokens,
    measure,
    to_openai_messages,
)
from holon_ctx.projection.rendering.render import Renderer
from holon_ctx.projection.session.session import Layout, SessionProjector
from holon_ctx.projection.session.session_state import entry_heading
from holon_ctx.tokens import TokenCounter, store_counter

__all__ = ["APPROACHES", "BASELINES", "MASKED_KEEP", "ApproachReport", "TurnRow", "call_points",
           "replay", "request_tokens"]

#: Tool outputs observation masking keeps whole (M = 10, as "The Complexity Trap" measured it).
MASKED_KEEP: Final = 10
#: The approaches a replay compares with the session, each with what it is in one line (the
#: CLI's ``--baseline`` choices and its legend read this table; a new baseline is a new row here
#: and a branch in :func:`replay`).
BASELINES: Final[dict[str, str]] = {
    "stateless": "holon-ctx's stateless projection, planned afresh each call (one request a turn)",
    "full": "the whole history, untrimmed (over the budget once it outgrows it: the cache's "
            "ceiling, not an option)",
    "newest": "keep the newest messages that fit the budget (LangChain's trim_messages, "
              "strategy \"last\")",
    "masking": f"observation masking: the last {MASKED_KEEP} tool outputs whole, older ones "
               "replaced by a placeholder (\"The Complexity Trap\", 2025), then the newest "
               "messages that fit the budget",
}
APPROACHES: Final = ("session", *BASELINES)
#: Caps of the untrimmed history: every body whole.
_UNCAPPED: Final = TokenCaps(**dict.fromkeys(attrs.asdict(TokenCaps()), 10**9))


@attrs.frozen
class TurnRow:
    """One request of one approach: its turn, its cost, and whether it re-planned."""

    turn: str
    cost: RequestCost
    #: Tokens as the budget counts them (may exceed the budget for ``full``).
    request_tokens: int
    #: Why the session re-planned at this call (``work_item_changed``, ``over_budget``, …).
    replan_reason: str | None = None
    #: A trim kept no message of the history: the request is the system message alone (the
    #: newest message did not fit, or no user message did to start on). It bills next to
    #: nothing and cannot act on the newest record; a bill compared with it says so.
    empty: bool = False


@attrs.frozen
class ApproachReport:
    name: str
    rows: tuple[TurnRow, ...]
    reuse: float
    billed_share: float
    sent_tokens: int
    billed: float
    replans: int
    over_budget: int

    @property
    def replans_per_100(self) -> float:
        return 100 * self.replans / len(self.rows) if self.rows else 0.0

    @property
    def empty_calls(self) -> int:
        """Calls whose request held no message of the history (:attr:`TurnRow.empty`)."""
        return sum(1 for row in self.rows if row.empty)


def _piece(msg: Any) -> str:
    """One message as the cache compares it: its role, its content, then its calls."""
    content = msg.get("content")
    calls = "".join(f"<|call {call['id']}|>{call['function']['name']}"
                    f"{call['function']['arguments']}" for call in msg.get("tool_calls") or ())
    return f"<|{msg['role']}|>{content if isinstance(content, str) else ''}{calls}"


def request_tokens(messages: Sequence[Any], counter: TokenCounter) -> list[int]:
    """The token stream a prefix cache compares: each message's role, content and calls, each
    message encoded on its own (so a message costs the same wherever it sits)."""
    return _Encoded(counter).tokens(messages)


class _Encoded:
    """The messages of an approach's previous request, encoded: a request that repeats most of
    the one before it encodes only its new messages (module docstring)."""

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        #: piece -> (its tokens, its budget cost); the previous request's, and this one's.
        self._previous: dict[str, tuple[list[int], int]] = {}
        self._current: dict[str, tuple[list[int], int]] = {}

    def _get(self, msg: Any) -> tuple[list[int], int]:
        key = _piece(msg)
        found = self._current.get(key) or self._previous.get(key)
        if found is None:
            # The budget's count of one message without the request's priming (measure's rule).
            found = (self.counter.encode(key), measure([msg], self.counter) - framing_tokens(0))
        self._current[key] = found
        return found

    def cost(self, msg: Any) -> int:
        """Tokens the message adds to a request as the budget counts them (framing included)."""
        return self._get(msg)[1]

    def tokens(self, messages: Sequence[Any]) -> list[int]:
        """The request's token stream; ends the request (what it held is kept for the next)."""
        out: list[int] = []
        for msg in messages:
            out.extend(self._get(msg)[0])
        self._previous, self._current = self._current, {}
        return out

    def sent(self, messages: Sequence[Any]) -> int:
        """The request's tokens as the budget counts them: :func:`measure`, by its parts."""
        return sum(self.cost(m) for m in messages) + framing_tokens(0)


class _History:
    """The whole history as native messages, grown turn by turn (for ``full``, ``newest`` and
    ``masking``)."""

    def __init__(self, store: LedgerStore, counter: TokenCounter) -> None:
        self.store = store
        self.counter = counter
        self.renderer = Renderer(counter, store.counter_identity, Policy(caps=_UNCAPPED),
                                 store=store)
        self.system: Part | None = None
        self.parts: list[list[Part]] = []  # per turn
        #: Each turn's records (``parts`` rendered them), and every tool run with its turn.
        self.runs: list[list[StoredRecord]] = []
        self.tools: list[tuple[int, str]] = []
        #: Each native call id and the turn its first call is in: a later call under it is text,
        #: as in a session's request (native.parts_of_blocks' ``used``).
        self.first_use: dict[str, int] = {}
        #: Masked turns' parts, by turn and the refs masked in it (a set that only grows).
        self._masked: dict[tuple[int, frozenset[str]], list[Part]] = {}
        # Its own renderer: a masked run has the ref of the whole one, and renderers memoise.
        self._masker = Renderer(counter, store.counter_identity, Policy(caps=_UNCAPPED),
                                store=store)
        self.pos = 0

    def grow(self, limit: int) -> None:
        run: list[StoredRecord] = []
        for stored in self.store.records_between(self.pos, limit):
            rec = stored.record
            if isinstance(rec, Environment):
                self.system = self._environment(stored)
                continue
            if isinstance(rec, Turn) and run:
                self._add(run)
                run = []
            run.append(stored)
        if run:
            self._add(run)
        self.pos = limit

    def _environment(self, env: StoredRecord) -> Part:
        """The environment as the session's stable prefix states it (RFC 0025: every approach
        sends the same environment, so the bills compare how each keeps the history)."""
        _, full, vouched = environment_blocks(env, self.renderer)
        title = SECTION_TITLES[Section.ENVIRONMENT] + "\n"
        text = title + "".join(b.text for b in full)
        tokens = self.counter.count(title) + sum(b.tokens for b in full)
        if vouched and not any(b.kind is BlockKind.FENCED for b in full):
            return system_part(text, tokens, (env.ref,))
        return text_part(text, tokens, (env.ref,), stable_end=True)

    def _add(self, run: list[StoredRecord]) -> None:
        previous = self.parts[-1][-1] if self.parts and self.parts[-1] else None
        parts = self._render(run, self.renderer, first=not self.parts, previous=previous,
                             used=self.first_use.keys())
        late = bool(run) and not isinstance(run[0].record, Turn) and bool(self.parts)
        turn = len(self.parts) - 1 if late else len(self.parts)
        for call_id in call_ids(parts):
            self.first_use.setdefault(call_id, turn)
        if late:
            self.parts[-1].extend(parts)  # late records of the turn before
            self.runs[-1].extend(run)
        else:
            self.parts.append(parts)
            self.runs.append(list(run))
        self.tools.extend((turn, s.ref) for s in run if isinstance(s.record, Tool))

    def _render(self, run: Sequence[StoredRecord], r: Renderer, *, first: bool,
                previous: Part | None, used: Set[str]) -> list[Part]:
        blocks = []
        for stored in run:
            if isinstance(stored.record, Turn):
                blocks.extend(entry_heading(r, stored.record, stored.ref))
            else:
                # As a record joins the session's history: the newest evidence verbatim (RFC
                # 0023), and so it stays (RFC 0025: the approaches differ in what they keep).
                blocks.extend(r.record_blocks(stored, {}, verbatim=True))
        records = {s.ref: s for s in run}
        if first:
            # The history's title and its trust note, as the session's history opens.
            blocks.insert(0, r.line(SECTION_TITLES[Section.RECENT_TURNS]))
        return parts_of_blocks(blocks, records, r.framing, previous=previous, used=used)

    def masked_messages(self, keep: int) -> list[Any]:
        """The history with every tool output but the newest ``keep`` replaced by a placeholder
        (observation masking: the run's line stays, its output goes)."""
        masked: dict[int, set[str]] = {}
        for turn, ref in self.tools[:max(0, len(self.tools) - keep)]:
            masked.setdefault(turn, set()).add(ref)
        flat: list[Part] = []
        for i, parts in enumerate(self.parts):
            refs = masked.get(i)
            flat.extend(parts if not refs else self._masked_parts(i, frozenset(refs)))
        return self._messages(flat)

    def _masked_parts(self, turn: int, refs: frozenset[str]) -> list[Part]:
        found = self._masked.get((turn, refs))
        if found is None:
            run = [_masked(s, self.counter) if s.ref in refs else s for s in self.runs[turn]]
            before = self.parts[turn - 1] if turn else []
            found = self._render(run, self._masker, first=turn == 0,
                                 previous=before[-1] if before else None,
                                 used={i for i, t in self.first_use.items() if t < turn})
            self._masked[(turn, refs)] = found
        return found

    def messages(self) -> list[Any]:
        return self._messages([p for turn in self.parts for p in turn])

    def _messages(self, flat: list[Part]) -> list[Any]:
        out: list[Any] = []
        if self.system is not None:
            out.append({"role": "system", "content": self.system.content})
        out.extend(openai_messages(flat))
        return out


def _masked(stored: StoredRecord, counter: TokenCounter) -> StoredRecord:
    """A tool run with its output replaced by the placeholder masking leaves in its place."""
    rec = stored.record
    assert isinstance(rec, Tool)
    lines = rec.output.count("\n") + (1 if rec.output and not rec.output.endswith("\n") else 0)
    placeholder = f"[older output omitted: {lines} lines]"
    return attrs.evolve(stored, record=msgspec.structs.replace(rec, output=placeholder,
                                                               output_ref=None),
                        tokens=counter.count(placeholder))


def _newest(messages: list[Any], budget: int, encoded: _Encoded) -> list[Any]:
    """trim_messages(strategy="last", include_system=True, start_on="human"), by hand."""
    system = [m for m in messages[:1] if m["role"] == "system"]
    history = messages[len(system):]
    room = budget - encoded.sent(system)
    kept: list[Any] = []
    for msg in reversed(history):
        cost = encoded.cost(msg)
        if cost > room:
            break
        kept.append(msg)
        room -= cost
    kept.reverse()
    while kept and kept[0]["role"] != "user":
        kept.pop(0)
    return system + kept


def replay(store: LedgerStore, budget_tokens: int, price: PriceTable,
           counter: TokenCounter | None = None, *,
           approaches: Sequence[str] = ("session",),
           session_projector: SessionProjector | None = None,
           framing: FramingRule | None = None,
           on_turn: Callable[[int, int], None] | None = None,
           episodes: EpisodeSource | None = None,
           before_call: Callable[[str, bool], None] | None = None) -> list[ApproachReport]:
    """Every model call of the ledger with each approach; a report per approach, in the order
    given (:func:`call_points` says where the calls are). ``counter`` defaults to the store's
    own; the session approach is ``session_projector``, else a messages session over the store
    with ``framing`` (a model's; default OpenAI's). ``episodes`` are recalled by the
    session and stateless projections; ``before_call(turn id, the previous call's plan left
    something out)`` runs before each call (a runtime compacting along the way grows them)."""
    counter = counter or store_counter(store)
    points = call_points(store)
    meters = {name: CostMeter(price) for name in approaches}
    encoded = {name: _Encoded(counter) for name in approaches}
    rows: dict[str, list[TurnRow]] = {name: [] for name in approaches}
    session = session_projector or SessionProjector(store, counter, layout=Layout.MESSAGES,
                                                    episodes=episodes, framing=framing)
    stateless = (Projector(store, counter, episodes=episodes) if "stateless" in approaches
                 else None)
    history = (_History(store, counter) if {"full", "newest", "masking"} & set(approaches)
               else None)
    # What before_call is told: the session's own plan when it is replayed (a runtime's
    # session compacts on that alone), else whether any approach's plan left something out.
    binds = session_binds = False
    for i, (turn, limit) in enumerate(points):
        if before_call is not None:
            before_call(turn, session_binds if "session" in approaches else binds)
        binds = session_binds = False
        whole: list[Any] = []
        if history is not None:
            history.grow(limit)
            whole = history.messages()
        for name in approaches:
            if name == "session":
                call = _session_call(session, budget_tokens, limit, counter)
                session_binds = call.binds
            elif name == "stateless":
                assert stateless is not None
                call = _stateless_call(stateless, budget_tokens, limit, counter)
            else:
                call = _history_call(name, history, whole, budget_tokens, encoded[name])
            binds = binds or call.binds
            cost = meters[name].add(encoded[name].tokens(call.messages), replanned=call.replanned,
                                    unwritten_tokens=call.unwritten)
            rows[name].append(TurnRow(turn=f"turn:{turn}", cost=cost, request_tokens=call.sent,
                                      replan_reason=call.why if call.replanned else None,
                                      empty=call.empty))
        if on_turn is not None:
            on_turn(i + 1, len(points))
    return [_report(name, meters[name], rows[name], budget_tokens) for name in approaches]


def _report(name: str, meter: CostMeter, rows: list[TurnRow], budget_tokens: int) -> ApproachReport:
    return ApproachReport(
        name=name, rows=tuple(rows), reuse=meter.reuse, billed_share=meter.billed_share,
        sent_tokens=meter.sent_tokens, billed=meter.billed, replans=meter.replans,
        over_budget=sum(1 for r in rows if r.request_tokens > budget_tokens))


@attrs.frozen
class _Call:
    """One approach's request at one call: what it sends, its size, and what the bill needs."""

    messages: list[Any]
    sent: int
    binds: bool = False
    replanned: bool = False
    why: str | None = None
    #: Tokens after the request's last cache breakpoint: never written to the cache.
    unwritten: int = 0
    #: No message of the history in the request (a trim that kept none).
    empty: bool = False


def _session_call(session: SessionProjector, budget_tokens: int, limit: int,
                  counter: TokenCounter) -> _Call:
    req = session.request(budget_tokens=budget_tokens, limit_pos=limit)
    # The current-state tail comes after the rolling breakpoint: never written.
    return _Call(messages=list(req.openai_messages()), sent=req.request_tokens, binds=req.binds,
                 replanned=req.replanned, why=req.replan_reason,
                 unwritten=counter.count(req.parts[-1].content) if req.has_tail else 0)


def _stateless_call(stateless: Projector, budget_tokens: int, limit: int,
                    counter: TokenCounter) -> _Call:
    projection = stateless.project(budget_tokens=budget_tokens - framing_tokens(),
                                   limit_pos=limit)
    messages = list(to_openai_messages(projection))
    # Its one breakpoint ends the stable part: the rest is never written.
    stable = projection.stable_prefix
    unwritten = (projection.used_tokens - counter.count(stable)
                 if stable and projection.text.startswith(stable) else projection.used_tokens)
    # Split at a section boundary, the messages count as the text does (providers).
    return _Call(messages=messages, sent=projection.used_tokens + framing_tokens(len(messages)),
                 binds=any(sec.omitted for sec in projection.manifest.sections),
                 unwritten=unwritten)


def _history_call(name: str, history: _History | None, whole: list[Any], budget_tokens: int,
                  encoded: _Encoded) -> _Call:
    """A baseline's request: the whole history, its newest messages within the budget, or
    those with older tool outputs masked."""
    if name == "full":
        return _Call(messages=whole, sent=encoded.sent(whole))
    if name == "masking":
        assert history is not None
        messages = _newest(history.masked_messages(MASKED_KEEP), budget_tokens, encoded)
    else:
        messages = _newest(whole, budget_tokens, encoded)
    return _Call(messages=messages, sent=encoded.sent(messages),
                 empty=any(m["role"] != "system" for m in whole)
                 and all(m["role"] == "system" for m in messages))


def call_points(store: LedgerStore) -> list[tuple[str, int]]:
    """Where a runtime calls the model, each as ``(current turn id, position limit)``: right
    before each assistant reply the ledger holds (as of the records before it), at the end of
    every turn that holds no reply (the call whose reply was not recorded), and at the end of the
    ledger (the next call)."""
    points: list[tuple[str, int]] = []
    turn: str | None = None
    replied = False
    for stored in store.records_between(0, store.end_pos()):
        rec = stored.record
        if isinstance(rec, Turn):
            if turn is not None and not replied:
                points.append((turn, stored.pos))
            turn, replied = rec.id, False
        elif turn is not None and isinstance(rec, Message) and rec.role is MessageRole.ASSISTANT:
            points.append((turn, stored.pos))
            replied = True
    if turn is not None:
        points.append((turn, store.end_pos()))
    return points
