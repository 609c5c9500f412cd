"""Values the projection engine passes between its stages, and the manifest it returns.

Closed vocabularies are string enums so that manifests, tests and docs speak the same words.
"""

from __future__ import annotations

import bisect
from enum import IntEnum, StrEnum
from typing import Protocol

import attrs
import msgspec

from holon_ctx.ledger.facts import Priority

# Moved to the ledger (memory uses it too, RFC 0028); still importable from here.
from holon_ctx.ledger.units import TurnUnit

# The recall interface belongs to memory, the lower side (RFC 0028); importable from here too.
from holon_ctx.memory.interface import EpisodeSource, RecalledEpisode, RecallQuery

__all__ = [
    "SECTION_ORDER",
    "ControlHistory",
    "ControlSource",
    "ControlState",
    "EpisodeSource",
    "Form",
    "Moment",
    "Omission",
    "Priority",
    "RecallQuery",
    "RecalledEpisode",
    "Relation",
    "Section",
    "TurnUnit",
]


class Section(StrEnum):
    """Sections in render order: stable content first, the current input last (RFC 0002)."""

    ENVIRONMENT = "environment"
    WORK_ITEM = "work_item"
    WORK_REFS = "work_refs"
    EPISODES = "episodes"
    RECENT_TURNS = "recent_turns"
    CURRENT_INPUT = "current_input"


SECTION_ORDER: tuple[Section, ...] = tuple(Section)


class Form(IntEnum):
    """Representations of an item, from least to most tokens."""

    REF = 0
    COMPACT = 1
    FULL = 2

    @property
    def label(self) -> str:
        return _FORM_LABELS[self]


_FORM_LABELS: dict[Form, str] = {f: f.name.lower() for f in Form}


class Relation(StrEnum):
    """Why the current turn exists, decided from runtime facts (RFC 0002, "relation")."""

    NEW_OPERATOR_INTENT = "new_operator_intent"
    OPERATOR_REFINEMENT = "operator_refinement"
    OPERATOR_OVERRIDE = "operator_override"
    APPROVAL_DECISION = "approval_decision"
    TASK_RESULT_CONTINUATION = "task_result_continuation"
    TASK_RESULT = "task_result"
    EXTERNAL_CONTINUATION = "external_continuation"
    EXTERNAL_WAKE = "external_wake"
    TIMER_WAKE = "timer_wake"
    SCHEDULER_WAKE = "scheduler_wake"
    PROVIDER_RECOVERY = "provider_recovery"
    RUNTIME_RECOVERY = "runtime_recovery"
    EXTENSION_WAKE = "extension_wake"
    EXTENSION_CONTINUATION = "extension_continuation"


class Omission(StrEnum):
    """Reason codes for what a projection leaves out or shrinks."""

    BUDGET = "budget_exhausted"
    FOLDED = "folded_low_value"
    REPEATED_TOOL_CALL = "repeated_tool_call"
    COMPACTED = "compacted_for_budget"
    REF_ONLY = "ref_only_for_budget"
    CLIPPED = "clipped_to_fit"
    SUPERSEDED = "superseded_by_later_state"
    OTHER_WORK_ITEM = "owned_by_other_work_item"
    OUTSIDE_WINDOW = "outside_recent_window"
    #: An older record of a huge turn, counted on the turn's fold line (Policy.turn_records).
    EARLIER_IN_TURN = "earlier_record_of_huge_turn"


class SectionManifest(msgspec.Struct, kw_only=True):
    name: str
    representation: str
    allocated_tokens: int
    used_tokens: int
    selected: list[str]
    omitted: list[dict[str, str]]
    items: list[dict[str, object]] = []


class FoldManifest(msgspec.Struct, kw_only=True):
    first: str
    last: str
    count: int
    kinds: dict[str, int]
    refs: list[str] = []


class EpisodeManifest(msgspec.Struct, kw_only=True):
    ref: str
    covers: list[str]
    score: float
    representation: str = "full"


class Manifest(msgspec.Struct, kw_only=True):
    """The ``project --json`` contract (architecture.md); keys may be added, never changed."""

    budget_tokens: int
    used_tokens: int
    counter: str
    current_turn: str
    relation: str
    anchor_turn: str | None
    sections: list[SectionManifest]
    folded: list[FoldManifest]
    episodes: list[EpisodeManifest]
    text: str
    window: dict[str, object] = {}
    #: A session projection's epoch and cache figures (RFC 0010); None for a stateless one.
    session: dict[str, object] | None = None
    #: Tool-output lines shown once (RFC 0016), one entry per note in the prompt: ``{"ref":
    #: the output, "lines": N, "as_in": the output above that shows them}`` for a run another
    #: output printed, ``{"ref", "lines": the group's size, "times": copies}`` for copies in a
    #: row inside one output.
    repeated_lines: list[dict[str, object]] = []


@attrs.frozen
class ControlState:
    """Control state from the governed continuity store, never from a summary (RFC 0004).

    The projector pins it in the current-work-item section: obligations and exact constraints stay
    visible after compaction, and an unreconciled side effect becomes a blocking notice.
    """

    envelope_id: str | None
    obligations: tuple[str, ...]
    #: ``(ref, text)`` of each active exact constraint, as the governed store holds it.
    constraints: tuple[tuple[str, str], ...]
    #: ``(idempotency key, status)`` of each side effect that must be reconciled first.
    blocking: tuple[tuple[str, str], ...]
    #: ``(idempotency key, ref)`` of each side effect the governed store holds unresolved that a
    #: newer ledger record resolved (:func:`~holon_ctx.projection.base.waits.settle_control`).
    settled: tuple[tuple[str, str], ...] = ()
    #: ``(key, ref)`` of each pending obligation the governed store holds that the ledger resolved
    #: since (a wait answered or closed, a todo done, a blocker cleared, a pending call
    #: answered; :func:`~holon_ctx.projection.base.waits.settle_control`).
    settled_obligations: tuple[tuple[str, str], ...] = ()


@attrs.frozen
class ControlHistory:
    """Control states by ledger position (RFC 0020): ``at(pos)`` is the state of the newest
    entry at or before ``pos`` (None before the first). A projection as of a position reads it
    there, so what it states of the governed state is a function of the position, not of when
    it was asked for."""

    #: Ascending ledger positions (each the ledger's end when its state was sealed).
    positions: tuple[int, ...]
    states: tuple[ControlState | None, ...]

    @classmethod
    def constant(cls, state: ControlState | None) -> ControlHistory:
        """The same state at every position (a source that keeps no history)."""
        return cls((0,), (state,))

    def at(self, pos: int) -> ControlState | None:
        i = bisect.bisect_right(self.positions, pos)
        return self.states[i - 1] if i else None


@attrs.frozen
class Moment:
    """What a request's walk read that a compaction after it can still change (RFC 0020, RFC
    0024 decision 1): a compaction that runs with nothing appended reads the request's own ledger
    end, so its control snapshot and archive run count *at* the request's position. Another
    layout of the same request (the text view, made when first read) walks with this, so it
    shows what the messages did."""

    #: The governed control state by position, as the request read it.
    controls: ControlHistory
    #: The newest episode number the request could recall (None: the source keeps no bound).
    archive: int | None = None


class ControlSource(Protocol):
    """Where the projector gets control state from (see holon_ctx.compaction). A source may also
    offer ``control_history() -> ControlHistory`` (the state by ledger position); a session
    projection then reads each position's own state, else ``control_state()`` everywhere."""

    def control_state(self) -> ControlState | None: ...
