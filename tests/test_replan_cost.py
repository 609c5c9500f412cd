"""What a re-plan's cost cut must not change (issue 29, the real turn's p99; RFC 0024 decision 6).

A re-plan renders the turns and episodes it has not rendered yet; the faster paths below were
added for that and must give exactly what the slower ones gave — the request's bytes and counts
depend on them:

* a session's history renderer and its entry renderer share a record's shown text and capped
  bodies (``records_of``): each still gets its own caps' body, never the other's;
* :func:`~holon_ctx.ledger.body.id_problem` checks clean ASCII without a per-character loop;
* :func:`~holon_ctx.projection.rendering.render_records._key_lines` searches ASCII text by substring;
* :func:`~holon_ctx.projection.base.formats.neutralise_repeat_marks` skips text with no "line".
"""

from __future__ import annotations

import random
import re
import unicodedata
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import attrs
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import holon_ctx
from holon_ctx.ledger.body import _MARKUP, id_problem, neutralise_fences, record_body
from holon_ctx.ledger.records import Origin, Tool, ToolStatus, Trust, Turn
from holon_ctx.ledger.store import StoredRecord
from holon_ctx.ledger.units import TurnUnit
from holon_ctx.postgres import PostgresStore
from holon_ctx.projection.base import formats
from holon_ctx.projection.base.formats import neutralise_repeat_marks
from holon_ctx.projection.base.framing import Role
from holon_ctx.projection.base.policy import Policy, TokenCaps
from holon_ctx.projection.base.spans import Span
from holon_ctx.projection.planning.frontier import Frontier
from holon_ctx.projection.planning.history import episode_spans, stored_turn_seq
from holon_ctx.projection.provider_formats.native import Call, Part
from holon_ctx.projection.rendering import render_base
from holon_ctx.projection.rendering.render import Renderer
from holon_ctx.projection.rendering.render_records import _KEY_LINE, _key_lines
from holon_ctx.projection.session import replan as replan_module
from holon_ctx.projection.session.persisted import PersistedPart, persisted_parts, restored_parts
from holon_ctx.projection.session.session import Layout
from holon_ctx.session import ToolCall
from holon_ctx.tokens import TokenCounter, counter_for_encoding, default_counter

COUNTER = default_counter()


def _tool(output: str, ref_id: str = "x1") -> StoredRecord:
    rec = Tool(id=ref_id, tool_name="sh", args_preview="pytest -q", status=ToolStatus.OK,
               exit_code=0, output=output, trust=Trust.UNTRUSTED_EXTERNAL, origin=Origin.TOOL)
    return StoredRecord(pos=1, ref=f"tool:{ref_id}", record=rec,
                        tokens=COUNTER.count(record_body(rec)), turn_seq=1)


def _renderer(tool_cap: int, records_of: Renderer | None = None) -> Renderer:
    return Renderer(COUNTER, COUNTER.identity, Policy(caps=TokenCaps(tool=tool_cap)),
                    records_of=records_of)


# A long output with runs of identical lines (folded, so its shown text is made and counted).
_OUTPUT = "".join(f"tests/test_a.py::test_{i} PASSED\n" + "retrying...\n" * 4
                  for i in range(120))


def test_renderers_sharing_record_memo_each_get_their_own_caps_body() -> None:
    """The entry renderer (large caps) renders a tool run first, the history renderer (small
    caps) after it, sharing the memo: each gets the body a renderer of its own caps alone gets —
    the small one an excerpt, the large one the whole folded text — never the other's."""
    history = _renderer(60)
    entry = _renderer(20_000, records_of=history)
    stored = _tool(_OUTPUT)
    entry_block = entry.record_blocks(stored, {})
    history_block = history.record_blocks(stored, {})
    assert [b.text for b in entry_block] == [b.text for b in
                                             _renderer(20_000).record_blocks(stored, {})]
    assert [b.text for b in history_block] == [b.text for b in
                                               _renderer(60).record_blocks(stored, {})]
    assert [b.tokens for b in history_block] == [b.tokens for b in
                                                 _renderer(60).record_blocks(stored, {})]
    assert history_block[0].excerpt
    assert not entry_block[0].excerpt
    # A body is remembered under its record's ref: another record never gets it.
    other = _tool(_OUTPUT.replace("PASSED", "FAILED"), ref_id="x2")
    assert "FAILED" in history.record_blocks(other, {})[0].text


