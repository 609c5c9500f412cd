"""Compaction wiring: archive → governed state from the ledger → envelope → pinned control state."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from importlib import resources
from pathlib import Path

import pytest

from holon_ctx.compaction import GovernedControl, SessionConfig, compact
from holon_ctx.continuity import (
    CompactionStep,
    ContinuityStore,
    DecisionKind,
    SideEffectStatus,
    rehydrate,
)
from holon_ctx.continuity.records import SideEffectRecord
from holon_ctx.continuity.state import ResumeContext
from holon_ctx.ledger.episode_store import SqliteEpisodeStore
from holon_ctx.ledger.importer import import_jsonl
from holon_ctx.ledger.sqlite import SqliteStore
from holon_ctx.memory.episodes import encode_episode
from holon_ctx.projection.planning.projector import Projector

SESSION = SessionConfig()


# One clock for the module: the governed store refuses a clock that goes backwards.
_TICKS = itertools.count()


def _clock() -> Callable[[], datetime]:
    return lambda: datetime(2026, 11, 30, 18, 0, tzinfo=UTC) + timedelta(seconds=next(_TICKS))


def _demo(tmp_path: Path) -> tuple[SqliteStore, SqliteEpisodeStore, ContinuityStore]:
    """The demo ledger imported into a new SQLite file, with its episode and governed stores."""
    db = tmp_path / "demo.db"
    ledger = SqliteStore(db)
    demo = resources.files("holon_ctx") / "data" / "demo.jsonl"
    with resources.as_file(demo) as path:
        import_jsonl(path, ledger)
    return ledger, SqliteEpisodeStore(db), ContinuityStore(db)


@pytest.fixture
def compacted(tmp_path: Path) -> tuple[SqliteStore, SqliteEpisodeStore, ContinuityStore, str]:
    ledger, episodes, continuity = _demo(tmp_path)
    result = compact(ledger, episodes, continuity, session=SESSION, clock=_clock())
    assert result.envelope_id is not None
    return ledger, episodes, continuity, result.envelope_id


def _resume() -> ResumeContext:
    return ResumeContext(session_id=SESSION.session_id, tenant_id=SESSION.tenant_id,
                         principal_id=SESSION.principal_id,
                         authorization_mode=SESSION.authorization_mode.value)


def _summary(episodes: SqliteEpisodeStore) -> bytes:
    return b"".join(encode_episode(ep) for ep in episodes.iter_episodes())


def test_compaction_seals_an_envelope_bound_to_the_archived_range(compacted) -> None:
    """The envelope names the archived turn range and the operator's pinned constraint."""
    _, episodes, continuity, envelope_id = compacted
    envelope = continuity.latest_envelope(SESSION.session_id)
    assert envelope is not None
    assert envelope.envelope_id == envelope_id
    first = next(episodes.iter_episodes()).span.first_turn
    assert envelope.source_event_range.first == first
    assert "message:m009" in envelope.exact_constraint_refs
    assert envelope.requires_reauthorization is True


def test_unknown_side_effect_blocks_rehydration_and_is_pinned(compacted) -> None:
    """The demo's timed-out deploy is unknown: rehydration blocks and the prompt says so."""
    ledger, episodes, continuity, envelope_id = compacted
    decision = rehydrate(continuity, envelope_id, summary_bytes=_summary(episodes),
                         resume=_resume(), clock=_clock())
    assert decision.kind is DecisionKind.BLOCKED_ON_RECONCILIATION
    assert "context_rehydration" not in decision.event_types
    assert decision.authorized is False
    projection = Projector(ledger, control=GovernedControl(continuity)).project(
        budget_tokens=1024, verify=True)
    assert "BLOCKED ON RECONCILIATION" in projection.text
    assert "never retry the call" in projection.text
    assert "message:m009: " in projection.text  # the exact constraint, from the governed store


def test_reconciled_side_effect_leaves_the_prompt(compacted) -> None:
    """After the runtime records the deploy as committed, the blocking notice is gone."""
    ledger, _episodes, continuity, _ = compacted
    blocking = continuity.unresolved_side_effects(SESSION.session_id)
    assert len(blocking) == 1
    continuity.record_side_effect(SideEffectRecord(
        idempotency_key=blocking[0].idempotency_key, tenant_id=SESSION.tenant_id,
        session_id=SESSION.session_id, status=SideEffectStatus.COMMITTED), at=_clock()())
    assert not continuity.reconciliation_blocking(SESSION.session_id)
    text = Projector(ledger, control=GovernedControl(continuity)).project(
        budget_tokens=1024).text
    assert "BLOCKED ON RECONCILIATION" not in text


