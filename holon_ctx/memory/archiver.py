"""The Archiver: turns that aged out of the recent window become episodes, exactly once.

Theory of operation. ``archive()`` finds the *horizon* H, the oldest of the ``recent_turns``
newest turns; every turn older than H has aged out. It reads the ledger forward by position, from
the archival frontier (the first turn after the last one already in an episode) to H's settled
records, a page of records at a time, feeds the turns to the
:class:`~holon_ctx.memory.boundaries.Segmenter` and builds an episode for every range that closes
before H. H itself is only look-ahead: it can close the range before it, never join an
episode, so a range is archived only once its end is certain.

*Settled records.* A turn's records are those appended before the next turn began (``pos`` below
the next turn's position). A turn is read only when its next turn exists, so what an episode
covers never changes afterwards: archiving turn by turn and ``rebuild()`` from scratch give the
same ranges, bytes and digests.

*Resolutions.* After each run, unresolved items of stored episodes are checked against the
ledger: a later tool run that settles a call is recorded with its exact position; a wait, todo or
blocker seen resolved is recorded with the run's position as an upper bound. Recall re-checks
anything not known resolved before the position it projects at.

Cost: a run reads only the records from the frontier to the look-ahead turn (what it archives, the
range still open and the recent window), so archiving costs O(size of the archived range) however
long the history before it; the open-item check costs O(open items). A long imported history is
archived in one run, in bulk (``Session.import_history``, RFC 0026).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Final

import attrs
import msgspec

from holon_ctx.errors import InputError
from holon_ctx.ledger.answers import answered_waits
from holon_ctx.ledger.compaction_lock import appends_held
from holon_ctx.ledger.limits import resolve_limit
from holon_ctx.ledger.records import Tool, Turn
from holon_ctx.ledger.state import WorkItemState
from holon_ctx.ledger.store import LedgerStore, StoredRecord
from holon_ctx.ledger.units import TurnUnit
from holon_ctx.memory.boundaries import RECENT_EDGE, BoundaryPolicy, ClosedRange, Segmenter
from holon_ctx.memory.builder import FieldBudget, build_episode, source_records
from holon_ctx.memory.episodes import Episode, RecapStatus, encode_episode, source_digest
from holon_ctx.memory.index import FormCounts, index_episode
from holon_ctx.memory.store import EpisodeStore, OpenRow, Resolution
from holon_ctx.memory.summarizer import Summarizer, summarize
from holon_ctx.memory.unresolved import LedgerFacts, is_open, key_work_item, resolves

__all__ = ["ArchivePolicy", "ArchiveReport", "Archiver", "RebuildReport", "VerifyReport",
           "WouldArchive"]

#: Open items checked against the ledger per run (the rest wait for the next run).
_OPEN_CHECK: Final = 4096
#: Records read per round trip when archiving (a forward read by position).
_PAGE: Final = 2048


@attrs.frozen
class ArchivePolicy:
    """When turns age out, and the settings that shape an episode (stored with the episodes)."""

    recent_turns: int = 48
    boundaries: BoundaryPolicy = attrs.field(factory=BoundaryPolicy)
    budget: FieldBudget = attrs.field(factory=FieldBudget)
    #: Turns read before the episodes they close are built and stored (bounds the memory a
    #: run over a long imported history holds).
    chunk_turns: int = 1024

    def __attrs_post_init__(self) -> None:
        if self.recent_turns < 2:
            raise InputError(f"recent window must be at least 2 turns, got {self.recent_turns}")

    def identity(self) -> dict[str, str]:
        """What must not change between archive runs of one store (it shapes every episode)."""
        return {"policy": msgspec.json.encode(
            {"builder": 1, "boundaries": attrs.asdict(self.boundaries),
             "budget": attrs.asdict(self.budget)}).decode()}


class WouldArchive(Exception):
    """``archive(archiving=False)`` met a range that closes: the run would archive it."""


@attrs.frozen
class ArchiveReport:
    archived: tuple[str, ...]
    turns: int
    horizon: str | None
    resolved: int
    recaps_accepted: int
    recaps_rejected: int


@attrs.frozen
class RebuildReport:
    episodes: int
    identical: bool
    #: Ids whose bytes differ (or that appeared or disappeared), when not identical.
    changed: tuple[str, ...]


@attrs.frozen
class VerifyReport:
    checked: int
    #: ``(episode id, problem)`` for each episode that does not match the ledger.
    problems: tuple[tuple[str, str], ...]


class Archiver:
    """``Archiver(ledger, episodes).archive()`` — see the module docstring."""

    def __init__(self, ledger: LedgerStore, episodes: EpisodeStore, *,
                 policy: ArchivePolicy | None = None,
                 summarizer: Summarizer | None = None, positioned: bool = True,
                 forms: Callable[[Episode], FormCounts] | None = None) -> None:
        self.ledger = ledger
        self.store = episodes
        self.policy = policy or ArchivePolicy()
        self.summarizer = summarizer
        #: Record the ledger position each run read up to, so recall as of an earlier position
        #: does not see its episodes (RFC 0020). False for an archive that stands for one a
        #: runtime grew as the ledger did (the demo's, built at once after its import): its
        #: episodes count as archived from the start, as a rebuild's do.
        self.positioned = positioned
        #: Makes the token counts of an episode's rendered forms, stored beside it (RFC 0024
        #: decision 6). Given by the layer that renders (the session's compaction): memory
        #: writes no prompt text. None stores none; their forms are then counted when recalled.
        self.forms = forms

    # -- public --------------------------------------------------------------------------------
    def archive(self, *, at: str | None = None, to_edge: bool = False,
                archiving: bool = True) -> ArchiveReport:
        """Archive every closed range older than the recent window (idempotent).

        ``to_edge``: also close the range still open at the window's edge, so that every turn
        outside the window is archived (an explicit run, ``holon-ctx episodes archive``; a
        session's own runs never do: each would cut a range of a few turns, RFC 0029).
        ``archiving=False``: raise :class:`WouldArchive` at the first range that closes,
        before building its episode (a compaction tried without its lock asks only whether
        there is anything to write: RFC 0026 decision 13)."""
        self._check_policy()
        current, limit_pos = resolve_limit(self.ledger, at)
        assert isinstance(current.record, Turn)
        recent = self.ledger.turns_before(current.record.seq + 1, self.policy.recent_turns,
                                          limit_pos)
        if len(recent) < self.policy.recent_turns:
            return ArchiveReport((), 0, None, self._resolve([], limit_pos), 0, 0)
        horizon = recent[-1]
        assert isinstance(horizon.record, Turn)
        edge = self.ledger.turns_before(horizon.record.seq, 1, limit_pos) if to_edge else []
        last = self.store.last()
        after = last.span.last_seq if last is not None else None
        edges = frozenset(_seq(t) for t in edge if after is None or _seq(t) > after)
        report = self._run(after, horizon, limit_pos, summarize_new=True, edges=edges,
                           archiving=archiving)
        return attrs.evolve(report, horizon=horizon.ref)

    def rebuild(self) -> RebuildReport:
        """Drop every episode and rebuild them from the ledger, through the same frontier."""
        old: dict[str, bytes] = {}
        # The edges explicit runs cut at are facts of this archive, not of the ledger: cut
        # there again (RFC 0029), so rebuilding gives the bytes the runs gave.
        cuts: set[int] = set()
        for ep in self.store.iter_episodes():
            old[ep.id] = encode_episode(ep)
            if ep.closed_by == RECENT_EDGE:
                cuts.add(ep.span.last_seq)
        edges = frozenset(cuts)
        last = self.store.last()
        self.store.clear()
        self.store.set_meta(self.policy.identity())
        if last is None:
            return RebuildReport(0, True, ())
        limit_pos = self.ledger.end_pos()
        nxt = self.ledger.next_turn_pos(last.span.last_seq)
        look = self.ledger.latest_turn(nxt + 1) if nxt is not None else None
        if look is None:
            raise InputError(f"cannot rebuild: no turn follows {last.span.last_turn} in the ledger")
        self._run(None, look, limit_pos, summarize_new=False, edges=edges)
        new = {ep.id: encode_episode(ep) for ep in self.store.iter_episodes()}
        changed = tuple(sorted(i for i in old.keys() | new.keys() if old.get(i) != new.get(i)))
        return RebuildReport(len(new), not changed, changed)

    def verify(self) -> VerifyReport:
        """Re-derive every stored episode from the ledger; report any that differ."""
        problems: list[tuple[str, str]] = []
        checked = 0
        for ep in self.store.iter_episodes():
            checked += 1
            problem = self.verify_episode(ep)
            if problem:
                problems.append((ep.id, problem))
        return VerifyReport(checked, tuple(problems))

    def verify_episode(self, ep: Episode) -> str | None:
        """None when ``ep`` matches the ledger, else what differs."""
        end = self.ledger.end_pos()
        settle = self.ledger.next_turn_pos(ep.span.last_seq)
        turns = self.ledger.turns_before(ep.span.last_seq + 1, len(ep.turn_ids), end)[::-1]
        if [t.record.id for t in turns] != ep.turn_ids:
            return "covered turns differ from the ledger"
        units = self._units(turns, settle if settle is not None else end)
        digest = source_digest(s.record for s in source_records(units))
        if digest != ep.digest:
            return f"digest mismatch: stored {ep.digest}, ledger gives {digest}"
        again = build_episode(units, closed_by=ep.closed_by, budget=self.policy.budget,
                              waits=self.ledger)
        if encode_episode(again) != encode_episode(ep):
            return "content differs from what the ledger gives"
        return None

    # -- the run -------------------------------------------------------------------------------
    def _check_policy(self) -> None:
        stored = self.store.meta().get("policy")
        mine = self.policy.identity()["policy"]
        if stored is None:
            self.store.set_meta(self.policy.identity())
        elif stored != mine and self.store.count():
            raise InputError(f"these episodes were archived with other settings ({stored}); "
                             "rebuild them to change settings")

    def _run(self, after_seq: int | None, look: StoredRecord, limit_pos: int, *,
             summarize_new: bool, edges: frozenset[int] = frozenset(),
             archiving: bool = True) -> ArchiveReport:
        look_turn = look.record
        assert isinstance(look_turn, Turn)
        start, look_settle = self._span(after_seq, look, look_turn, limit_pos)
        segmenter = Segmenter(self.policy.boundaries, edges=edges)
        archived: list[str] = []
        covered = 0
        accepted = rejected = 0
        tools: list[tuple[str, int, int]] = []
        for chunk in self._chunks(start, look_settle):
            closed: list[ClosedRange] = []
            for unit in chunk:
                for stored in unit.records:
                    if isinstance(stored.record, Tool):
                        tools.extend((k, stored.pos, unit.turn.seq)
                                     for k in resolves(stored.record, stored.ref))
                closed.extend(r for r in segmenter.push(unit) if r.last_seq < look_turn.seq)
            if closed and not archiving:
                raise WouldArchive(closed[0].units[0].stored.ref)
            episodes = [build_episode(r.units, closed_by=r.closed_by, budget=self.policy.budget,
                                      waits=self.ledger) for r in closed]
            if episodes:
                # A run's episodes are the archive from the ledger position it read up to on:
                # recall as of an earlier position does not see them (RFC 0020). A rebuild does
                # not know when each was first archived: its episodes count as archived always.
                batch = [index_episode(ep) for ep in episodes]
                if self.forms is not None:
                    batch = [attrs.evolve(item, forms=self.forms(item.episode)) for item in batch]
                if summarize_new and self.positioned:
                    # Stamped with the end when the run commits, appends held until it has
                    # (not limit_pos, which appends may have passed by then: RFC 0020).
                    with appends_held(self.ledger, limit_pos, writer=self.store) as at:
                        self.store.append(batch, archived_pos=at)
                else:
                    self.store.append(batch)
                archived.extend(ep.id for ep in episodes)
                covered += sum(ep.turns for ep in episodes)
            if summarize_new and self.summarizer is not None:
                ok, no = self._recap(episodes, self.summarizer)
                accepted, rejected = accepted + ok, rejected + no
        resolved = self._resolve(tools, limit_pos)
        return ArchiveReport(tuple(archived), covered, None, resolved, accepted, rejected)

    def _span(self, after_seq: int | None, look: StoredRecord, look_turn: Turn,
              limit_pos: int) -> tuple[int, int]:
        """Where the run reads from (the first turn after ``after_seq``, at most the look-ahead
        turn's position) and up to (the look-ahead turn's settled end, at most ``limit_pos``)."""
        look_settle = self.ledger.next_turn_pos(look_turn.seq)
        if look_settle is None or look_settle > limit_pos:
            look_settle = limit_pos
        start = 0 if after_seq is None else self.ledger.next_turn_pos(after_seq)
        if start is None or start > look.pos:
            start = look.pos
        return start, look_settle

    def _recap(self, episodes: list[Episode], summarizer: Summarizer) -> tuple[int, int]:
        """Each new episode's recap, stored; how many were accepted and rejected."""
        accepted = rejected = 0
        for ep in episodes:
            recap = summarize(ep, summarizer)
            self.store.add_recap(recap)
            accepted += recap.status is RecapStatus.ACCEPTED
            rejected += recap.status is RecapStatus.REJECTED
        return accepted, rejected

    def _chunks(self, start: int, settle: int) -> Iterator[list[TurnUnit]]:
        """Turn units of the records in ``[start, settle)``, oldest first, a chunk at a time:
        one forward read, in pages of positions (the last unit is the look-ahead turn).

        A turn's settled records are those it owns that were appended before the next turn
        began, so reading forward by position, a turn's unit is the records between its turn
        record and the next one that name it as their turn; a record of an older turn appended
        meanwhile (a late result) is not settled for that turn and is skipped, as ``_units``
        skips it."""
        turn: StoredRecord | None = None
        owned: list[StoredRecord] = []
        chunk: list[TurnUnit] = []
        pos = start
        while pos < settle:
            page = self.ledger.records_between(pos, min(settle, pos + _PAGE))
            if not page:
                break
            for stored in page:
                if isinstance(stored.record, Turn):
                    if turn is not None:
                        chunk.append(TurnUnit(stored=turn, records=tuple(owned)))
                    turn, owned = stored, []
                elif turn is not None and stored.turn_seq == _seq(turn):
                    owned.append(stored)
            pos = page[-1].pos + 1
            if len(chunk) >= self.policy.chunk_turns:
                yield chunk
                chunk = []
        if turn is not None:
            chunk.append(TurnUnit(stored=turn, records=tuple(owned)))
        if chunk:
            yield chunk

    def _units(self, turns: list[StoredRecord], settle_last: int) -> list[TurnUnit]:
        """Turns with their settled records (each record before its owner's next turn)."""
        if not turns:
            return []
        bounds = {_seq(t): (turns[i + 1].pos if i + 1 < len(turns) else settle_last)
                  for i, t in enumerate(turns)}
        owned: dict[int, list[StoredRecord]] = {}
        for rec in self.ledger.records_of_turns(_seq(turns[0]), _seq(turns[-1]), settle_last):
            seq = rec.turn_seq
            if seq is not None and seq in bounds and rec.pos < bounds[seq]:
                owned.setdefault(seq, []).append(rec)
        return [TurnUnit(stored=t, records=tuple(owned.get(_seq(t), ()))) for t in turns]

    # -- resolutions ---------------------------------------------------------------------------
    def _resolve(self, tools: list[tuple[str, int, int]], limit_pos: int) -> int:
        rows = self.store.open_rows(1 << 62, 1 << 62, _OPEN_CHECK)
        if not rows:
            return 0
        first_tool: dict[str, list[tuple[int, int]]] = {}
        for key, pos, seq in tools:
            first_tool.setdefault(key, []).append((seq, pos))
        facts = self.facts(rows, limit_pos)
        marks: list[Resolution] = []
        for row in rows:
            if row.key in first_tool:
                later = [pos for seq, pos in first_tool[row.key] if seq > row.last_seq]
                if later:
                    marks.append(Resolution(row.num, row.key, min(later) + 1, True))
                continue
            if row.key.partition(":")[0] not in ("call", "effect") and not is_open(row.key, facts):
                marks.append(Resolution(row.num, row.key, limit_pos, False))
        if marks:
            self.store.mark_resolved(marks)
        return len(marks)

    def facts(self, rows: list[OpenRow], limit_pos: int) -> LedgerFacts:
        """What the ledger says, as of ``limit_pos``, about the waits and work items of ``rows``."""
        # A wait a task result or an event answered is resolved, whether or not a wait record
        # closed it (issue 25, item 2): the obligation it left closes at the next compaction.
        still = self.ledger.open_waits(limit_pos)
        answered = answered_waits(self.ledger, still, limit_pos)
        waits = frozenset(w.wait_id for w in still if w.wait_id not in answered)
        items: dict[str, WorkItemState | None] = {}
        for row in rows:
            wid = key_work_item(row.key)
            if wid is not None and wid not in items:
                items[wid] = self.ledger.work_item_state(wid, limit_pos)
        return LedgerFacts(open_wait_ids=waits, work_items=items)


def _seq(stored: StoredRecord) -> int:
    rec = stored.record
    assert isinstance(rec, Turn)
    return rec.seq