def test_the_shared_memo_folds_a_tool_output_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the sharing is for: the history renderer finds the shown text (folded, counted)
    the entry renderer made when the record arrived, instead of making it again."""
    calls: list[str] = []
    real = render_base._folded

    def counting(body: str, counter: TokenCounter, verbatim: bool = False) -> tuple[str, int]:
        calls.append(body)
        return real(body, counter, verbatim)

    monkeypatch.setattr(render_base, "_folded", counting)
    history = _renderer(60)
    entry = _renderer(20_000, records_of=history)
    stored = _tool(_OUTPUT)
    entry.record_blocks(stored, {})
    history.record_blocks(stored, {})
    assert len(calls) == 1
    alone = _renderer(60)
    alone.record_blocks(stored, {})
    assert len(calls) == 2  # a renderer made on its own keeps its own memo


def _id_problem_per_character(value: str) -> str | None:
    """id_problem as it was before its ASCII fast path (the reference)."""
    for char in value:
        if char in _MARKUP or any(c in _MARKUP for c in unicodedata.normalize("NFKC", char)):
            return "must not contain markup characters (\" ' < > & `), in any width"
        if unicodedata.category(char) in {"Cc", "Cf", "Cs", "Zl", "Zp", "Zs"}:
            return f"must not contain invisible or control character U+{ord(char):04X}"
    if neutralise_fences(value) != value:
        return "must not look like a data fence tag or the 'operator (trusted)' label"
    return None


_ID_PIECES = st.sampled_from(["tool:x1", "a", "Z", "0", "-", ".", ":", "_", " ", "\t", "\x00",
                              "\x7f", "<", ">", "&", "'", '"', "`", "\uff1c", "\u200b",
                              "\u00a0", "data", "DATA", "<data", "operator (trusted)",
                              "Operator(Trusted)", "é", "\u2028", "~", "/"])


@settings(max_examples=400, deadline=None)
@given(value=st.lists(_ID_PIECES, max_size=8).map("".join))
def test_id_problem_fast_path_says_what_the_per_character_check_says(value: str) -> None:
    assert id_problem(value) == _id_problem_per_character(value)


_LINE_PIECES = st.sampled_from(["ok", "OK", "Ok", "not ok", "NOT OK", "xok", "okx", "ok_",
                                "_ok", "ok1", "(ok)", "ERROR", "Errors", "fail", "FAILED",
                                "passed", "Success", "warning", "Traceback", "assert",
                                "expected", "MisMatch", "exception", " ", "\t", "-", "x",
                                "e", "rror", "o", "k"])


@settings(max_examples=400, deadline=None)
@given(lines=st.lists(st.lists(_LINE_PIECES, max_size=6).map("".join), max_size=40),
       limit=st.integers(1, 50))
def test_key_lines_of_ascii_text_are_the_case_folding_search_of_each_line(lines: list[str],
                                                                          limit: int) -> None:
    """The substring search of lowercased ASCII finds the lines the case-folding pattern finds
    in each line, the first ``limit`` of them (word boundaries of "ok" included)."""
    each = [i for i, line in enumerate(lines) if _KEY_LINE.search(line)]
    assert _key_lines(lines, limit) == each[:limit]


def _neutralise_repeat_marks_reference(text: str) -> str:
    """neutralise_repeat_marks without its "line" substring test (the reference)."""
    if not formats._NOTE_START.search(formats._read_as(text)):
        return text
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if formats._REPEAT_LOOKALIKE.match(formats._read_as(line)):
            for j, char in enumerate(line):
                if formats._read_as(char) in ("[", "("):
                    lines[i] = line[:j] + formats._QUOTED_BRACKET + line[j + 1:]
                    break
    return "\n".join(lines)


_NOTE_PIECES = st.sampled_from(["[line above ×2]", "(LINES as in tool:x)", "[3 lines above x4]",
                                "[Line", "line", "LİNE", "ｌｉｎｅ", "l\u200bine", "above", "×",
                                "\n", " ", "[", "(", "]", ")", "2", "as in", "tool:x1", "é"])


@settings(max_examples=400, deadline=None)
@given(text=st.lists(_NOTE_PIECES, max_size=12).map("".join))
def test_repeat_marks_are_neutralised_as_without_the_substring_test(text: str) -> None:
    assert neutralise_repeat_marks(text) == _neutralise_repeat_marks_reference(text)
    assert re.search(r"line", formats._read_as(text)) is not None or \
        neutralise_repeat_marks(text) == text


# -- the frontier's stubs, remembered per turn (2026-12-06, branch replan) ---------------------------

def _turn_of(seq: int, *runs: StoredRecord) -> TurnUnit:
    turn = Turn(id=f"t{seq}", seq=seq, trigger="agent_step")
    return TurnUnit(stored=StoredRecord(pos=seq * 10, ref=f"turn:t{seq}", record=turn,
                                        tokens=1, turn_seq=seq), records=runs)


def _run(ref_id: str, seq: int, output: str) -> StoredRecord:
    rec = Tool(id=ref_id, turn_id=f"t{seq}", tool_name="sh", args_preview="pytest -q",
               status=ToolStatus.OK, exit_code=0, output=output,
               trust=Trust.UNTRUSTED_EXTERNAL, origin=Origin.TOOL)
    return StoredRecord(pos=seq * 10 + 1, ref=f"tool:{ref_id}", record=rec,
                        tokens=COUNTER.count(record_body(rec)), turn_seq=seq)


def test_stubs_are_remade_when_what_a_turns_runs_were_re_run_by_changes() -> None:
    """A turn's stubs depend on the later runs its runs are compared with: one renderer asked
    for the same turn under frontiers that say different things (no re-run yet, a changed
    re-run, a later identical one, the turn grown by a record) gives each time what a fresh
    renderer gives — a stub made for one frontier is never served for another."""
    first = _run("x1", 1, "a PASSED\nb FAILED\n")
    changed = _run("x2", 2, "a PASSED\nb PASSED\n")
    same = _run("x3", 3, "a PASSED\nb FAILED\n")
    unit = _turn_of(1, first)
    runs = (first, changed, same)
    frontiers = [
        Frontier(runs=(first,), complete=True, since=None, superseded={}),
        Frontier(runs=runs, complete=True, since=None, superseded={}, changed={"tool:x1": "tool:x2"}),
        Frontier(runs=runs, complete=True, since=None, superseded={"tool:x1": "tool:x3"}),
        Frontier(runs=runs, complete=True, since=None, superseded={}, changed={"tool:x1": "tool:x2"}),
    ]
    shared = _renderer(500)
    seen = []
    for frontier in frontiers:
        got = frontier.stubs(unit, shared)
        assert got == frontier._stubs(unit, _renderer(500))
        seen.append(got)
    assert seen[0] == {}
    assert "lines only in this run" in seen[1]["tool:x1"][0].text  # type: ignore[union-attr]
    assert "same as its re-run tool:x3" in seen[2]["tool:x1"]  # type: ignore[operator]
    assert seen[3] == seen[1]
    # The turn grown by a second run of the same command: its stubs name both runs.
    grown = _turn_of(1, first, _run("x4", 1, "c\n"))
    frontier = attrs.evolve(frontiers[2], superseded={"tool:x1": "tool:x3", "tool:x4": "tool:x3"})
    assert frontier.stubs(grown, shared) == frontier._stubs(grown, _renderer(500))
    assert set(frontier.stubs(grown, shared)) == {"tool:x1", "tool:x4"}


def test_a_session_s_requests_are_the_same_bytes_with_the_stubs_remembered_or_not(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An agent loop re-running a few commands (some with the same output, some with another),
    at a budget that re-plans often: every request's messages are the same with the stubs
    remembered as without, and the memo was used (a re-plan found most turns' stubs made)."""
    def loop() -> list[object]:
        out: list[object] = []
        rng = random.Random(7)
        with holon_ctx.open_session(":memory:") as session:
            session.operator_message("Make the suite pass.")
            for i in range(60):
                module = i % 3
                call = f"c{i}"
                session.assistant_message(f"step {i}", tool_calls=[
                    ToolCall(call, "shell", {"cmd": f"pytest -q tests/test_m{module}.py"})])
                output = "".join(f"test_{j} {'FAILED' if rng.random() < 0.3 else 'PASSED'}\n"
                                 for j in range(rng.choice((3, 30))))
                session.tool_result(call, output)
                request = session.next_request(2500)
                out.append((request.openai_messages, request.request_tokens))
        return out

    real = Frontier._stubs
    made: list[str] = []

    def counted(self: Frontier, unit: TurnUnit, r: Renderer) -> dict[str, object]:
        made.append(unit.ref)
        return real(self, unit, r)  # type: ignore[return-value]
    monkeypatch.setattr(Frontier, "_stubs", counted)
    remembered = loop()
    made_remembered = len(made)
    made.clear()
    monkeypatch.setattr(Frontier, "stubs", counted)
    assert loop() == remembered
    # Each turn's stubs made once per frontier, not once per re-plan that shows the turn.
    assert 0 < made_remembered < len(made) / 2


