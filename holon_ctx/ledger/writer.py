"""The append path shared by every store: validate against the ledger, derive, count, insert.

Theory of operation. A batch of records arrives in ledger order (with the source line of each when
it came from a file). For each record, in order:

1. *Derive its turn* when it has no ``turn_id``: an operator message, external event or task result
   opens a new turn (``t.<record id>``, next sequence number, trigger from the record kind); any
   other ownable record attaches to the last turn. This is what lets a plain event stream import.
2. *Validate against what is already appended* (including earlier records of the same batch):
   unique ref, owning turn exists, turn sequence strictly increases, anchors and spawning turns
   exist, wait ids were opened, pin targets exist, and a record's work item agrees with its turn's.
3. *Fill provenance* (origin and trust defaults) so the stored record states it explicitly.
4. *Count tokens* of the record body once with the store's counter (a chunk at a time, through
   ``count_many``), derive work-item and wait state, and note whether the record marks its turn
   high (:func:`holon_ctx.ledger.facts.marks_high`; the store indexes high turns).
5. *Insert* through the backend, which the caller runs inside one transaction: any error aborts
   the batch and nothing of it is kept.

Several writers. Everything the path reads about the ledger so far (the next position, the last
turn) is read when the batch starts, and the caller starts the batch inside its write transaction,
so two writers never number records or turns against the same state. A writer that does not own
the turn numbering (a transcript import, one of several agents sharing a ledger) appends with
``renumber_turns=True``: its turns keep their order but take the next sequence numbers of the
ledger as it is at that moment, instead of numbers it read earlier (RFC 0006).

Records are checked a chunk at a time. Before each chunk, a backend whose lookups are round trips
to a server (PostgreSQL) may answer every lookup of the chunk at once: it gets a :class:`Lookups`
through an optional ``prefetch`` method. Backends without one (memory, SQLite) are asked one
lookup at a time, as before.
"""

from __future__ import annotations

import typing
from collections.abc import Iterable, Iterator
from typing import Final, Protocol

import attrs
import msgspec

from holon_ctx.errors import (
    DuplicateIdError,
    LedgerFormatError,
    WaitNotOpenedError,
    quote_value,
)
from holon_ctx.ledger.body import record_body
from holon_ctx.ledger.codec import (
    MAX_LINE_BYTES,
    MAX_SEQ,
    check_record,
    encode_record,
    provenance_defaults,
)
from holon_ctx.ledger.facts import marks_high
from holon_ctx.ledger.fieldcheck import check_types
from holon_ctx.ledger.records import (
    Brief,
    ExternalEvent,
    Message,
    MessageRole,
    Pin,
    Record,
    TaskResult,
    Tool,
    Turn,
    Wait,
    WaitStatus,
    WorkItem,
    record_ref,
)
from holon_ctx.ledger.state import TurnInfo, WaitState, WorkItemState, fold_wait, fold_work_item
from holon_ctx.tokens import TokenCounter

__all__ = ["AppendBackend", "Lookups", "Row", "append_records"]

_CHUNK: Final = 512
_OWNABLE = (Message, Brief, TaskResult, Tool, ExternalEvent)
_RECORDS = typing.get_args(Record)


@attrs.frozen
class Row:
    """One record ready for a backend: the record with provenance filled, plus derived values."""

    pos: int
    ref: str
    kind: str
    record: Record
    line: bytes
    turn_seq: int | None
    tokens: int
    turn: TurnInfo | None = None
    work_item_state: WorkItemState | None = None
    wait_state: WaitState | None = None
    #: The record gives its turn (seq ``turn_seq``) a high retention fact: the store records the
    #: turn in its high-turn index, at the position of the first such record.
    marks_high: bool = False


@attrs.frozen
class Lookups:
    """Everything the append path may ask about while checking one chunk (a superset)."""

    #: For ``has_ref``: the chunk's own refs, the refs its records point at.
    refs: frozenset[str]
    #: For ``find_turn``: owning, anchor and spawning turns not already known to the batch.
    turn_ids: frozenset[str]
    #: For ``wait_state``.
    wait_ids: frozenset[str]
    #: For ``work_item_state``.
    work_item_ids: frozenset[str]


class LedgerMovedError(LedgerFormatError):
    """The ledger's end is not the one the writer built its batch for (``expect_end``): another
    writer appended first. Nothing of the batch was written; build it again from the ledger as
    it is now (``Session`` does, so its position-based ids never collide)."""


class AppendBackend(Protocol):
    """The primitives a store offers the append path; all reads see earlier rows of the batch."""

    def next_pos(self) -> int: ...
    def has_ref(self, ref: str) -> bool: ...
    def find_turn(self, turn_id: str) -> TurnInfo | None: ...
    def last_turn(self) -> TurnInfo | None: ...
    def work_item_state(self, work_item_id: str) -> WorkItemState | None: ...
    def wait_state(self, wait_id: str) -> WaitState | None: ...
    def insert(self, row: Row, counter_identity: str) -> None: ...


