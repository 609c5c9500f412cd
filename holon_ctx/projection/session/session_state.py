r"""What a session projection's walk holds, and how a record joins it (RFC 0010).

A :class:`WalkState` is the current epoch: the parts its re-plan froze (stable prefix, then
history), the :class:`Segment`\ s appended since (one per run of records of a turn, re-made as
the run grows so a tool result joins the reply that called it), the current turn and its anchor,
and the execution frontier's running tally. :func:`append_record` renders one record into it,
once; :func:`session_manifest` says what a request made from it holds. :class:`Persisted` is the
frozen part as the epoch store keeps it (:mod:`holon_ctx.ledger.epochs`).

A little over ~400 lines: the public request types and the walk's state are one vocabulary.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from enum import StrEnum

import attrs
import msgspec

from holon_ctx.errors import InputError
from holon_ctx.ledger.epochs import EpochStart
from holon_ctx.ledger.records import Message, MessageRole, Turn
from holon_ctx.ledger.state import WaitState, WorkItemState
from holon_ctx.ledger.store import StoredRecord
from holon_ctx.projection.base.formats import label_value
from holon_ctx.projection.base.framing import Framing
from holon_ctx.projection.base.items import Block
from holon_ctx.projection.base.model import (
    FoldManifest,
    Form,
    Manifest,
    Section,
    SectionManifest,
    TurnUnit,
)
from holon_ctx.projection.base.provider_types import AnthropicRequest, OpenAIMessage
from holon_ctx.projection.base.relation import current_relation
from holon_ctx.projection.base.spans import spans_of
from holon_ctx.projection.base.waits import Settled
from holon_ctx.projection.planning.frontier import Tally
from holon_ctx.projection.planning.tail import Tail
from holon_ctx.projection.provider_formats.native import (
    Part,
    Role,
    anthropic_request,
    call_ids,
    framing_between,
    openai_messages,
    parts_of_blocks,
    text_part,
)
from holon_ctx.projection.rendering.folding import fold_item
from holon_ctx.projection.rendering.render import Renderer
from holon_ctx.projection.session.checkpoints import checkpoint_turn, opens_block
from holon_ctx.projection.session.persisted import PersistedPart

__all__ = [
    "Layout",
    "Persisted",
    "PersistedTally",
    "Segment",
    "SessionPolicy",
    "SessionRequest",
    "Snapshot",
    "WalkState",
    "append_fold",
    "append_record",
    "checkpoint_turn",
    "entry_heading",
    "is_reply",
    "opens_block",
    "parts_cost",
    "pending_line",
    "session_manifest",
]


class Layout(StrEnum):
    TEXT = "text"
    MESSAGES = "messages"


@attrs.frozen
class SessionPolicy:
    """How a session re-plans. ``low_water``: the most of the budget a re-plan fills (the rest is
    room for turns to append before the next one; RFC 0010, decision 5): the mark itself is
    derived per re-plan from what a re-plan costs and how fast the history grows (RFC 0025), and
    is this share only where the history grows slowly. ``entry_share``: the most of the budget
    one record may take when it joins the history (a longer body is shown as head and tail with
    its ref, like any capped body). ``cache_read`` and ``cache_write``: the provider's cache
    prices relative to uncached input that the mark is derived for (default Anthropic's, the
    dearest write premium of the published tables)."""

    low_water: float = 0.5
    entry_share: float = 0.25
    cache_read: float = 0.1
    cache_write: float = 1.25
    #: Every turn that opens a new block of this many turn numbers (``seq // checkpoint_turns``
    #: changes) re-plans, whatever the budget: the walk from such a *checkpoint* needs nothing
    #: before it, so a process with no saved state walks at most one block, never the whole
    #: ledger. One extra re-plan per block costs a fraction of a percent of the cache.
    checkpoint_turns: int = 512
    #: While the whole history fits, the request is the history: an epoch begun at the ledger's
    #: first turn keeps every record and states only what no record says (RFC 0025). False:
    #: every epoch is planned and ends with the full current-state tail (RFC 0010's layout).
    whole_history: bool = True

    @property
    def planned_entry_share(self) -> float:
        """The most of the budget one record may take as it joins a *planned* epoch's history
        (RFC 0025, decision 6): ``entry_share``, or less where cache writes are dear — the
        growth per call ``γ`` at which the derived low-water mark is still ``low_water``
        (``x² + ρ·γ·x = 1`` at ``x = low_water``, ``ρ = 2 (cache_write - cache_read) /
        cache_read``): 0.065 of the budget at Anthropic's prices, ``entry_share`` at OpenAI's.
        A longer body is clipped (head, tail and its ref) from the moment it is appended, so an
        epoch holds several steps of outputs large against the budget instead of re-planning
        every few calls; a whole epoch keeps ``entry_share`` (it sends what the baselines do)."""
        rho = 2 * (self.cache_write - self.cache_read) / self.cache_read
        steady = (1 - self.low_water ** 2) / (rho * self.low_water)
        return min(self.entry_share, steady)

    def __attrs_post_init__(self) -> None:
        if self.checkpoint_turns < 1:
            raise InputError(f"checkpoint_turns must be at least 1, got {self.checkpoint_turns}",
                             path="checkpoint_turns")
        if not 0.05 <= self.low_water <= 0.95:
            raise InputError(f"low_water must be between 0.05 and 0.95, got {self.low_water}",
                             path="low_water")
        if not 0 < self.cache_read < self.cache_write:
            raise InputError("cache prices must satisfy 0 < cache_read < cache_write, got "
                             f"{self.cache_read} and {self.cache_write}", path="cache_read")
        if not 0.01 <= self.entry_share <= 1.0:
            raise InputError(f"entry_share must be between 0.01 and 1, got {self.entry_share}",
                             path="entry_share")


@attrs.frozen
class SessionRequest:
    """One request of a session (see the module docstring)."""

    layout: Layout
    budget_tokens: int
    #: The counter's count of :attr:`text`.
    used_tokens: int
    #: Tokens as the budget counts the request: the text's (``text``), or the messages' with
    #: their framing and tool calls (``messages``,
    #: :func:`~holon_ctx.projection.provider_formats.providers.measure`).
    request_tokens: int
    parts: tuple[Part, ...]
    #: ``parts[:prefix_count]`` is the stable prefix, ``parts[prefix_count:frozen_count]`` the
    #: history the last re-plan froze, then the records appended since, then the tail (last).
    prefix_count: int
    frozen_count: int
    #: Index of the last history part (the rolling cache breakpoint goes after it).
    history_end: int
    #: Tokens of this request that the previous request of the session also began with (its
    #: frozen part and the entries it already held), when no re-plan came between.
    cached_tokens: int
    tail_tokens: int
    epoch: int
    replanned: bool
    replan_reason: str | None
    #: The prompt as one text: the text layout's; for ``messages``, the messages' contents in
    #: order (what the provider reads, without its role markers).
    text: str
    _make_manifest: Callable[[], Manifest] = attrs.field(alias="make_manifest", repr=False)
    #: The last re-plan left something out: the budget binds (a session then compacts before
    #: its next request, so aged-out turns compete as episodes).
    binds: bool = False
    #: The ledger position the request is as of (every record before it walked): another layout
    #: asked with ``limit_pos`` set to it shows the same records.
    limit_pos: int = 0
    #: The request ends with a current-state tail (``parts[-1]``). A *whole* epoch's request
    #: (the history holds every record: RFC 0025) usually has none: the history says it all.
    has_tail: bool = True
    #: The tail's blocks (``parts[-1]``'s text, block by block, each with its kind and trust):
    #: the CLI's preview tags the current state's lines from them (cli/session_view.py).
    tail_blocks: tuple[Block, ...] = attrs.field(default=(), repr=False, eq=False)
    #: What the walk read that a later compaction can change (``projection.model.Moment``):
    #: another layout asked with it shows the same state (RFC 0024 decision 1).
    moment: object = attrs.field(default=None, repr=False, eq=False)
    _made: list[Manifest] = attrs.field(factory=list, init=False, repr=False, eq=False)

    @property
    def manifest(self) -> Manifest:
        """What the request holds and why (made on first use: most runtimes never read it)."""
        if not self._made:
            self._made.append(self._make_manifest())
        return self._made[0]

    def openai_messages(self) -> list[OpenAIMessage]:
        return openai_messages(self.parts)

    def anthropic_request(self) -> AnthropicRequest:
        return anthropic_request(self.parts, rolling_after=self.history_end)

    def manifest_json(self) -> bytes:
        return msgspec.json.encode(self.manifest)

    def where(self, ref: str) -> str | None:
        """Which part of the request shows ``ref``: ``stable_prefix``, ``frozen_history``,
        ``appended``, ``current_state``, or None when it is not in the request."""
        for i, part in enumerate(self.parts):
            if ref in part.refs:
                return ("stable_prefix" if i < self.prefix_count else
                        "frozen_history" if i < self.frozen_count else
                        "current_state" if self.has_tail and i == len(self.parts) - 1
                        else "appended")
        return None


@attrs.define
class Segment:
    """Records of one turn appended in a row, and their parts (re-made as the segment grows, so
    a tool result joins the reply that called it), with their texts joined once."""

    turn_id: str | None
    records: list[StoredRecord]
    parts: list[Part]
    #: The records' blocks, each record's rendered once, when it joins (only the parts are
    #: re-made: a tool result attaches to the reply before it).
    blocks: list[Block] = attrs.Factory(list)
    tokens: int = 0
    text: str = ""
    content: str = ""
    content_tokens: int = 0

    def set_parts(self, parts: list[Part], tokens: int) -> int:
        """Replace the parts; returns the change in layout tokens."""
        delta = tokens - self.tokens
        self.parts, self.tokens = parts, tokens
        self.text = "".join(p.text for p in parts)
        self.content = "".join(p.content for p in parts)
        self.content_tokens = sum(p.content_tokens for p in parts)
        return delta


@attrs.define
class WalkState:
    """Where a session's walk stands: the epoch's frozen part, the segments appended since, the
    current turn and what the tail is made of."""

    key: str
    budget: int
    layout: Layout
    start: EpochStart
    frozen: list[Part]
    prefix_count: int
    frozen_tokens: int
    manifest: Manifest
    env_ref: str | None
    work_item_id: str | None
    shown: set[str]
    open_turn: str | None
    tally: Tally | None
    cover: str
    pos: int
    segments: list[Segment] = attrs.Factory(list)
    current: TurnUnit | None = None
    #: The turn ``current`` was judged beside (retention.judged_beside): past ticks and retries.
    current_beside: TurnUnit | None = None
    anchor: TurnUnit | None = None
    #: Frozen and appended tokens as of the last request made (for ``cached_tokens``).
    last_request_end: int = 0
    #: The tail as of ``pos`` (None: to be made again), and the governed state it was made with.
    tail: Tail | None = None
    tail_control: object = None
    #: What the kept tail was made for: whether it states the relation, anchor, work item and
    #: frontier (see ``whole``), and whether it ends the request (SessionProjector._tail).
    tail_stated: tuple[bool, bool] = (True, False)
    #: The budget the re-plan gave the planner (the low-water mark, or more for pinned turns).
    plan_budget: int = 0
    #: The low-water mark the re-plan derived (RFC 0025, decision 2).
    low_water_tokens: int = 0
    #: A *whole* epoch (RFC 0025): it began at the ledger's first turn and every record since
    #: joined its history, so the history says what a tail would (the work item's transitions,
    #: the anchor's words, every tool run). Its tail holds only what no record says; it does not
    #: re-plan for a work-item switch or a recalled episode; it ends when the history outgrows
    #: the budget (or at a checkpoint or an environment change).
    whole: bool = False

    #: Sum of the segments' layout tokens (kept as segments change).
    appended_total: int = 0
    #: A run of low-value turns (retries, ticks, recoveries) not rendered yet, each with the turn
    #: before it: it joins the history as one fold line when the run ends (a substantive record
    #: or turn arrives), and until then the tail counts it. So ticks never crowd the history
    #: between re-plans either, and the history stays append-only.
    pending: list[tuple[TurnUnit, TurnUnit | None]] = attrs.Factory(list)
    #: Folds appended since the re-plan (the manifest lists them with the frozen ones).
    folds: list[FoldManifest] = attrs.Factory(list)
    #: Side effects not resolved yet (key → the run's ref) and those runs, for the tail.
    unresolved: dict[str, str] = attrs.Factory(dict)
    #: Keys the frozen episodes state ``STILL OPEN`` (``Frozen.still_open``).
    still_open: frozenset[str] = frozenset()
    effect_runs: dict[str, StoredRecord] = attrs.Factory(dict)
    #: The frozen parts' texts and counts, joined once per epoch (see :meth:`frozen_sums`).
    _frozen_sums: tuple[str, str, int, int, Role | None] | None = None
    #: Every segment but the last is *closed* (only the last one is ever re-made): their parts,
    #: texts, contents and content tokens, kept as each closes, so that a request costs the new
    #: segment and the tail, not a pass over everything appended since the re-plan.
    closed_parts: list[Part] = attrs.Factory(list)
    closed_texts: list[str] = attrs.Factory(list)
    closed_contents: list[str] = attrs.Factory(list)
    closed_content_tokens: int = 0
    #: Native call ids before the last segment, read lazily, then kept (a repeat stays text).
    _used_ids: set[str] | None = None
    #: Refs of the records appended since the re-plan, in order (only ever appended to, so a
    #: request's manifest can take its prefix later: :class:`Snapshot`).
    appended_refs: list[str] = attrs.Factory(list)
    #: ``(work item id, its state, its open waits)`` as the tail last read them: they change only
    #: at a work-item or a wait record, which clears this (``None``: to be read again).
    tail_reads: tuple[str | None, WorkItemState | None, list[WaitState],
                      list[Settled]] | None = None
    #: What the history last said of the work item (work_state.work_key): a planned epoch
    #: appends its lines again when this changes (RFC 0025, decision 5).
    work_stated: Hashable = None

    def appended_tokens(self) -> int:
        return self.appended_total

    def freeze(self, part: Part, framing: Framing) -> None:
        """End the frozen history with ``part`` (a re-plan's work state, RFC 0025)."""
        self.frozen_tokens += parts_cost([part], self.frozen_sums()[4], self.layout, framing)
        self.frozen.append(part)
        self._frozen_sums = self._used_ids = None

    def append_state(self, part: Part, framing: Framing) -> None:
        """Append ``part``, a statement of no record's (the work state), as a segment of its
        own (the caller sets ``open_turn``: what follows a statement says whose it is)."""
        seg = Segment(turn_id=None, records=[], parts=[])
        previous = self.last_role()
        self.add_segment(seg)
        self.appended_total += seg.set_parts([part], parts_cost([part], previous, self.layout,
                                                                framing))

    def add_segment(self, seg: Segment) -> None:
        """Append ``seg``; the segment it follows is closed (see ``closed_parts``)."""
        if self.segments:
            last = self.segments[-1]
            self.closed_parts.extend(last.parts)
            self.closed_texts.append(last.text)
            self.closed_contents.append(last.content)
            self.closed_content_tokens += last.content_tokens
            if self._used_ids is not None:
                self._used_ids |= call_ids(last.parts)
        self.segments.append(seg)

    def used_call_ids(self) -> set[str]:
        if self._used_ids is None:
            self._used_ids = call_ids((*self.frozen, *self.closed_parts))
        return self._used_ids

    def frozen_sums(self) -> tuple[str, str, int, int, Role | None]:
        """``(text, content, content tokens, prefix tokens, last role)`` of the frozen part."""
        if self._frozen_sums is None:
            last = next((p.role for p in reversed(self.frozen) if p.content or p.calls), None)
            text_layout = self.layout is Layout.TEXT
            prefix = sum(p.text_tokens if text_layout else p.content_tokens
                         for p in self.frozen[:self.prefix_count])
            self._frozen_sums = ("".join(p.text for p in self.frozen),
                                 "".join(p.content for p in self.frozen),
                                 sum(p.content_tokens for p in self.frozen), prefix, last)
        return self._frozen_sums

    def last_role(self) -> Role | None:
        for seg in reversed(self.segments):
            for part in reversed(seg.parts):
                if part.content or part.calls:
                    return part.role
        return self.frozen_sums()[4]


class PersistedTally(msgspec.Struct, frozen=True):
    done: int
    failed: int
    pending: int
    run_keys: list[tuple[str, str]]
    files: dict[str, list[str]]
    #: ``Tally.pending_calls`` and ``answered`` (empty in an epoch saved before they were kept).
    pending_calls: dict[str, str] = {}
    answered: dict[str, str] = {}


class Persisted(msgspec.Struct, frozen=True):
    """The frozen part of an epoch as :class:`~holon_ctx.ledger.epochs.EpochState` stores it."""

    #: The parts, each message content stored only where it is not the text (:mod:`.persisted`).
    parts: list[PersistedPart]
    prefix_count: int
    frozen_tokens: int
    manifest: Manifest
    env_ref: str | None
    work_item_id: str | None
    shown: list[str]
    open_turn: str | None
    tally: PersistedTally | None
    cover: str
    plan_budget: int
    #: Unresolved side effects: key → the run's ref.
    unresolved: dict[str, str] = {}
    whole: bool = False
    low_water_tokens: int = 0
    #: ``WalkState.still_open``, sorted (empty in an epoch saved before it was kept).
    still_open: list[str] = []


def append_record(state: WalkState, stored: StoredRecord, r: Renderer, *, new_turn: bool) -> None:
    """Render ``stored`` into the history: a new segment, or the last one re-made (``r`` is the
    renderer of records joining the history)."""
    rec = stored.record
    turn_id = rec.id if isinstance(rec, Turn) else getattr(rec, "turn_id", None)
    last = state.segments[-1] if state.segments else None
    if new_turn or last is None or last.turn_id != turn_id or turn_id is None:
        seg = Segment(turn_id=turn_id, records=[stored], parts=[])
        state.add_segment(seg)
        if not isinstance(rec, Turn) and turn_id is not None and turn_id != state.open_turn:
            # A late record of an earlier turn says whose it is, for as long as the segment
            # grows (decided when the segment opens: it must stay a prefix of what follows).
            seg.blocks.append(r.heading(f"turn:{turn_id} (continued)", [f"turn:{turn_id}"]))
    else:
        seg = last
        seg.records.append(stored)
    state.appended_refs.append(stored.ref)
    if turn_id is not None and isinstance(seg.records[0].record, Turn):
        state.shown.add(turn_id)  # the turn from its heading on (a late record alone is not)
    # A record appended is the newest evidence when it is sent, and what was sent never changes
    # until the next re-plan: its tool output keeps every line (RFC 0023); the re-plan that
    # lays it out again among older turns folds its repeated lines then.
    seg.blocks.extend(entry_heading(r, rec, stored.ref, _turn_above(state, seg))
                      if isinstance(rec, Turn) else r.record_blocks(stored, {}, verbatim=True))
    records = {s.ref: s for s in seg.records}
    previous = _last_part_before(state, seg)
    parts = parts_of_blocks(seg.blocks, records, r.framing, previous=previous,
                            used=state.used_call_ids())
    state.appended_total += seg.set_parts(
        parts, parts_cost(parts, previous.role if previous else None, state.layout, r.framing))
    if turn_id is not None:
        state.open_turn = turn_id


def _turn_above(state: WalkState, seg: Segment) -> Turn | None:
    """The turn of the appended segment right before ``seg`` when that segment opened with its
    heading (None after a re-plan, or after a late record's segment: the heading says all)."""
    segments = state.segments
    i = len(segments) - 1
    while i >= 0 and segments[i] is not seg:
        i -= 1
    if i <= 0:
        return None
    first = segments[i - 1].records[0].record if segments[i - 1].records else None
    return first if isinstance(first, Turn) else None


def _last_part_before(state: WalkState, seg: Segment) -> Part | None:
    for other in reversed(state.segments):
        if other is seg:
            continue
        for part in reversed(other.parts):
            if part.content or part.calls:
                return part
    for part in reversed(state.frozen):
        if part.content or part.calls:
            return part
    return None


def parts_cost(parts: list[Part], previous: Role | None, layout: Layout, framing: Framing) -> int:
    """Tokens ``parts`` add as ``layout`` counts them (messages: under ``framing``), after a part
    of role ``previous``."""
    if layout is Layout.TEXT:
        return sum(p.text_tokens for p in parts)
    total = 0
    role = previous
    for part in parts:
        total += framing_between(framing, role, part) + part.content_tokens + part.call_tokens
        if part.content or part.calls:
            role = part.role
    return total


def session_manifest(snap: Snapshot, tail: Tail, text: str, used: int, request_tokens: int,
                     cached: int, replanned: bool, reason: str | None, *,
                     layout: Layout) -> Manifest:
    """The manifest of one request: the frozen part's, the appended refs added to the recent
    turns, the tail as ``current_state``, and the session's figures under ``session``."""
    sections: list[SectionManifest] = []
    for sec in snap.frozen.sections:
        if sec.name in (Section.WORK_ITEM.value, Section.WORK_REFS.value,
                        Section.CURRENT_INPUT.value):
            continue  # the tail states these (current_state, below)
        if sec.name == Section.RECENT_TURNS.value and snap.appended_refs:
            # Appended records came after the re-plan: none is among the frozen refs.
            sec = msgspec.structs.replace(
                sec, used_tokens=sec.used_tokens + snap.appended_tokens,
                selected=[*sec.selected, *snap.appended_refs])
        sections.append(sec)
    sections.append(SectionManifest(name="current_state", representation="compact",
                                    allocated_tokens=tail.tokens, used_tokens=tail.tokens,
                                    selected=list(tail.refs), omitted=[]))
    cur = snap.current
    assert cur is not None
    return msgspec.structs.replace(
        snap.frozen, budget_tokens=snap.budget, used_tokens=used, current_turn=cur.ref,
        folded=[*snap.frozen.folded, *snap.folds],
        relation=current_relation(cur).value,
        anchor_turn=snap.anchor.ref if snap.anchor else None, sections=sections,
        text=text,
        session={"layout": layout.value, "request_tokens": request_tokens,
                 "epoch": snap.start.epoch,
                 "epoch_started_at": f"turn:{snap.start.turn_id}",
                 "epoch_reason": snap.start.reason,
                 "replanned": replanned, "replan_reason": reason,
                 "low_water_tokens": snap.low_water_tokens,
                 "plan_budget_tokens": snap.plan_budget,
                 "stable_prefix_tokens": snap.prefix_tokens,
                 "frozen_tokens": snap.frozen_tokens,
                 "cached_tokens": cached, "tail_tokens": tail.tokens,
                 "appended_records": len(snap.appended_refs)})


@attrs.frozen
class Snapshot:
    """What a request's manifest is made of, as the request was made."""

    frozen: Manifest
    budget: int
    start: EpochStart
    plan_budget: int
    low_water_tokens: int
    frozen_tokens: int
    prefix_tokens: int
    appended_tokens: int
    #: The walk's :attr:`WalkState.appended_refs` and how many of them the request holds (the
    #: list only grows, so its prefix is taken when the manifest is made, if ever).
    appended_log: list[str]
    appended_count: int
    current: TurnUnit | None
    anchor: TurnUnit | None
    folds: list[FoldManifest] = attrs.Factory(list)

    @property
    def appended_refs(self) -> list[str]:
        return self.appended_log[:self.appended_count]


def entry_heading(r: Renderer, turn: Turn, ref: str, previous: Turn | None = None) -> list[Block]:
    """A turn's heading as it joins the history: only facts that never change (its ref, trigger,
    anchor link, work item, outcome) — nothing that changes as the turn ages. When ``previous``
    (the turn whose heading the history shows right above, appended before it) has the same
    trigger, anchor and work item, the heading is the ref alone: an agent loop's steps say
    those once (RFC 0019), and what is above never changes either."""
    same = (previous is not None and previous.trigger == turn.trigger
            and previous.anchor_turn_id == turn.anchor_turn_id
            and previous.work_item_id == turn.work_item_id)
    parts = [ref] if same else [ref, turn.trigger]
    if turn.anchor_turn_id and not same:
        parts.append(f"continues turn:{turn.anchor_turn_id}")
    if turn.work_item_id and not same:
        parts.append(f"work item {label_value(turn.work_item_id, r.chars.ident)}")
    if turn.outcome:
        parts.append(f"outcome {turn.outcome.value}")
    blocks = [r.heading(" · ".join(parts), [ref])]
    if turn.label:
        blocks.append(r.line(f"trigger: {label_value(turn.label, r.chars.trigger_label)}"))
    return blocks


def is_reply(stored: StoredRecord) -> bool:
    rec = stored.record
    return isinstance(rec, Message) and rec.role is MessageRole.ASSISTANT


def append_fold(state: WalkState, r: Renderer, facts: Callable[[TurnUnit], list[str]]) -> None:
    """The pending run of low-value turns joins the history as one fold line (if there is one)."""
    if not state.pending:
        return
    run = [unit for unit, _ in state.pending]
    item, fold = fold_item(r, run, facts, order=0, tier=0)
    line = item.forms[Form.COMPACT]
    parts = [text_part(line.text, line.tokens, spans=spans_of(line.blocks))]
    previous = _last_part_before(state, Segment(turn_id=None, records=[], parts=[]))
    seg = Segment(turn_id=None, records=[], parts=[])
    state.add_segment(seg)
    state.appended_total += seg.set_parts(
        parts, parts_cost(parts, previous.role if previous else None, state.layout, r.framing))
    state.folds.append(fold)
    state.pending.clear()
    state.open_turn = None


def pending_line(r: Renderer, state: WalkState,
                 facts: Callable[[TurnUnit], list[str]]) -> Block | None:
    """The tail's line for a run of low-value turns still going on (None: no such run)."""
    if not state.pending:
        return None
    run = [unit for unit, _ in state.pending]
    item, _ = fold_item(r, run, facts, order=0, tier=0)
    text = item.forms[Form.COMPACT].text.strip().removeprefix("- ")
    return r.line(f"{text}; the run goes on (one line in the history when it ends)")