# -- an excerpt counted from its head and tail (2026-12-06, branch replan) --------------------------

_O200K = counter_for_encoding("o200k_base")
_LINE_TEXT = st.text(st.sampled_from("abcXYZ019 .,:;/()[]…é—\t\n-_'\"<>"), max_size=40)


@settings(max_examples=300, deadline=None)
@given(text=_LINE_TEXT, encoding=st.sampled_from(("cl100k_base", "o200k_base")))
def test_a_line_ended_count_is_the_count_of_the_text_and_its_newline(text: str,
                                                                      encoding: str) -> None:
    """``count_line_ended`` answers only where it can be exact, and then exactly: the count
    of ``text + "\\n"`` for a text ending in an ASCII letter or digit, in both encodings."""
    counter = counter_for_encoding(encoding)
    got = counter.count_line_ended(text, counter.count(text))
    last = text[-1:]
    assert (got is None) == (not (last.isascii() and last.isalnum()))
    if got is not None:
        assert got == counter.count(text + "\n")


_BODY_LINE = st.text(st.sampled_from("abcdefXYZ0123456789 .,:;/()[]…é—-_=+'\"<>#|"),
                     min_size=0, max_size=60)


@settings(max_examples=150, deadline=None)
@given(lines=st.lists(_BODY_LINE, min_size=4, max_size=80), cap=st.integers(5, 120),
       extra=st.tuples(st.integers(-8, 8), st.integers(-8, 8)),
       o200k=st.booleans())
