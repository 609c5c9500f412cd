"""An episode's form counts stored when it is archived (RFC 0024 decision 6): the forms they give
are the forms a fresh count gives, and a count is reused only for the text and counter it was
made of."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import attrs
import pytest

import holon_ctx
from holon_ctx.errors import EngineError
from holon_ctx.memory.episodes import Claim, Episode, Field, Span
from holon_ctx.memory.index import FormCounts, chunk_key, pack_counts, unpack_counts
from holon_ctx.memory.interface import RecalledEpisode
from holon_ctx.projection.base.items import LazyRendered, Rendered
from holon_ctx.projection.base.model import Form, Priority
from holon_ctx.projection.rendering import episode_forms as forms_module
from holon_ctx.projection.rendering.episode_forms import (
    _full_total_text,
    derive_form_counts,
    episode_forms,
)
from holon_ctx.projection.rendering.render import Renderer
from holon_ctx.tokens import TiktokenCounter, counter_for_encoding, default_counter

COUNTER = default_counter()
_OUTPUT = "\n".join(f"tests/test_billing.py::test_case_{i} PASSED [{i}%]" for i in range(40))


class _Spy(TiktokenCounter):
    """cl100k, noting every text it is asked to count."""

    def __init__(self) -> None:
        super().__init__("cl100k_base")
        self.counted: list[str] = []

    def count(self, text: str) -> int:
        self.counted.append(text)
        return super().count(text)


def _episode(output: str = _OUTPUT) -> Episode:
    """An episode with the operator's words, a fenced tool output and two unresolved items."""
    return Episode(
        id="e1-4", span=Span(first_turn="turn:t1", last_turn="turn:t4", first_seq=1, last_seq=4),
        turn_ids=["t1", "t2", "t3", "t4"],
        source_refs=["turn:t1", "message:m1", "tool:x6"],
        digest="sha256:" + f"{len(output):064x}", owner="conversation", closed_by="max_range",
        operator_intents=[Claim(kind="request", text="operator request in turn:t1",
                                refs=["message:m1"], origin="operator", trust="trusted_operator",
                                quote="Keep amounts in integer cents.\n\n  never floats")],
        artifact_trail=[Claim(kind="tool_run", text="shell `pytest -q` → exit 0",
                              refs=["tool:x6"], origin="tool", trust="untrusted_external",
                              quote=output)],
        unresolved=[Claim(kind="pending_call", text="tool call c1 has no result",
                          refs=["tool:x6"], key="call:c1"),
                    Claim(kind="pending_call", text="tool call c2 has no result",
                          refs=["tool:x6"], key="call:c2")])


def _recalled(ep: Episode, counts: FormCounts | None, open_keys: frozenset[str] = frozenset(),
              held: tuple[str, ...] = ()) -> RecalledEpisode:
    return RecalledEpisode(ref=ep.ref, covers=ep.covers, score=1.0, priority=Priority.NORMAL,
                           reasons=(), episode=ep, open_keys=open_keys, held=held, counts=counts)


def _forms(recalled: RecalledEpisode, counter: TiktokenCounter = COUNTER) -> dict[Form, object]:
    r = Renderer(counter, counter.identity)
    if isinstance(counter, _Spy):
        counter.counted.clear()  # what the renderer counts for itself (framing, roles) aside
    return dict(episode_forms(r, recalled))


@pytest.mark.parametrize(("open_keys", "held"), [
    (frozenset(), ()), (frozenset({"call:c1"}), ()), (frozenset({"call:c1", "call:c2"}), ()),
    (frozenset(), ("tool:x6",)), (frozenset({"call:c2"}), ("message:m1",))])
def test_stored_counts_give_the_forms_a_fresh_count_gives(open_keys: frozenset[str],
                                                          held: tuple[str, ...]) -> None:
    """Forms rendered with the counts stored at archive time equal, block for block and token
    for token, the forms rendered with none, whatever recall finds open or held elsewhere."""
    ep = _episode()
    stored = derive_form_counts(ep, COUNTER)
    assert stored.counter == COUNTER.identity
    assert _forms(_recalled(ep, stored, open_keys, held)) == _forms(
        _recalled(ep, None, open_keys, held))