def test_tampered_summary_fails_validation(compacted) -> None:
    """A summary that differs by one byte from what was sealed fails with a digest mismatch."""
    _, episodes, continuity, envelope_id = compacted
    tampered = _summary(episodes).replace(b"canary", b"Canary", 1)
    decision = rehydrate(continuity, envelope_id, summary_bytes=tampered, resume=_resume(),
                         clock=_clock())
    assert decision.kind is DecisionKind.CONTINUITY_VALIDATION_FAILED
    codes = {f.code.value for f in decision.findings}
    assert "summary_digest_mismatch" in codes
    # The digest failure does not hide the unknown side effect.
    assert decision.reconciliation_required is True


def test_compaction_is_idempotent(compacted) -> None:
    """A second run archives nothing new and seals no second envelope."""
    ledger, episodes, continuity, envelope_id = compacted
    again = compact(ledger, episodes, continuity, session=SESSION, clock=_clock())
    assert again.envelope_id is None
    assert continuity.envelope_ids(SESSION.session_id) == (envelope_id,)


def test_summary_text_cannot_change_control_state(compacted) -> None:
    """Control state comes from the governed store: an episode claiming approval changes nothing."""
    ledger, _, continuity, _ = compacted
    before = GovernedControl(continuity).control_state()
    text = Projector(ledger, control=GovernedControl(continuity)).project(budget_tokens=4096).text
    after = GovernedControl(continuity).control_state()
    assert before == after
    assert "authorized: true" not in text.lower()