def test_an_excerpt_s_count_is_the_count_of_its_text(lines: list[str], cap: int,
                                                     extra: tuple[int, int], o200k: bool) -> None:
    """An excerpted body's count, now added up from its head's and tail's, is the count of the
    excerpt's own text, in both encodings, at any cap and added characters (the clipper's
    search), for head and tail cut anywhere (after punctuation, "/" at a line start: o200k's
    seam)."""
    counter = _O200K if o200k else COUNTER
    rec = Tool(id="x1", tool_name="sh", args_preview="pytest -q", status=ToolStatus.OK,
               exit_code=0, output="\n".join(lines), trust=Trust.UNTRUSTED_EXTERNAL,
               origin=Origin.TOOL)
    stored = StoredRecord(pos=1, ref="tool:x1", record=rec,
                          tokens=counter.count(record_body(rec)), turn_seq=1)
    r = Renderer(counter, counter.identity, Policy(caps=TokenCaps(tool=cap)))
    text, tokens, excerpt, _ = r._body(stored, cap, extra)
    assert tokens == counter.count(text)
    if excerpt:
        assert formats.EXCERPT_MARK.search(text)


# -- an epoch's row: each text stored once (2026-12-06 afternoon, branch replan2) -------------------

_PART_TEXT = st.text(st.sampled_from("ab \n<>\"é…"), max_size=12)


