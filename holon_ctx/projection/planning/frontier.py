"""The execution frontier: the current work item's tool runs, files written and superseded re-runs.

An agent loop re-runs the same command (``pytest -q``) many times; only the latest run of a
command says where things stand, but an earlier run that printed something else says what
changed (a reproduction script's FAILURE before the fix). :func:`frontier` collects the work
item's tool runs (oldest first) and compares each run of a command (:attr:`Tool.run_key`) with
the next run of it in a later turn:

* a later run (in another turn) had the same result (:func:`~.folding.same_result`: status,
  exit code and every printed character) — the earlier run is *superseded*: its turn shows a
  one-line stub naming the latest such run, and the manifest reports the fold;
* otherwise, when the next run printed something else — the earlier run is *changed*: its turn
  shows its status and exit code and only the lines of its output the next run did not print
  (key lines such as errors first when they must be cut), fenced like any tool output, with
  the ref of its full text.

The pinned work-refs line counts runs, failures, repeats and pending calls and names every file
the work item wrote.

Budget-independent by construction: it reads page 0, the point-query turns and at most one
bounded query (:attr:`Policy.frontier_scan_turns`), never a page the planner loads on demand.
"""

from __future__ import annotations

from itertools import pairwise

import attrs

from holon_ctx.ledger.records import Tool
from holon_ctx.ledger.store import LedgerStore, StoredRecord
from holon_ctx.memory.unresolved import call_key
from holon_ctx.projection.base.formats import label_value, run_status
from holon_ctx.projection.base.items import Block, Item, Rendered
from holon_ctx.projection.base.model import Form, Priority, Section, TurnUnit
from holon_ctx.projection.base.policy import Policy
from holon_ctx.projection.planning.pins import SLOTS, Slot
from holon_ctx.projection.planning.view import View
from holon_ctx.projection.rendering.folding import result_key, same_result
from holon_ctx.projection.rendering.render import Instead, Renderer

__all__ = ["Frontier", "Tally", "files_line", "frontier"]


@attrs.frozen
class Frontier:
    """Tool runs of the current work item (or of the turns in view), oldest first."""

    runs: tuple[StoredRecord, ...]
    complete: bool
    since: str | None
    #: Earlier run ref → the last run, in another turn, of the stretch of runs of the same
    #: command that printed the same result.
    superseded: dict[str, str]
    #: Earlier run ref → the next run of the same command, in another turn, whose result differs.
    changed: dict[str, str] = attrs.field(factory=dict)

    def reruns(self) -> dict[str, list[str]]:
        """The latest run's ref → the refs of the earlier identical runs it supersedes."""
        out: dict[str, list[str]] = {}
        for ref, last in self.superseded.items():
            out.setdefault(last, []).append(ref)
        return out

    def stubs(self, unit: TurnUnit, r: Renderer) -> dict[str, Instead]:
        """What ``unit`` shows instead of the full output of each run a later run re-ran: a
        one-line stub for an identical result, the lines that differ for a changed one.

        Remembered in the renderer's memo under every input: the turn (records never change; a
        turn only gains them, so its ref and record count name them) and, for each of its runs,
        the run that supersedes it or the next run it is compared with. A re-plan asks for the
        stubs of every turn of its window, and most of them are the last re-plan's (~1 ms of a
        re-plan at 100k messages went to remaking them)."""
        links = tuple((s.ref, self.superseded.get(s.ref), self.changed.get(s.ref))
                      for s in unit.records if isinstance(s.record, Tool))
        if not any(later or nxt for _, later, nxt in links):
            return {}
        return dict(r.memo(("frontier_stubs", unit.ref, len(unit.records), links),
                           lambda: tuple(self._stubs(unit, r).items())))

    def _stubs(self, unit: TurnUnit, r: Renderer) -> dict[str, Instead]:
        out: dict[str, Instead] = {}
        by_ref: dict[str, StoredRecord] | None = None
        for stored in unit.records:
            rec = stored.record
            if not isinstance(rec, Tool):
                continue
            later = self.superseded.get(stored.ref)
            if later is not None:
                out[stored.ref] = (
                    f"{r.call_shown(rec, r.shown_above(unit, stored.ref))} → "
                    f"{run_status(rec.status.value, rec.exit_code)}{r.files_written(rec)}; "
                    f"output folded: same as its re-run {later}")
                continue
            nxt = self.changed.get(stored.ref)
            if nxt is None:
                continue
            by_ref = by_ref if by_ref is not None else {s.ref: s for s in self.runs}
            next_run = by_ref.get(nxt)
            if next_run is not None and isinstance(next_run.record, Tool):
                out[stored.ref] = r.tool_changed(stored, next_run,
                                                 r.shown_above(unit, stored.ref))
        return out

    def tally(self) -> Tally:
        """The counts and files the work-refs line states (see :class:`Tally`)."""
        tally = Tally()
        for stored in self.runs:
            tally.add(stored)
        return tally

    def item(self, r: Renderer, wid: str, policy: Policy) -> Item | None:
        """The pinned work-refs line: runs, failures, repeats, pending; every file written."""
        if not self.runs:
            return None
        cover = "" if self.complete else (
            f"; counts cover {self.since or 'the turns in view'} onward (the work item began more "
            f"than {policy.frontier_scan_turns} turns before the recent window)")
        minimal, full = self.tally().forms(r, wid, policy, cover)
        slot: Slot = SLOTS["frontier"]
        return Item(key="work_refs:frontier", section=Section.WORK_REFS,
                    priority=Priority.PINNED, reasons=("execution_frontier",), order=slot.order,
                    position=slot.position, forms={Form.REF: minimal, Form.FULL: full}, refs=(),
                    kind="work_refs", whole=True)


