"""The preview at any terminal width (issue 16): golden files at 60, 80 and 120 columns.

The ledger is the small golden one (tests/golden/small.jsonl), compacted so that every part of
the summary has something to say: governed control state (obligations and a constraint from the
sealed envelope), a fold, a recalled episode, and items left out with their reasons. The window is
cut to four turns so the archived episode lies before it and is recalled. Regenerate with
``python3 dev.py goldens`` and review the diff it shows.
"""

from __future__ import annotations

import io
import itertools
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from rich.cells import cell_len
from rich.console import Console
from test_cli_preview_golden import GOLDEN, SMALL, check_golden

from holon_ctx.cli.common import control_source, open_db
from holon_ctx.cli.episodes_cmd import open_episode_source
from holon_ctx.cli.preview import print_preview
from holon_ctx.cli.preview_cmds import trust_lookup
from holon_ctx.cli.preview_summary import left_out_rows
from holon_ctx.compaction import SessionConfig, compact
from holon_ctx.continuity import ContinuityStore
from holon_ctx.ledger.episode_store import SqliteEpisodeStore
from holon_ctx.ledger.importer import import_jsonl
from holon_ctx.ledger.sqlite import SqliteStore
from holon_ctx.memory.archiver import ArchivePolicy, Archiver
from holon_ctx.projection.planning.projector import Projection, Projector
from holon_ctx.projection.planning.view import WindowLimits

WIDTHS = (60, 80, 120)
BUDGET = 900


@pytest.fixture(scope="module")
def compacted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SqliteStore, Projection]]:
    """small.jsonl in SQLite, its first five turns archived and an envelope sealed (fixed clock),
    and its projection at 900 tokens over a four-turn window."""
    db = tmp_path_factory.mktemp("widths") / "small.db"
    store = open_db(str(db), must_exist=False)
    import_jsonl(SMALL, store)
    episodes = SqliteEpisodeStore(store.path, create=True)
    continuity = ContinuityStore(store.path)
    ticks = itertools.count()
    compact(store, episodes, continuity, session=SessionConfig(),
            clock=lambda: datetime(2026, 12, 1, tzinfo=UTC) + timedelta(seconds=next(ticks)),
            archiver=Archiver(store, episodes, policy=ArchivePolicy(recent_turns=3)))
    continuity.close()
    episodes.close()
    source = open_episode_source(store)
    with control_source(store) as control:
        projector = Projector(store, episodes=source, control=control,
                              limits=WindowLimits(page_turns=4, max_turns=4))
        yield store, projector.project(budget_tokens=BUDGET)
    if source is not None:
        source.close()
    store.close()


def render(store: SqliteStore, p: Projection, width: int) -> str:
    buf = io.StringIO()
    out = Console(file=buf, width=width, no_color=True, color_system=None, highlight=False,
                  soft_wrap=False)
    print_preview(out, p, trust_lookup(store))
    return buf.getvalue()


@pytest.mark.parametrize("width", WIDTHS)
def test_preview_matches_golden_at_width(compacted: tuple[SqliteStore, Projection],
                                         width: int) -> None:
    """The preview at 60, 80 and 120 columns is byte-for-byte its reviewed golden file."""
    check_golden(f"preview_compacted_{BUDGET}_w{width}.txt", render(*compacted, width))


@pytest.mark.parametrize("width", [40, 50, *WIDTHS])
def test_every_line_fits_and_no_reason_is_dropped(compacted: tuple[SqliteStore, Projection],
                                                  width: int) -> None:
    """No line is wider than the terminal (down to --width's minimum of 40), and every left-out
    item keeps its reason: on its own row, or on the stacked line just below it."""
    store, p = compacted
    text = render(store, p, width)
    lines = text.splitlines()
    assert max(cell_len(line) for line in lines) <= width
    table = lines[next(i for i, line in enumerate(lines) if line.startswith("left out or shrunk")):]
    rows = left_out_rows(p)
    assert rows, "the fixture must leave items out"
    for d, reason in rows:
        at = next(i for i, line in enumerate(table) if line.startswith(f"  {d.key} "))
        # The row, and its stacked continuation (indented deeper) if any.
        block = [table[at], *itertools.takewhile(lambda line: line.startswith("    "),
                                                 table[at + 1:])]
        assert re.search(rf"\b{reason}\b", " ".join(block)), (width, d.key, block)