@st.composite
def _parts(draw: st.DrawFn) -> Part:
    text = draw(_PART_TEXT)
    tokens = draw(st.integers(0, 9))
    same = draw(st.booleans())
    return Part(role=draw(st.sampled_from(list(Role))), text=text, text_tokens=tokens,
                content=text if same else draw(_PART_TEXT),
                content_tokens=tokens if draw(st.booleans()) else draw(st.integers(0, 9)),
                calls=tuple(Call(call_id=f"c{i}", name="sh", arguments={}, arguments_json="{}",
                                 tokens=i)
                            for i in range(draw(st.integers(0, 2)))),
                call_id=draw(st.sampled_from([None, "c1"])),
                refs=tuple(draw(st.lists(st.sampled_from(["turn:t1", "tool:x1"]), max_size=2))),
                stable_end=draw(st.booleans()),
                spans=tuple(draw(st.lists(st.just(Span(kind="label", trust=None, head=1, body=0,
                                                         tail=0, ref=None)), max_size=2))))


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(_parts(), max_size=5))
def test_a_part_stored_without_its_repeated_content_reads_back_as_it_was(parts: list[Part]) -> None:
    """Every field of every part comes back through the row's encoding, whether its content and
    count equal its text's or not (an empty text, an empty content beside a text, a count
    alone differing): only what equals what is kept is left out."""
    row = msgspec.json.encode(persisted_parts(parts))
    assert restored_parts(msgspec.json.decode(row, type=list[PersistedPart])) == parts


def test_a_content_equal_to_its_text_is_left_out_whatever_object_holds_it() -> None:
    """Parts read back from a row (or an older row that held both) carry a content that equals
    their text but is another string, and counts past 256 are other int objects: a re-plan
    writing them again still stores each text and count once (equal, not identical, is what
    is left out; the mutation sample of 2026-12-06, seed 1806284020, kept `is` there)."""
    text = "".join(["make the suite ", "pass"] * 40)
    tokens = int("1000")
    older = msgspec.json.encode([{"role": "user", "text": text, "text_tokens": tokens,
                                  "content": text, "content_tokens": tokens}])
    parts = restored_parts(msgspec.json.decode(older, type=list[PersistedPart]))
    assert parts[0].content == parts[0].text
    assert parts[0].content is not parts[0].text
    again = msgspec.to_builtins(persisted_parts(parts))
    assert again == [{"role": "user", "text": text, "text_tokens": 1000}]
    fresh = Part(role=Role.USER, text=text, text_tokens=int("1000"), content="".join(text),
                 content_tokens=int("1000"))
    assert msgspec.to_builtins(persisted_parts([fresh])) == again


def test_an_epoch_row_stores_each_text_once_and_an_older_row_still_reads() -> None:
    """A session's saved epoch holds each part's text once (its content only where it differs:
    the model's replies), is smaller than the layout that stored both by at least the texts
    left out, and restores to the parts the walk froze; a row in that older layout (each part
    whole) reads back as the same parts, so an epoch saved before this change is used, not
    re-planned."""
    with holon_ctx.open_session(":memory:") as session:
        session.operator_message("Make the suite pass.")
        for i in range(6):
            session.assistant_message(f"step {i}", tool_calls=[
                ToolCall(f"c{i}", "shell", {"cmd": f"pytest -q tests/test_m{i % 2}.py"})])
            session.tool_result(f"c{i}", f"test_{i} PASSED\n" * 3)
        sent = session.next_request(2500)._messages  # type: ignore[attr-defined]
        assert sent.replanned
        projector = session._projectors[Layout.MESSAGES]  # type: ignore[attr-defined]
        saved = projector.epochs.load(projector.state_key(2500))
        assert saved is not None
    row = msgspec.json.decode(saved.frozen)
    restored = restored_parts(msgspec.json.decode(msgspec.json.encode(row["parts"]),
                                                  type=list[PersistedPart]))
    assert restored == list(sent.parts[:len(restored)])
    assert any(p.role is Role.USER for p in restored)
    for stored, part in zip(row["parts"], restored, strict=True):
        assert ("content" in stored) == (part.content != part.text)
    older = dict(row, parts=[msgspec.to_builtins(p) for p in restored])
    left_out = sum(len(msgspec.json.encode(p.text)) for p in restored if p.content == p.text)
    assert len(msgspec.json.encode(older)) - len(saved.frozen) >= left_out
    assert restored_parts(msgspec.json.decode(msgspec.json.encode(older["parts"]),
                                              type=list[PersistedPart])) == restored


# -- a recalled episode's turn range, its ends' sequence numbers remembered (branch replan2) -------

