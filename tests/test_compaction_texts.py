"""Runtime text never breaks compaction (issue 23 defect 1, RFC 0020).

Every text the runtime supplies and compaction turns into envelope input (wait conditions,
operator words, work items and their todos and blockers, tool names and call ids that become
side-effect keys, pins) is fitted where the input is built (``continuity/fitting.py``): control,
format and bidi characters become spaces, a text over the envelope's limits is cut with the ref of
its full text. The property: any ledger the store accepts compacts, and the next request succeeds.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tiers import sized

import holon_ctx
from holon_ctx.continuity.envelope import MAX_ID_CHARS, MAX_OBJECTIVE_CHARS, check_field, id_problem
from holon_ctx.continuity.fitting import fit_id, fit_text
from holon_ctx.errors import InputError
from holon_ctx.ledger.memory import MemoryStore
from holon_ctx.session import ToolCall

#: Characters that once made every compaction of a ledger fail: zero-width joiner, ESC, NUL,
#: right-to-left override, word joiner, BOM, line and paragraph separators, NEL, CR, BEL.
HOSTILE = "\u200d\x1b\x00\u202e\u2060\ufeff\u2028\u2029\x85\r\x07\u200b\u061c\t\n"
_ALPHABET = st.sampled_from([*HOSTILE, *"CI run ok 审批", "\U0001f600", " "])
short_texts = st.text(_ALPHABET, min_size=1, max_size=24)
#: 190 to ~7,000 characters: past an id's 256 and an objective's 4,096.
long_texts = st.builds(lambda unit, times: (unit * times), st.text(_ALPHABET, min_size=1,
                                                                    max_size=12),
                       st.integers(190, 600))
texts = st.one_of(short_texts, short_texts, long_texts)
ids = st.text(st.sampled_from("abcxyz019-_."), min_size=1, max_size=8)

EXAMPLES = sized(100, 2000)


# -- the fitting functions ---------------------------------------------------------------------------
@pytest.mark.parametrize("text", ["CI run", "wait_id:w1", "a" * MAX_ID_CHARS, "审批 通过"])
def test_fit_id_leaves_an_acceptable_id_unchanged(text: str) -> None:
    """Text the envelope accepts is not touched: keys already stored keep matching."""
    assert fit_id(text) == text


@pytest.mark.parametrize(("text", "fitted"), [
    ("CI\u200d run", "CI run"), ("CI\u200drun", "CI run"), ("\x1b[31mred\x1b[0m", "[31mred [0m"),
    ("a\x00b", "a b"), ("\u202egnp.exe", "gnp.exe"), ("x\u2060y\ufeff", "x y"),
    ("two\nlines\tand  spaces", "two lines and spaces"), ("  padded  ", "padded"),
])
def test_fit_id_turns_invisible_characters_into_spaces(text: str, fitted: str) -> None:
    """Control, format and bidi characters and other white space become single spaces."""
    assert fit_id(text) == fitted


def test_a_long_id_is_cut_with_the_ref_of_its_full_text_and_stays_distinct() -> None:
    """Over 256 characters: cut, the note names where the full text is and a digest of it, the
    suffix (the item's key) kept; two texts that differ only past the cut stay two ids."""
    first = fit_id("x" * 400 + "1", suffix=" [wait_id:w1]", where="episode:e1-2")
    second = fit_id("x" * 400 + "2", suffix=" [wait_id:w1]", where="episode:e1-2")
    assert first != second
    for fitted in (first, second):
        assert len(fitted) <= MAX_ID_CHARS
        assert id_problem(fitted) is None
        assert fitted.startswith("xxx")
        assert fitted.endswith(" [wait_id:w1]")
        assert "[clipped; full text: episode:e1-2; sha256:" in fitted


def test_a_long_objective_keeps_its_lines_and_is_cut_with_its_ref() -> None:
    """An objective keeps newlines and tabs (prose), loses other control characters, and is cut
    at the limit with the ref of the full text."""
    assert fit_text("fix\tthe\x1b build\nthen\u202e ship") == "fix\tthe build\nthen ship"
    fitted = fit_text("y" * 9000, where="message:m3")
    assert len(fitted) <= MAX_OBJECTIVE_CHARS
    assert fitted.endswith("]")
    assert "full text: message:m3" in fitted
    assert not check_field("objective", fitted)


@settings(max_examples=sized(200, 1000), deadline=None)
@given(text=st.text(), suffix=st.text(max_size=40), where=st.none() | st.text(max_size=40))
def test_any_text_fits_the_envelope(text: str, suffix: str, where: str | None) -> None:
    """Whatever the text, the fitted id passes the envelope's id rule and the fitted objective
    its objective rule (or is empty: nothing visible, the caller's own words are used)."""
    fitted = fit_id(text, suffix=suffix, where=where)
    assert id_problem(fitted) is None, fitted
    objective = fit_text(text, where=where)
    assert objective == "" or not check_field("objective", objective), objective


# -- the property: any ledger the store accepts compacts, and the next request succeeds ----------
@st.composite
def _step(draw: st.DrawFn, turn: int) -> tuple[str, tuple[Any, ...]]:
    kind = draw(st.sampled_from([
        "wait", "work_item", "tool_call", "tool_run", "brief", "note", "event", "task", "pin",
        "close_wait"]))
    t = draw(texts)
    if kind == "wait":
        return kind, (f"w{turn}-{draw(ids)}", t)
    if kind == "work_item":
        return kind, (draw(ids), t, draw(st.lists(texts, max_size=2)), draw(st.none() | texts))
    if kind == "tool_call":
        return kind, (f"c{turn}-{draw(ids)}", t, draw(texts),
                      draw(st.sampled_from([None, "unknown", "partial", "completed"])))
    if kind == "tool_run":
        return kind, (t, draw(texts), draw(texts))
    return kind, (t,)


def _apply(session: holon_ctx.Session, kind: str, args: tuple[Any, ...]) -> None:
    if kind == "wait":
        session.open_wait(args[0], args[1])
    elif kind == "close_wait":
        waits = list(session.store.open_waits(session.store.end_pos()))
        if waits:
            session.close_wait(waits[0].wait_id)
    elif kind == "work_item":
        session.set_work_item(args[0], objective=args[1], todos=args[2], blocker=args[3])
    elif kind == "tool_call":
        call_id, name, output, effect = args
        session.assistant_message("", tool_calls=[ToolCall(call_id, name, "{}")])
        session.tool_result(call_id, output, side_effect=effect)
    elif kind == "tool_run":
        session.tool_run(args[0], args[1], args[2], side_effect="unknown")
    elif kind == "brief":
        session.brief(args[0])
    elif kind == "note":
        session.runtime_note(args[0])
    elif kind == "event":
        session.external_event("ci", args[0])
    elif kind == "task":
        session.task_result("task-1", "succeeded", args[0])
    elif kind == "pin":
        turn = session.current_turn
        assert turn is not None
        session.pin(turn, args[0])


@st.composite
def runtime_histories(draw: st.DrawFn) -> list[tuple[str, list[tuple[str, tuple[Any, ...]]]]]:
    """Turns: each the operator's words (hostile or long) and a few runtime steps."""
    return [(draw(texts), draw(st.lists(_step(turn), max_size=3)))
            for turn in range(draw(st.integers(3, 7)))]


def _run(session: holon_ctx.Session,
         history: list[tuple[str, list[tuple[str, tuple[Any, ...]]]]]) -> None:
    for words, steps in history:
        try:
            session.operator_message(words)
        except InputError:
            continue  # the store did not accept it (e.g. words of white space only)
        for kind, args in steps:
            with contextlib.suppress(InputError):  # refused by the store: nothing appended
                _apply(session, kind, args)
        # Compacts first (every turn under this policy): must never fail on what was accepted.
        session.next_request(budget_tokens=6000)


@pytest.mark.scaled
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                      HealthCheck.data_too_large])
@given(history=runtime_histories())
def test_any_accepted_ledger_compacts_and_the_next_request_succeeds(
        history: list[tuple[str, list[tuple[str, tuple[Any, ...]]]]]) -> None:
    """Defect 1: a wait condition with a ZWJ, ESC, NUL, U+202E, U+2060 or U+FEFF, or of ~190+
    characters, made every compaction raise ``ContinuityInputError`` and, while the budget bound,
    every request after a new turn. Now every free-text field of every record kind, with control,
    format and long texts, compacts (seals an envelope), and every request succeeds."""
    policy = holon_ctx.CompactionPolicy(recent_turns=2, every_turns=1)
    with holon_ctx.open_session(MemoryStore(), compaction=policy) as session:
        _run(session, history)
        session.compact()
        session.next_request(budget_tokens=6000)
        continuity = session._upkeep.continuity
        assert continuity is not None
        if session.store.end_pos() and len(list(session.store.iter_records())) > 0:
            # Turns older than the recent window were archived and sealed.
            envelope = continuity.latest_envelope(session._upkeep.identity.session_id)
            episodes = session._upkeep.episodes.count()
            assert (envelope is not None) == (episodes > 0)