@attrs.define
class Tally:
    """What the frontier line counts, kept up to date one tool run at a time (a session
    projection adds the runs it appends instead of reading the work item's runs again)."""

    done: int = 0
    failed: int = 0
    pending: int = 0
    run_keys: set[tuple[str, str]] = attrs.Factory(set)
    #: File path → refs of the runs that wrote it, in the order last written.
    files: dict[str, list[str]] = attrs.Factory(dict)
    #: Call key (:func:`~holon_ctx.memory.unresolved.call_key`) → the ref of its pending run,
    #: for the calls still pending.
    pending_calls: dict[str, str] = attrs.Factory(dict)
    #: A pending run's ref → the ref of the later run of the same call that answered it: no
    #: longer counted pending, and named on the line (its turn may still show ``→ pending``
    #: while the answer is left out for room; issue 25, item 2).
    answered: dict[str, str] = attrs.Factory(dict)

    def add(self, stored: StoredRecord) -> None:
        rec = stored.record
        assert isinstance(rec, Tool)
        key = call_key(rec, stored.ref)
        if rec.pending:
            self.pending += 1
            self.pending_calls[key] = stored.ref
        else:
            self.done += 1
            self.failed += rec.failed
            self.run_keys.add(rec.run_key)
            asked = self.pending_calls.pop(key, None)
            if asked is not None:
                self.pending -= 1
                self.answered[asked] = stored.ref
        for path in rec.files_written:
            # Kept in the order last written: a list cut to its newest files keeps the file
            # being edited now.
            self.files[path] = [*self.files.pop(path, []), stored.ref]

    def copy(self) -> Tally:
        """An independent copy (a walk adds to it; the re-plan's stays as planned)."""
        return Tally(self.done, self.failed, self.pending, set(self.run_keys),
                     {k: list(v) for k, v in self.files.items()}, dict(self.pending_calls),
                     dict(self.answered))

    def answered_note(self) -> str:
        """``; pending tool:x5 answered by tool:x9``: the newest :data:`ANSWERED_NAMED` pending
        calls a later run answered, said where the counts are (empty when none)."""
        if not self.answered:
            return ""
        named = list(self.answered.items())[-ANSWERED_NAMED:]
        more = len(self.answered) - len(named)
        return ("; pending " + ", ".join(f"{asked} answered by {by}" for asked, by in named)
                + (f" (+{more} more answered)" if more else ""))

    def forms(self, r: Renderer, wid: str, policy: Policy, cover: str = "",
              ) -> tuple[Rendered, Rendered]:
        """The minimal form (counts and every file named on one line) and the full form (each
        file with the run that wrote it last)."""
        head, named = self._minimal(r, wid, policy, cover)
        lines = [head]
        if self.files:
            # The title says once what the ref beside each file is (RFC 0015: a label says a
            # thing once, not on every line of a list).
            lines.append(r.line("files modified (each with the run that wrote it last):"))
            lines.extend(r.line(f"- {label_value(path, policy.text.path_in_list, marked=True)} ({refs[-1]}"
                                + (f", {len(refs)} writes)" if len(refs) > 1 else ")"))
                         for path, refs in self.files.items())
        return r.rendered([head, *named]), r.rendered(lines)

    def minimal(self, r: Renderer, wid: str, policy: Policy, cover: str = "") -> Rendered:
        """The minimal form alone (what a session projection's tail shows every request)."""
        head, named = self._minimal(r, wid, policy, cover)
        return r.rendered([head, *named])

    def _minimal(self, r: Renderer, wid: str, policy: Policy,
                 cover: str) -> tuple[Block, list[Block]]:
        repeated = self.done - len(self.run_keys)
        head = r.line(f"execution frontier for {label_value(wid, policy.text.ident)}: {self.done} "
                      f"tool runs ({self.failed} failed, {repeated} re-runs of an earlier "
                      "command" + (f", {self.pending} pending" if self.pending else "")
                      + f"); {len(self.files)} files modified{cover}{self.answered_note()}")
        # The minimal form names the files too (the artifact trail is what a step must not lose);
        # the full form adds who wrote each last and how often. The line changes only when a new
        # file is written, so it is rendered once per set of files.
        limit = policy.frontier_ref_files
        names = tuple(self.files)

        def named_line() -> list[Block]:
            return [r.line(files_line(self.files, limit, policy.text.path_in_frontier_ref,
                                      marked=True))]
        named = r.memo(("frontier_files", names, limit), named_line) if names else []
        return head, named


