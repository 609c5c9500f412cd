"""Every limit the projection applies, in one place, with its default and the reason for it.

A :class:`Policy` is handed to the :class:`~holon_ctx.projection.planning.projector.Projector` once; the
renderer, the section builders and the view read their limits from it and from nowhere else. All
values are budget-independent: a limit that moved with the budget would let a larger budget show
less (RFC 0002, monotonicity). Character limits bound one-line previews (``one_line``) of text
that is not the record's own fenced body; token caps bound record bodies, which are excerpted
(head and tail, with a note naming the full text) past their cap.
"""

from __future__ import annotations

import attrs

__all__ = ["Policy", "TextLimits", "TokenCaps", "WindowLimits"]


@attrs.frozen
class WindowLimits:
    """How the recent window is read: pages of ``page_turns`` turns, at most ``max_turns``."""

    page_turns: int = 64
    max_turns: int = 2048

    @property
    def max_pages(self) -> int:
        return max(1, self.max_turns // self.page_turns)


@attrs.frozen
class TokenCaps:
    """Tokens of one record body in a full form before it is excerpted (head and tail).

    The operator's words get the most room (they are instructions); a failed tool run more than a
    successful one (the error is what the next step needs); model-written text the least of the
    content kinds (it is inference, not fact).
    """

    operator: int = 2000
    tool: int = 500
    tool_failed: int = 700
    external: int = 600
    task: int = 600
    brief: int = 600
    assistant: int = 600
    system: int = 400
    #: The environment's runtime guidance (the stable prefix).
    guidance: int = 1500
    #: A pinned record shown in the work-refs section.
    pinned: int = 800
    #: The assistant message a short operator reply answers (the previous exchange).
    exchange: int = 600


@attrs.frozen
class TextLimits:
    """Characters of one-line previews on label lines (sanitised, cut with "…").

    Grouped by what they bound; the numbers are what the prompts were reviewed with (a shorter
    preview loses the detail that identifies the thing, a longer one crowds the line).
    """

    #: Runtime ids (task, wait, work item) written into a label line.
    ident: int = 60
    #: Tool names on a tool line, a frontier stub or the tools list; environment capabilities.
    tool_name: int = 40
    #: Tool names in a turn's one-line digest.
    tool_name_in_digest: int = 30
    #: A tool call's argument preview.
    args: int = 100
    #: A tool call's argument preview in a turn's one-line digest (a stub names the command).
    args_in_digest: int = 80
    #: File paths written by a tool run, on its line (at most ``files_on_line`` of them).
    path: int = 80
    files_on_line: int = 6
    #: File paths in the work-refs lists (one per line).
    path_in_list: int = 160
    #: File paths in the execution frontier's minimal form (one line naming them all).
    path_in_frontier_ref: int = 120
    #: A task result's output ref.
    output_ref: int = 80
    #: An external event's source on its fence label, and in a turn digest.
    source: int = 60
    source_in_digest: int = 40
    #: A turn's runtime-written trigger label.
    trigger_label: int = 160
    #: The operator's words quoted in a compact turn line.
    operator_excerpt: int = 160
    #: Wait conditions: on a wait record's line, in the compact and full work item, in work refs.
    wait_condition: int = 100
    wait_condition_compact: int = 160
    wait_condition_full: int = 300
    wait_condition_in_refs: int = 200
    #: Work item fields, compact and full forms.
    objective_compact: int = 300
    objective_full: int = 1200
    #: An objective at most this long is stated even when an operator message the prompt shows
    #: holds it word for word (a longer one names that message instead; RFC 0015, "said once").
    objective_spoken: int = 40
    next_todo: int = 160
    todo: int = 300
    plan_step: int = 300
    blocker_compact: int = 200
    blocker_full: int = 400
    completion_report: int = 600
    #: A work-item transition summarised on one line (inside a turn).
    objective_in_delta: int = 160
    blocker_in_delta: int = 120
    #: Environment workspace; an operator pin's note.
    workspace: int = 200
    pin_note: int = 200
    #: Governed control state (RFC 0004).
    idempotency_key: int = 160
    obligation: int = 300
    constraint: int = 400


@attrs.frozen
class Policy:
    """The projection's limits; ``Policy()`` is the reviewed default."""

    window: WindowLimits = WindowLimits()
    caps: TokenCaps = TokenCaps()
    text: TextLimits = TextLimits()
    #: Continuation-anchor links followed back to the operator turn that started a chain.
    anchor_hops: int = 16
    #: Newest operator pins the view fetches.
    pins: int = 16
    #: Episodes asked of the episode source per projection.
    recall: int = 12
    #: High turns per tier (RFC 0002, decision 8): the newest this many high turns anywhere in
    #: the history compete in tier 0 with window page 0, the next this many in tier 1, … — a
    #: page of high turns beside each page of recent turns.
    high_turns_per_tier: int = 64
    #: Lines a work-refs list shows in its compact form (the full form shows all).
    list_compact_lines: int = 5
    #: The execution frontier reads the work item's turns older than page 0 in one bounded query
    #: when the work item began at most this many turns before it (cost O(page + this)).
    frontier_scan_turns: int = 128
    #: File names the frontier's minimal (pinned) form lists; the full form lists every file.
    frontier_ref_files: int = 24
    #: Lines of output an earlier run of a command keeps when its next run printed something
    #: else (the lines that differ; its full text stays one ref away).
    changed_lines: int = 12
    #: Records a turn's full form shows besides the operator's words, the newest: a turn with
    #: more (a runtime that records a long piece of work as one turn of hundreds of tool runs)
    #: shows its operator's words, one counted line for its older records (each one ref away)
    #: and its newest this many. It bounds what one turn costs to render, so a re-plan inside a
    #: huge turn costs what one in a short turn does (RFC 0010, decision 7).
    turn_records: int = 48