def test_holon_ctx_compact_seals_a_ledger_of_hostile_texts(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """`holon-ctx compact` on a ledger whose wait conditions, work items and operator words hold
    invisible characters and long texts exits 0, seals an envelope, and does again after more
    turns (it exited 2 every time)."""
    from holon_ctx.cli.main import main

    db = tmp_path / "hostile.db"
    hostile = ["CI\u200d run", "\x1b[31mdeploy\x1b[0m", "a\x00b", "\u202eevil", "x\u2060y",
               "\ufeffbom", "z" * 300 + "\u200d", "long wait " * 80]
    with holon_ctx.open_session(db, compaction=None) as session:
        for n, text in enumerate(hostile * 8):  # past the CLI's recent window (48 turns)
            session.operator_message(f"step {n}: {text}")
            session.open_wait(f"w{n}", text)
            session.set_work_item(f"wi{n % 3}", objective=text, todos=[text], blocker=text)
            session.tool_run(f"tool {text[:40]}", "{}", text, side_effect="unknown")
    assert main(["compact", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "sealed ce-" in out
    with holon_ctx.open_session(db, compaction=None) as session:
        for n, text in enumerate(hostile * 4):
            session.operator_message(f"more {n}: {text}")
            session.open_wait(f"v{n}", text)
    assert main(["compact", "--db", str(db)]) == 0
    assert "sealed ce-" in capsys.readouterr().out