def test_stored_counts_spare_the_tokenizer_the_stored_chunks() -> None:
    """With the counts stored, the renderer's counter is not asked for the fenced output (the
    bulk of the form), only for what the row does not hold; without them it is."""
    ep = _episode()
    stored = derive_form_counts(ep, COUNTER)
    fresh, reused = _Spy(), _Spy()
    _forms(_recalled(ep, None, frozenset({"call:c1"})), fresh)
    _forms(_recalled(ep, stored, frozenset({"call:c1"})), reused)
    assert any(_OUTPUT.splitlines()[-1] in t for t in fresh.counted)
    assert not any(_OUTPUT.splitlines()[-1] in t for t in reused.counted)
    assert sum(map(len, reused.counted)) < sum(map(len, fresh.counted)) / 10


def test_a_count_is_reused_only_for_its_own_text_and_counter() -> None:
    """Counts are read only when the row's counter is the renderer's, and only for a text whose
    key the row holds: a wrong count stored for this very form is used (the row is read), the
    same row under another tokenizer is ignored, and a changed text is counted afresh."""
    ep = _episode()
    made = unpack_counts(derive_form_counts(ep, COUNTER).data)
    # The chunks' counts wrong and no total for the full form, so it is written from the chunks'
    # (a wrong total: see test_a_wrong_stored_total_is_never_sent).
    total = chunk_key(_full_total_text(ep, frozenset()))
    wrong = {key: n + 1000 for key, n in made.items() if key != total}
    truth = _forms(_recalled(ep, None))
    cl100k_row = FormCounts(COUNTER.identity, pack_counts(wrong))
    used = _forms(_recalled(ep, cl100k_row))
    assert used[Form.FULL].tokens > truth[Form.FULL].tokens + 1000  # type: ignore[attr-defined]
    o200k_row = attrs.evolve(cl100k_row, counter=counter_for_encoding("o200k_base").identity)
    assert _forms(_recalled(ep, o200k_row)) == truth
    changed = _episode(_OUTPUT.replace("PASSED", "FAILED"))
    assert _forms(_recalled(changed, cl100k_row))[Form.FULL] != _forms(
        _recalled(changed, None))[Form.FULL]  # the row still fits its unchanged lines...
    new_quote = [b for b in _forms(_recalled(changed, cl100k_row))[Form.FULL].blocks  # type: ignore[attr-defined]
                 if "FAILED" in b.body]
    assert [b.tokens for b in new_quote] == [COUNTER.count(b.text) for b in new_quote]
    assert chunk_key(new_quote[0].text) not in made  # ...and counts the changed one afresh


def test_a_session_stores_each_archived_episodes_counts_and_recall_reads_them(
        tmp_path: Path) -> None:
    """Importing a history archives it with each episode's form counts beside it (the ledger's
    counter), and the next request's recall hands them to the renderer."""
    history = [{"role": "system", "content": "You are a coding agent."}]
    for k in range(60):
        history.append({"role": "user", "content": f"Request {k}: make billing exact, step {k}."})
        history.append({"role": "assistant", "content": f"Done with billing step {k}."})
    with holon_ctx.open_session(tmp_path / "a.db") as session:
        session.import_history(history)
        session.operator_message("Which billing request asked for step 7?")
        session.next_request(8192).openai_messages  # noqa: B018 - what a runtime reads
    db = sqlite3.connect(tmp_path / "a.db")
    episodes = db.execute("SELECT count(*) FROM episodes").fetchone()[0]
    rows = db.execute("SELECT counter, data FROM episodes_forms").fetchall()
    db.close()
    assert episodes > 0
    assert len(rows) == episodes
    assert {counter for counter, _ in rows} == {COUNTER.identity}
    assert all(unpack_counts(data) for _, data in rows)