def test_the_summary_comes_before_the_prompt(compacted: tuple[SqliteStore, Projection]) -> None:
    """At 80 columns the summary (governed state, folds, episodes, left out) ends before the
    prompt starts, within the first 40 lines."""
    store, p = compacted
    lines = render(store, p, 80).splitlines()
    prompt = lines.index("the prompt, as the model reads it")
    assert prompt < 40
    head = "\n".join(lines[:prompt])
    for label in ("governed", "folded", "episodes", "left out"):
        assert re.search(rf"^{label}\s", head, re.MULTILINE), label
    assert "3 pending obligations, 1 exact operator constraint" in head
    assert "never from a summary" in head
    assert "1 recalled, ranked episodes holding a pinned open item first" in head


def test_goldens_exist_for_each_width() -> None:
    """One golden file per tested width (a renamed width would leave a stale file behind)."""
    found = {p.name for p in GOLDEN.glob("preview_compacted_*_w*.txt")}
    assert found == {f"preview_compacted_{BUDGET}_w{w}.txt" for w in WIDTHS}


@pytest.mark.parametrize("width", [40, *WIDTHS])
def test_explain_and_diff_fit_the_width(capsys: pytest.CaptureFixture[str], width: int) -> None:
    """explain and diff wrap every line to the width (titles and long form changes included)."""
    from holon_ctx.cli.main import main

    for argv in (["explain", str(SMALL), "--budget", "300", "turn:t5"],
                 ["diff", str(SMALL), "--budget", "300", "--budget", "2000"]):
        assert main([*argv, "--plain", "--width", str(width)]) == 0
        out = capsys.readouterr().out
        assert max(cell_len(line) for line in out.splitlines()) <= width, argv



# -- the session request's preview (the default mode) -----------------------------------------
#: At 900 the session request is the whole history (nothing left out); at 600 it re-plans at the
#: newest turn: an epoch planned at its low-water mark, a recalled episode, items left out.
SESSION_BUDGET = 600


@pytest.fixture(scope="module")
def session_shown(compacted: tuple[SqliteStore, Projection]) -> Iterator[dict[str, Any]]:
    """What ``preview --db`` shows by default of the compacted ledger at 600 tokens: the
    session request a runtime gets at the newest turn (RFC 0024, decision 5), as the command
    hands it to the printer."""
    from holon_ctx.cli.preview_cmds import viewed

    store, _ = compacted
    source = open_episode_source(store)
    with control_source(store) as governed:
        projector = Projector(store, episodes=source, control=governed)
        _, projection, view = viewed(store, projector, SESSION_BUDGET, None, "session")
        control = governed.control_state() if governed else None
        yield {"p": projection, "epoch": view.line(), "request": view.request,
               "control": control}
    if source is not None:
        source.close()


def render_session(store: SqliteStore, shown: dict[str, Any], width: int) -> str:
    buf = io.StringIO()
    out = Console(file=buf, width=width, no_color=True, color_system=None, highlight=False,
                  soft_wrap=False)
    print_preview(out, shown["p"], trust_lookup(store), epoch=shown["epoch"],
                  request=shown["request"], control=shown["control"])
    return buf.getvalue()


@pytest.mark.parametrize("width", WIDTHS)
def test_session_preview_matches_golden_at_width(compacted: tuple[SqliteStore, Projection],
                                                 session_shown: dict[str, Any],
                                                 width: int) -> None:
    """The session request's preview (messages by role and place, the epoch line, "enters at"
    as the plan's budget) at 60, 80 and 120 columns is byte-for-byte its reviewed golden file."""
    text = render_session(compacted[0], session_shown, width)
    assert "the request, message by message, as the model reads it" in text
    check_golden(f"preview_session_{SESSION_BUDGET}_w{width}.txt", text)


@pytest.mark.parametrize("width", [40, 50, *WIDTHS])
def test_every_session_line_fits_and_keeps_its_reason(compacted: tuple[SqliteStore, Projection],
                                                      session_shown: dict[str, Any],
                                                      width: int) -> None:
    """The session preview fits every width down to 40 columns, and each left-out item keeps
    its reason on its row or the stacked line below it."""
    lines = render_session(compacted[0], session_shown, width).splitlines()
    assert max(cell_len(line) for line in lines) <= width
    table = lines[next(i for i, line in enumerate(lines) if line.startswith("left out or shrunk")):]
    rows = left_out_rows(session_shown["p"])
    assert rows, "the fixture must leave items out in session mode too"
    for d, reason in rows:
        at = next(i for i, line in enumerate(table) if line.startswith(f"  {d.key} "))
        block = [table[at], *itertools.takewhile(lambda line: line.startswith("    "),
                                                 table[at + 1:])]
        assert re.search(rf"\b{reason}\b", " ".join(block)), (width, d.key, block)