#: Pending calls a later run answered that the frontier line names (the newest; the rest counted).
ANSWERED_NAMED = 3

#: Refs a cut files line names for the files it leaves out.
_OMITTED_REFS = 5


def files_line(files: dict[str, list[str]], limit: int, path_chars: int,
               *, marked: bool = False) -> str:
    """``files modified: …`` naming the ``limit`` files written last (the file being edited now
    among them); past ``limit`` it says how many earlier files it leaves out and the refs of the
    runs that wrote them (each run's line names its files). Each path is a label value
    (:func:`~holon_ctx.projection.base.formats.label_value`; ``marked``: as there, for a renderer's
    line)."""
    names = list(files)
    shown = ", ".join(label_value(p, path_chars, marked=marked) for p in names[-limit:])
    omitted = names[:-limit] if len(names) > limit else []
    if not omitted:
        return f"files modified: {shown}"
    refs = list(dict.fromkeys(files[p][-1] for p in omitted))
    named = ", ".join(refs[-_OMITTED_REFS:]) + (", …" if len(refs) > _OMITTED_REFS else "")
    return (f"files modified: {shown}; {len(omitted)} written earlier not named here "
            f"(written by {named})")


def frontier(store: LedgerStore | None, view: View, units: list[TurnUnit], wid: str | None,
             policy: Policy) -> Frontier:
    """The tool runs of work item ``wid`` (see :attr:`Policy.frontier_scan_turns`)."""
    scope = [u for u in units if not wid or u.turn.work_item_id in (wid, None)]
    runs: dict[str, StoredRecord] = {r.ref: r for u in scope for r in u.records
                                     if isinstance(r.record, Tool)}
    complete = view.first_page.reached_start
    if store is not None and view.work_item is not None and not complete:
        complete = _add_older_runs(store, view, view.work_item.first_ref, wid,
                                   policy.frontier_scan_turns, runs)
    ordered = tuple(sorted(runs.values(), key=lambda r: r.pos))
    superseded, changed = _compare_reruns(ordered)
    since = None if complete else (scope[0].ref if scope else None)
    return Frontier(runs=ordered, complete=complete, since=since, superseded=superseded,
                    changed=changed)


def _add_older_runs(store: LedgerStore, view: View, first_ref: str, wid: str | None, scan: int,
                    runs: dict[str, StoredRecord]) -> bool:
    """Add to ``runs`` the work item's tool runs before the window, when its first record is at
    most ``scan`` turns before it; whether the runs are then complete."""
    oldest = min((u.turn.seq for u in view.window), default=view.current.turn.seq)
    first = store.get(first_ref)
    if first is None or first.turn_seq is None:
        return False
    if first.turn_seq >= oldest:
        return True
    turns = store.turns_before(oldest, scan + 1, view.limit_pos)
    if len(turns) > scan and min(t.turn_seq or 0 for t in turns) > first.turn_seq:
        return False
    keep = {t.turn_seq for t in turns if (t.turn_seq or 0) >= first.turn_seq
            and getattr(t.record, "work_item_id", None) in (wid, None)}
    for older in store.records_of_turns(first.turn_seq, oldest - 1, view.limit_pos):
        if isinstance(older.record, Tool) and older.turn_seq in keep:
            runs.setdefault(older.ref, older)
    return True


def _compare_reruns(ordered: tuple[StoredRecord, ...]) -> tuple[dict[str, str], dict[str, str]]:
    """``(superseded, changed)`` of :class:`Frontier` for runs in ledger order.

    A finished run that a later run of the same command, in another turn, repeated with the same
    result is superseded by the latest such run; any other run that a later run of the command
    followed is changed, and compared with the next run. A re-run in the same turn is left to
    the turn's own repeat fold (:func:`~.folding.tool_repeats`).
    """
    by_key: dict[tuple[str, str], list[StoredRecord]] = {}
    for stored in ordered:
        if isinstance(stored.record, Tool) and not stored.record.pending:
            by_key.setdefault(stored.record.run_key, []).append(stored)
    superseded: dict[str, str] = {}
    changed: dict[str, str] = {}
    for runs in by_key.values():
        latest = {result_key(_tool(s)): s for s in runs}
        for stored, nxt in pairwise(runs):
            rec = _tool(stored)
            same = latest[result_key(rec)]
            if same is not stored and _turn(same) != rec.turn_id:
                superseded[stored.ref] = same.ref
            elif not same_result(rec, _tool(nxt)) and _turn(nxt) != rec.turn_id:
                changed[stored.ref] = nxt.ref
    return superseded, changed


def _tool(stored: StoredRecord) -> Tool:
    assert isinstance(stored.record, Tool)
    return stored.record


def _turn(stored: StoredRecord) -> str | None:
    return _tool(stored).turn_id