def test_episode_spans_read_through_the_renderer_s_memo_are_the_store_s_and_read_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """What a re-plan's ``prepare`` now asks: each end of a recalled episode's range by the
    renderer's memo. The spans are those read from the store (an episode whose end the store
    does not hold has none); a second re-plan reads no turn it has found; a turn not found is
    asked again, and counted once it is there."""
    with holon_ctx.open_session(":memory:", compaction=None) as session:
        for i in range(5):
            session.operator_message(f"request {i}")
        store = session.store
        ids = [s.record.id for s in store.records_between(0, store.end_pos())
               if isinstance(s.record, Turn)]
        episodes = [SimpleNamespace(covers=(f"turn:{ids[0]}", f"turn:{ids[2]}")),
                    SimpleNamespace(covers=(f"turn:{ids[3]}", f"turn:{ids[4]}")),
                    SimpleNamespace(covers=(f"turn:{ids[1]}", "turn:later"))]
        reads: list[str] = []
        real_turn = type(store).turn

        def counted(self: object, turn_id: str) -> object:
            reads.append(turn_id)
            return real_turn(self, turn_id)  # type: ignore[arg-type]
        monkeypatch.setattr(type(store), "turn", counted)
        r = _renderer(500)

        def memo_seq(turn_id: str) -> int | None:
            return r.memo(("turn_seq", turn_id), lambda: stored_turn_seq(store, turn_id))
        plain = episode_spans(store, episodes)  # type: ignore[arg-type]
        assert plain == [(store.turn(ids[0]).turn_seq, store.turn(ids[2]).turn_seq),  # type: ignore[union-attr]
                         (store.turn(ids[3]).turn_seq, store.turn(ids[4]).turn_seq)]  # type: ignore[union-attr]
        reads.clear()
        assert episode_spans(store, episodes, memo_seq) == plain  # type: ignore[arg-type]
        assert len(reads) == 6
        reads.clear()
        assert episode_spans(store, episodes, memo_seq) == plain  # type: ignore[arg-type]
        assert reads == ["later"]  # the turn not found is asked again; the others are kept
        session.operator_message("request 5")
        later = store.records_between(0, store.end_pos())[-2].record
        assert isinstance(later, Turn)
        episodes[2] = SimpleNamespace(covers=(f"turn:{ids[1]}", f"turn:{later.id}"))
        assert episode_spans(store, episodes, memo_seq) == [  # type: ignore[arg-type]
            *plain, (store.turn(ids[1]).turn_seq, later.seq)]  # type: ignore[union-attr]