def test_the_episode_commands_store_counts_for_what_they_archive_and_rebuild(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``holon-ctx episodes archive`` and ``rebuild`` write a row of form counts per episode, so
    a rebuilt archive is not left to be counted cold by every process that recalls it."""
    from test_episodes_kit import billing_conversation

    from holon_ctx.cli.main import main
    from holon_ctx.ledger.codec import write_jsonl

    conv, _ = billing_conversation(frontend_turns=90)
    src, db = tmp_path / "conv.jsonl", tmp_path / "conv.db"
    with src.open("wb") as out:
        write_jsonl(conv.records, out)
    assert main(["import", str(src), "--db", str(db)]) == 0

    def rows() -> tuple[int, int]:
        con = sqlite3.connect(db)
        try:
            return (con.execute("SELECT count(*) FROM episodes").fetchone()[0],
                    con.execute("SELECT count(*) FROM episodes_forms").fetchone()[0])
        finally:
            con.close()
    assert main(["episodes", "archive", "--db", str(db)]) == 0
    archived = rows()
    assert archived[0] > 0
    assert archived == (archived[0], archived[0])
    assert main(["episodes", "rebuild", "--db", str(db)]) == 0
    assert rows() == archived
    capsys.readouterr()


@pytest.mark.parametrize("open_keys", [frozenset(), frozenset({"call:c1", "call:c2"})])
def test_a_full_form_is_written_only_when_read(open_keys: frozenset[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """With the full form's count stored (each unresolved item resolved, or each still open),
    the planner gets the count and the form is written the first time its blocks are read: a
    recalled episode the plan does not show whole is never written (RFC 0024 decision 6). The
    form written is the one a fresh count gives, block for block."""
    ep = _episode()
    written: list[str] = []
    full_chunks = forms_module.full_chunks

    def spy(*args: object, **kw: object) -> object:
        written.append(ep.ref)
        return full_chunks(*args, **kw)  # type: ignore[arg-type]
    eager = _forms(_recalled(ep, None, open_keys))[Form.FULL]
    assert isinstance(eager, Rendered)
    stored = derive_form_counts(ep, COUNTER)
    monkeypatch.setattr(forms_module, "full_chunks", spy)
    lazy = _forms(_recalled(ep, stored, open_keys))[Form.FULL]
    assert isinstance(lazy, LazyRendered)
    assert (lazy.tokens, lazy.refs) == (eager.tokens, eager.refs)
    assert written == []
    assert lazy.blocks == eager.blocks
    assert lazy.text == eager.text
    assert lazy == eager
    assert written == [ep.ref]


@pytest.mark.parametrize(("open_keys", "held", "recaps"), [
    (frozenset({"call:c1"}), (), b""), (frozenset(), ("tool:x6",), b""),
    (frozenset(), (), b"[]")])
def test_a_full_form_the_stored_total_does_not_name_is_written_at_once(
        open_keys: frozenset[str], held: tuple[str, ...], recaps: bytes) -> None:
    """An unresolved item open and another resolved, a record held elsewhere, recaps merged:
    texts the stored total was not made of, so the form is written and counted now."""
    ep = _episode()
    recalled = attrs.evolve(_recalled(ep, derive_form_counts(ep, COUNTER), open_keys, held),
                            recaps=recaps)
    full = _forms(recalled)[Form.FULL]
    assert not isinstance(full, LazyRendered)
    assert full == _forms(attrs.evolve(recalled, counts=None))[Form.FULL]


def test_a_wrong_stored_total_is_never_sent() -> None:
    """A full form's stored total that its written form does not match (a count stored by other
    code) raises EngineError when the form is read: a plan made with it could be over budget."""
    ep = _episode()
    made = unpack_counts(derive_form_counts(ep, COUNTER).data)
    total = chunk_key(_full_total_text(ep, frozenset()))
    row = FormCounts(COUNTER.identity, pack_counts({**made, total: made[total] + 1}))
    full = _forms(_recalled(ep, row))[Form.FULL]
    assert full.tokens == made[total] + 1  # type: ignore[attr-defined]
    with pytest.raises(EngineError, match="stored count"):
        full.blocks  # type: ignore[attr-defined] # noqa: B018 - written on first read


def test_a_total_stored_by_code_that_wrote_the_form_otherwise_is_not_found(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The full form's total is keyed by a digest of the forms the code writes for a probe
    episode: counts derived while a field's title read otherwise (another version's markup) hold
    no total this code finds, so the form is written and counted — not taken at a stale count."""
    ep = _episode()
    version = forms_module.full_form_version()
    uncached = forms_module.full_form_version.__wrapped__
    monkeypatch.setitem(forms_module._TITLES, Field.UNRESOLVED, "still to do:")
    monkeypatch.setattr(forms_module, "full_form_version", uncached)
    assert uncached() != version
    other = derive_form_counts(ep, COUNTER)
    monkeypatch.undo()
    assert forms_module.full_form_version() == version
    full = _forms(_recalled(ep, other))[Form.FULL]
    assert not isinstance(full, LazyRendered)
    assert full == _forms(_recalled(ep, None))[Form.FULL]