def test_compact_cli_seals_and_is_idempotent(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`holon-ctx compact` archives and seals once; a second run says there is nothing to do."""
    from holon_ctx.cli.main import main

    db = tmp_path / "l.db"
    demo = resources.files("holon_ctx") / "data" / "demo.jsonl"
    with resources.as_file(demo) as path:
        assert main(["import", str(path), "--db", str(db)]) == 0
    assert main(["compact", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "sealed ce-t001-t214" in out
    assert "tool:x074" in out  # the unreconciled deploy is named
    assert main(["compact", "--db", str(db)]) == 0
    assert "nothing to compact" in capsys.readouterr().out
    assert main(["project", "--db", str(db), "--budget", "2048"]) == 0
    assert "BLOCKED ON RECONCILIATION" in capsys.readouterr().out


def test_compact_cli_missing_database_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A missing database is exit status 2 with one line naming it."""
    from holon_ctx.cli.main import main

    assert main(["compact", "--db", str(tmp_path / "none.db")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"holon-ctx: error: {tmp_path / 'none.db'}: no such database file"]


def test_every_side_effect_of_the_session_is_sealed(compacted) -> None:
    """The sealed snapshot carries every side-effect ledger entry; the envelope names the unknown one."""
    _ledger, _episodes, continuity, envelope_id = compacted
    effects = continuity.side_effects(SESSION.session_id)
    snapshot = continuity.compaction_steps(envelope_id)[CompactionStep.GOVERNED_SNAPSHOT]
    assert {(e.idempotency_key, e.status) for e in snapshot.side_effects} == {
        (e.idempotency_key, e.status) for e in effects}
    envelope = continuity.latest_envelope(SESSION.session_id)
    assert envelope is not None
    assert envelope.idempotency_key == continuity.unresolved_side_effects(
        SESSION.session_id)[0].idempotency_key


@pytest.mark.parametrize("blank", ["", " ", "\n\t ", "\x1b", "\x1b[0m\x07"])
def test_operator_words_of_white_space_or_control_characters_never_stop_compaction(
        blank: str) -> None:
    """Found by the session property: operator words that are only white space (or a terminal
    escape), archived last, became the envelope's objective, which the validator refuses
    (``$.objective: is empty``, ``contains control character U+001B``), so the runtime's next
    request raised. The objective is the newest words that say something, control characters
    other than newline and tab made spaces."""
    import holon_ctx
    from holon_ctx.ledger.memory import MemoryStore

    session = holon_ctx.open_session(MemoryStore(), compaction=holon_ctx.CompactionPolicy(
        recent_turns=4, every_turns=3))
    for text in (" ", "00:0:1", blank, f"\x1b[1mgo\x1b[0m{blank}", blank, blank, blank, blank):
        session.operator_message(text)
    request = session.next_request(budget_tokens=120)  # compacts first (the budget binds)
    assert request.used_tokens <= 120
    upkeep = session._upkeep
    assert upkeep.continuity is not None
    envelope = upkeep.continuity.latest_envelope(upkeep.identity.session_id)
    session.close()
    assert envelope is not None
    # The newest archived range holds only blank words here: the envelope says so in its own
    # words rather than carrying an empty objective.
    assert envelope.objective in ("00:0:1", "[1mgo [0m", "continue the archived work")


def test_a_crashed_compaction_with_other_inputs_is_resealed_under_the_next_id(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A compaction that crashed after journaling its governed snapshot, then finds the ledger
    moved on (other inputs for the same range), seals under ``<id>-r2`` instead of raising
    ``CompactionConflictError`` at every compaction until a new range is archived; the crashed
    id stays incomplete and is never used. The crashed journal is left as a backend without
    one-transaction seals (or an older holon-ctx) leaves it, a write at a time: a crash inside
    a SQLite compaction's transaction leaves nothing (the next test)."""
    import contextlib

    import attrs

    import holon_ctx.compaction as compaction_module
    from holon_ctx.continuity.sqlite_backend import SQLiteBackend

    real = compaction_module.prepare_compaction
    crashed: list[str] = []

    def crash_once(store: ContinuityStore, request: object, **kwargs: object) -> object:
        if not crashed:
            crashed.append(request.envelope_id)  # type: ignore[attr-defined]

            def hook(step: CompactionStep) -> None:
                if step is CompactionStep.GOVERNED_SNAPSHOT:
                    raise RuntimeError("killed")
            real(store, attrs.evolve(request, objective="words since superseded"),  # type: ignore[misc]
                 clock=kwargs["clock"], fault_hook=hook)  # type: ignore[arg-type]
        return real(store, request, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(compaction_module, "prepare_compaction", crash_once)
    ledger, episodes, continuity = _demo(tmp_path)
    with monkeypatch.context() as m:
        m.setattr(SQLiteBackend, "batch", lambda _self: contextlib.nullcontext())
        with pytest.raises(RuntimeError, match="killed"):
            compact(ledger, episodes, continuity, session=SESSION, clock=_clock())
    result = compact(ledger, episodes, continuity, session=SESSION, clock=_clock())
    assert result.envelope_id == f"{crashed[0]}-r2"
    assert not continuity.is_compaction_complete(crashed[0])
    latest = continuity.latest_envelope(SESSION.session_id)
    assert latest is not None
    assert latest.envelope_id == result.envelope_id


def test_a_compaction_that_fails_while_sealing_leaves_no_governed_write(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The governed facts, journal and envelope of one compaction are one transaction (RFC
    0024): a failure while sealing (here after the identity, resources, obligations and
    checkpoint were written and half the journal) leaves the governed store as it was, and
    the next compaction seals under the range's own id."""
    import holon_ctx.compaction as compaction_module

    real = compaction_module.prepare_compaction

    def crash(store: ContinuityStore, request: object, **kwargs: object) -> object:
        def hook(step: CompactionStep) -> None:
            if step is CompactionStep.GOVERNED_SNAPSHOT:
                raise RuntimeError("killed")
        return real(store, request, clock=kwargs["clock"], fault_hook=hook)  # type: ignore[arg-type]

    ledger, episodes, continuity = _demo(tmp_path)
    monkeypatch.setattr(compaction_module, "prepare_compaction", crash)
    with pytest.raises(RuntimeError, match="killed"):
        compact(ledger, episodes, continuity, session=SESSION, clock=_clock())
    sid = SESSION.session_id
    assert continuity.last_recorded_at() is None
    assert continuity.session_identity(sid) is None
    assert continuity.checkpoint(sid) is None
    assert continuity.envelope_ids(sid) == ()
    monkeypatch.setattr(compaction_module, "prepare_compaction", real)
    result = compact(ledger, episodes, continuity, session=SESSION, clock=_clock())
    assert result.envelope_id is not None
    assert not result.envelope_id.endswith("-r2")
    assert continuity.is_compaction_complete(result.envelope_id)


def test_the_session_compaction_never_writes_its_configured_budget_back() -> None:
    """Defect 7 on the session path: ``SessionConfig.budget_remaining`` is the first budget only.
    Every compaction wrote it back, so a budget the runtime had spent to 0 was 100 again at the
    next compaction; now later envelopes seal the governed 0."""
    import holon_ctx
    from holon_ctx.continuity import SessionResources
    from holon_ctx.ledger.memory import MemoryStore

    session = holon_ctx.open_session(
        MemoryStore(), compaction=holon_ctx.CompactionPolicy(recent_turns=2, every_turns=1),
        identity=SessionConfig(budget_remaining=100))
    for n in range(10):
        session.operator_message(f"step {n}")
        session.tool_run("shell", f"make {n}", "ok")
        session.open_wait(f"w{n}", f"CI run {n}")
        session.next_request(budget_tokens=4000)
    continuity, sid = session._upkeep.continuity, SESSION.session_id
    assert continuity is not None
    first = continuity.latest_envelope(sid)
    assert first is not None
    assert first.budget_remaining == 100
    continuity.set_session_resources(SessionResources(session_id=sid, budget_remaining=0),
                                     at=datetime.now(UTC))
    for n in range(10, 20):
        session.operator_message(f"step {n}")
        session.tool_run("shell", f"make {n}", "ok")
        session.open_wait(f"w{n}", f"CI run {n}")
        session.next_request(budget_tokens=4000)
    later = continuity.latest_envelope(sid)
    session.close()
    assert later is not None
    assert later.envelope_id != first.envelope_id
    assert later.budget_remaining == 0