def _recalling_loop(open_ledger: Callable[[str], object]) -> list[object]:
    """A conversation that compacts as it goes and whose operator returns to earlier subjects
    (so re-plans recall archived episodes), at a budget that re-plans often: each request's
    messages and counts."""
    out: list[object] = []
    subjects = ["billing export", "search ranking", "login throttle", "report footer"]
    rng = random.Random(11)
    with holon_ctx.open_session(open_ledger("run")) as session:  # type: ignore[arg-type]
        for i in range(48):
            subject = subjects[(i // 3) % len(subjects)] if i % 6 else rng.choice(subjects)
            session.operator_message(f"Request {i}: fix the {subject} and add a test for it.")
            session.assistant_message(f"Working on the {subject}.", tool_calls=[
                ToolCall(f"c{i}", "shell", {"cmd": f"pytest -q tests/test_{i % 5}.py"})])
            session.tool_result(f"c{i}", "".join(f"test_{j} {rng.choice(['PASSED', 'FAILED'])}\n"
                                                 for j in range(rng.choice((3, 25)))))
            request = session.next_request(3000)
            out.append((request.openai_messages, request.request_tokens))
    return out


@pytest.mark.parametrize("store", ["memory", "sqlite", "postgres"])
def test_a_session_s_requests_are_the_same_bytes_with_episode_ranges_remembered_or_read(
        store: str, tmp_path: Path, request: pytest.FixtureRequest,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Every request of a session that recalls archived episodes is the same with the episodes'
    turn ranges read through the renderer's memo as read from the store at each re-plan, on
    every store; and the memo was used (fewer turns read, with episodes recalled)."""
    opened: list[PostgresStore] = []

    def open_ledger(tag: str) -> object:
        if store == "memory":
            return ":memory:"
        if store == "sqlite":
            return tmp_path / f"{tag}-{len(list(tmp_path.iterdir()))}.db"
        ledger = PostgresStore(request.getfixturevalue("pg_url"),
                               session=f"{request.getfixturevalue('pg_session_key')}-{len(opened)}")
        opened.append(ledger)
        return ledger

    real_spans = replan_module.episode_spans
    recalled: list[int] = []

    def spans(store_: object, episodes: object, turn_seq: object = None) -> object:
        recalled.append(len(episodes))  # type: ignore[arg-type]
        return real_spans(store_, episodes, turn_seq)  # type: ignore[arg-type]
    monkeypatch.setattr(replan_module, "episode_spans", spans)
    real_read = replan_module.stored_turn_seq
    reads: list[str] = []

    def read(store_: object, turn_id: str) -> int | None:
        reads.append(turn_id)
        return real_read(store_, turn_id)  # type: ignore[arg-type]
    monkeypatch.setattr(replan_module, "stored_turn_seq", read)
    remembered = _recalling_loop(open_ledger)
    assert sum(recalled) > 0, "the loop recalls archived episodes"
    # Each projector (the messages and the text layout) has its renderer: each reads an end
    # once, and finds it in its memo at its next re-plan recalling the same episode.
    assert len(reads) < 2 * sum(recalled), "ends were found in the memo"

    def read_each_time(store_: object, episodes: object, turn_seq: object = None) -> object:
        return real_spans(store_, episodes)  # type: ignore[arg-type]
    monkeypatch.setattr(replan_module, "episode_spans", read_each_time)
    try:
        assert _recalling_loop(open_ledger) == remembered
    finally:
        for ledger in opened:
            ledger.close()


def _step(session: holon_ctx.Session, i: int, rng: random.Random) -> None:
    if i % 4 == 0:
        session.operator_message(f"Request {i}: make module m{i % 3} pass, with a test.")
    session.assistant_message(f"Step {i}: running the tests.", tool_calls=[
        ToolCall(f"c{i}", "shell", {"cmd": f"pytest -q tests/test_m{i % 3}.py"})])
    session.tool_result(f"c{i}", "".join(f"test_{j} {rng.choice(['PASSED', 'FAILED'])}\n"
                                         for j in range(rng.choice((2, 20)))))


@pytest.mark.parametrize("budget", [1800, 6000])
@pytest.mark.parametrize("store", ["sqlite", "postgres"])
def test_a_session_reopened_from_its_saved_epochs_sends_what_one_kept_open_sends(
        store: str, budget: int, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """The saved epochs (each text once) are what a new process continues from: a session
    reopened every five turns — each reopening loads the epoch its store saved — sends, request
    for request, the bytes and counts a session kept open sends, on SQLite and PostgreSQL, at a
    budget that re-plans often and at one that re-plans seldom; and some reopening continued a
    saved epoch instead of re-planning."""
    keys = iter(range(2))

    def ledger() -> object:
        if store == "sqlite":
            return tmp_path / f"ledger-{next(keys)}.db"
        return PostgresStore(request.getfixturevalue("pg_url"),
                             session=f"{request.getfixturevalue('pg_session_key')}-{next(keys)}")

    def closed(where: object) -> None:
        if isinstance(where, PostgresStore):
            where.close()

    def reopened(where: object) -> object:
        if isinstance(where, PostgresStore):
            return PostgresStore(request.getfixturevalue("pg_url"), session=where.session,
                                 create=False)
        return where

    rng = random.Random(5)
    kept_open: list[object] = []
    first = ledger()
    with holon_ctx.open_session(first) as session:  # type: ignore[arg-type]
        for i in range(30):
            _step(session, i, rng)
            sent = session.next_request(budget)
            kept_open.append((sent.openai_messages, sent.request_tokens))
    closed(first)
    rng = random.Random(5)
    again: list[object] = []
    continued = 0
    where = ledger()
    for start in range(0, 30, 5):
        where = reopened(where)
        with holon_ctx.open_session(where) as session:  # type: ignore[arg-type]
            for i in range(start, start + 5):
                _step(session, i, rng)
                sent = session.next_request(budget)
                again.append((sent.openai_messages, sent.request_tokens))
                if i == start and start and not sent.manifest["session"]["replanned"]:
                    continued += 1
        closed(where)
    assert again == kept_open
    assert continued > 0, "a reopened session continued an epoch its store saved"