_DERIVED_TRIGGER: dict[type, str] = {
    Message: "operator_input",
    ExternalEvent: "external_event",
    TaskResult: "task_result",
}


def _opens_turn(record: Record) -> bool:
    if isinstance(record, Message):
        return record.role is MessageRole.OPERATOR
    return isinstance(record, ExternalEvent | TaskResult)


class _Appender:
    def __init__(self, backend: AppendBackend, counter: TokenCounter, source: str,
                 renumber_turns: bool = False, expect_end: int | None = None) -> None:
        self.backend = backend
        self.counter = counter
        self.source = source
        self.renumber_turns = renumber_turns
        self.pos = backend.next_pos()
        if expect_end is not None and self.pos != expect_end:
            # Read inside the write transaction: a check no other writer can slip past.
            raise LedgerMovedError(f"the ledger's end moved from {expect_end} to {self.pos}: "
                                   "another writer appended first", source=source)
        last = backend.last_turn()
        self.last_turn: TurnInfo | None = last
        # Turns of this batch, so the common case (records of the turn just opened) needs no query.
        self.turn_cache: dict[str, TurnInfo] = {}
        # Refs of turns derived in the current chunk -> the ref of the record that opened each,
        # so a clash is reported in terms of the line's own record (cleared after every chunk).
        self.derived_from: dict[str, str] = {}

    def fail(self, line: int | None, path: str, msg: str) -> LedgerFormatError:
        return LedgerFormatError(msg, source=self.source, line=line, path=path)

    def find_turn(self, turn_id: str) -> TurnInfo | None:
        hit = self.turn_cache.get(turn_id)
        return hit if hit is not None else self.backend.find_turn(turn_id)

    def expand(self, items: Iterable[tuple[int | None, Record]]) -> Iterator[tuple[int | None, Record]]:
        """Step 1: derive turns for records without ``turn_id`` (yields derived turns first)."""
        next_seq: int | None = None
        open_turn: str | None = self.last_turn.id if self.last_turn else None
        for index, (line, record) in enumerate(items, 1):
            self.check_alone(line, index, record)
            if isinstance(record, Turn):
                if self.renumber_turns:
                    if next_seq is None:
                        next_seq = 0 if self.last_turn is None else self.last_turn.seq + 1
                    if next_seq > MAX_SEQ:
                        raise self.fail(line, "$.seq", f"the next sequence number {next_seq} is "
                                                       f"above the limit {MAX_SEQ}")
                    if record.seq != next_seq:
                        record = msgspec.structs.replace(record, seq=next_seq)
                next_seq = record.seq + 1
                open_turn = record.id
                yield line, record
                continue
            if isinstance(record, _OWNABLE) and record.turn_id is None:
                if _opens_turn(record):
                    derived = self.derive_turn(line, record, next_seq)
                    next_seq = derived.seq + 1
                    open_turn = derived.id
                    yield line, derived
                    record = msgspec.structs.replace(record, turn_id=derived.id)
                else:
                    if open_turn is None:
                        raise self.fail(line, "$.turn_id",
                                        "missing, and there is no open turn to attach it to")
                    record = msgspec.structs.replace(record, turn_id=open_turn)
            yield line, record

    def check_alone(self, line: int | None, index: int, record: Record) -> None:
        """The record's own rules (and, for one built in Python, its field types: the decoder
        has checked those for every line of a file)."""
        problem = (check_types(record) if line is None or not isinstance(record, _RECORDS)
                   else None) or check_record(record)
        if problem:
            path, _, msg = problem.partition(": ")
            if line is None:
                # No source line to name: say which record of the batch it is.
                what = (f"a {type(record).__name__} with id {quote_value(getattr(record, 'id', None))}"
                        if isinstance(record, msgspec.Struct) else f"a {type(record).__name__}")
                msg = f"{msg}; record {index} of the batch, {what}"
            raise self.fail(line, path, msg)

    def check_size(self, line: int | None, record: Record, encoded: bytes) -> None:
        """Refuse a record whose canonical line is over ``MAX_LINE_BYTES`` (the newline not
        counted), naming its longest text field: the JSONL reader refuses such a line, so a
        ledger holding one would export a file that does not import."""
        size = len(encoded) - 1
        if size <= MAX_LINE_BYTES:
            return
        texts = {f"$.{name}": len(value) for name in record.__struct_fields__
                 if isinstance(value := getattr(record, name), str)}
        if isinstance(record, Message):
            # A reply's announced calls carry the model's arguments, maybe the bulk of the line.
            texts.update({f"$.tool_calls[{i}].arguments": len(call.arguments)
                          for i, call in enumerate(record.tool_calls)})
        field = max(texts, key=lambda path: texts[path])
        raise self.fail(line, field,
                        f"the record's ledger line would be {size} bytes, over the "
                        f"{MAX_LINE_BYTES} byte limit of a line; keep large texts outside the "
                        "ledger (a tool's or task's full output behind output_ref) and store a "
                        "bounded excerpt")

    def derive_turn(self, line: int | None, record: Record, next_seq: int | None) -> Turn:
        """The turn a record that opens one (a task result, an external event) gets when it
        names none: ``t.<id>``, the next sequence number."""
        ref = record_ref(record)
        if self.backend.has_ref(ref):
            raise DuplicateIdError(ref, source=self.source, line=line)
        if next_seq is None:
            last = self.last_turn
            next_seq = 0 if last is None else last.seq + 1
        if next_seq > MAX_SEQ:
            raise self.fail(line, "$.turn_id",
                            f"missing, and a derived turn would need seq {next_seq} "
                            f"(above the limit {MAX_SEQ})")
        derived = Turn(id=f"t.{record.id}", seq=next_seq, trigger=_DERIVED_TRIGGER[type(record)],
                       at=record.at, work_item_id=getattr(record, "work_item_id", None))
        self.derived_from[f"turn:{derived.id}"] = ref
        return derived

    def check(self, line: int | None, record: Record, ref: str) -> tuple[int | None, TurnInfo | None]:
        """Step 2: ledger-wide rules. Returns the owning turn's seq and, for a turn, its info."""
        if self.backend.has_ref(ref):
            opener = self.derived_from.get(ref)
            if opener is None or self.backend.has_ref(opener):
                raise DuplicateIdError(opener or ref, source=self.source, line=line)
            raise self.fail(line, "$.id", f"{opener} would open turn {quote_value(ref.partition(':')[2])}, "
                                          "which is already in the ledger (a derived turn is "
                                          "named t.<id>)")
        if isinstance(record, Turn):
            return record.seq, self.check_turn(line, record)
        owner_seq = self.check_owner(line, record)
        self.check_links(line, record)
        return owner_seq, None

    def check_turn(self, line: int | None, record: Turn) -> TurnInfo:
        last = self.last_turn
        if last is not None and record.seq <= last.seq:
            raise self.fail(line, "$.seq",
                            f"sequence goes backwards: {record.seq} after {last.seq} "
                            f"(turn {last.id})")
        if record.anchor_turn_id is not None and self.find_turn(record.anchor_turn_id) is None:
            raise self.fail(line, "$.anchor_turn_id",
                            f"no earlier turn {quote_value(record.anchor_turn_id)} to continue")
        return TurnInfo(id=record.id, seq=record.seq, pos=self.pos,
                        work_item_id=record.work_item_id)

    def check_owner(self, line: int | None, record: Record) -> int | None:
        """The owning turn's seq (None for a record no turn owns); it must be in the ledger, and
        act for the same work item as the record."""
        turn_id = getattr(record, "turn_id", None)
        if turn_id is None:
            return None
        owner = self.find_turn(turn_id)
        if owner is None:
            raise self.fail(line, "$.turn_id",
                            f"no turn {quote_value(turn_id)} before this record "
                            "(a record belongs only to a turn appended before it)")
        wid = getattr(record, "work_item_id", None)
        if (isinstance(record, Brief | TaskResult | ExternalEvent) and wid
                and owner.work_item_id and wid != owner.work_item_id):
            raise self.fail(line, "$.work_item_id",
                            f"owner mismatch: record acts for {quote_value(wid)} but its turn "
                            f"{quote_value(owner.id)} acts for {quote_value(owner.work_item_id)}")
        return owner.seq

    def check_links(self, line: int | None, record: Record) -> None:
        """What the record names (a spawning turn, a wait, a resolving record, a pin's target)
        is in the ledger."""
        if isinstance(record, TaskResult) and record.spawned_by_turn_id is not None \
                and self.find_turn(record.spawned_by_turn_id) is None:
            raise self.fail(line, "$.spawned_by_turn_id",
                            f"no turn {quote_value(record.spawned_by_turn_id)} spawned this task")
        wait_id = getattr(record, "wait_id", None)
        if isinstance(record, ExternalEvent | TaskResult) and wait_id is not None \
                and self.backend.wait_state(wait_id) is None:
            raise WaitNotOpenedError(wait_id, f"no wait {quote_value(wait_id)} was opened",
                                     path="$.wait_id", source=self.source, line=line)
        if isinstance(record, Wait):
            known = self.backend.wait_state(record.wait_id)
            if known is None and record.status is not WaitStatus.OPEN:
                raise WaitNotOpenedError(record.wait_id,
                                         f"wait {quote_value(record.wait_id)} is "
                                         f"{record.status.value} but was never opened",
                                         path="$.status", source=self.source, line=line)
            if record.resolved_by is not None and not self.backend.has_ref(record.resolved_by):
                raise self.fail(line, "$.resolved_by", f"no record {quote_value(record.resolved_by)}")
        if isinstance(record, Pin) and not self.backend.has_ref(record.target):
            raise self.fail(line, "$.target", f"pin target {quote_value(record.target)} is not in the ledger")

    def run(self, items: Iterable[tuple[int | None, Record]]) -> int:
        count = 0
        chunk: list[tuple[int | None, Record]] = []
        expanded = self.expand(items)
        while True:
            try:
                item = next(expanded, None)
            except LedgerFormatError:
                # A later line failed to decode while this chunk waited for its ledger-wide
                # checks: check it first, so the error reported is always the first bad line.
                self.flush(chunk)
                raise
            if item is None:
                break
            chunk.append(item)
            if len(chunk) >= _CHUNK:
                count += self.flush(chunk)
                chunk = []
        if chunk:
            count += self.flush(chunk)
        return count

    def lookups(self, records: list[Record]) -> Lookups:
        refs = set(self.derived_from.values())
        turn_ids: set[str] = set()
        wait_ids: set[str] = set()
        work_items: set[str] = set()
        for record in records:
            refs.add(record_ref(record))
            for name in ("turn_id", "anchor_turn_id", "spawned_by_turn_id"):
                value = getattr(record, name, None)
                if value is not None and value not in self.turn_cache:
                    turn_ids.add(value)
            wait_id = getattr(record, "wait_id", None)
            if wait_id is not None:
                wait_ids.add(wait_id)
            if isinstance(record, Wait) and record.resolved_by is not None:
                refs.add(record.resolved_by)
            elif isinstance(record, Pin):
                refs.add(record.target)
            elif isinstance(record, WorkItem):
                work_items.add(record.work_item_id)
        return Lookups(refs=frozenset(refs), turn_ids=frozenset(turn_ids),
                       wait_ids=frozenset(wait_ids), work_item_ids=frozenset(work_items))

    def flush(self, chunk: list[tuple[int | None, Record]]) -> int:
        filled: list[Record] = []
        for _, record in chunk:
            origin, trust = provenance_defaults(record)
            if record.origin is not origin or record.trust is not trust:
                record = msgspec.structs.replace(record, origin=origin, trust=trust)
            filled.append(record)
        # Encoded before anything is counted or looked up: a record whose line the reader would
        # refuse is refused here, at once (counting 20 MB of output first took seconds), so that
        # every stored ledger exports to JSONL that imports again.
        lines = [encode_record(record) for record in filled]
        for (line, _), record, encoded in zip(chunk, filled, lines, strict=True):
            self.check_size(line, record, encoded)
        prefetch = getattr(self.backend, "prefetch", None)
        if prefetch is not None:
            prefetch(self.lookups(filled))
        counts = self.counter.count_many([record_body(r) for r in filled])
        for (line, _), record, tokens, encoded in zip(chunk, filled, counts, lines, strict=True):
            ref = record_ref(record)
            owner_seq, turn = self.check(line, record, ref)
            wis = wst = None
            if isinstance(record, WorkItem):
                wis = fold_work_item(self.backend.work_item_state(record.work_item_id), record,
                                     ref=ref, pos=self.pos)
            elif isinstance(record, Wait):
                wst = fold_wait(self.backend.wait_state(record.wait_id), record, ref=ref,
                                pos=self.pos)
            row = Row(pos=self.pos, ref=ref, kind=ref.partition(":")[0], record=record,
                      line=encoded, turn_seq=owner_seq, tokens=tokens, turn=turn,
                      work_item_state=wis, wait_state=wst,
                      marks_high=owner_seq is not None and marks_high(record))
            self.backend.insert(row, self.counter.identity)
            if turn is not None:
                self.last_turn = turn
                self.turn_cache[turn.id] = turn
                if len(self.turn_cache) > 4096:
                    self.turn_cache.clear()
                    self.turn_cache[turn.id] = turn
            self.pos += 1
        self.derived_from.clear()
        return len(chunk)


def append_records(
    backend: AppendBackend,
    counter: TokenCounter,
    items: Iterable[tuple[int | None, Record]],
    *,
    source: str = "<append>",
    renumber_turns: bool = False,
    expect_end: int | None = None,
) -> int:
    """Validate and insert ``(line, record)`` pairs; the caller owns the transaction.

    Call it *inside* the write transaction: it reads the ledger's next position and last turn
    first. ``renumber_turns``: give the batch's turns the ledger's next sequence numbers, in order
    (see the module docstring). ``expect_end``: refuse the batch (:class:`LedgerMovedError`,
    nothing written) unless the ledger ends there — the writer's ids were minted for it.
    """
    return _Appender(backend, counter, source, renumber_turns, expect_end).run(items)
