"""The preview emphasises a structure line by what its block says it is (issue 24 item 3).

A heading, an alert, a fold line and the relation line stand out in the preview (bold, red,
dim italic, blue). Their blocks say what they are (``Block.mark``, carried through a request
part's spans), so the preview reads the mark, never the line's start.

The proof that nothing moved: on the demo and a shared trajectory, at several budgets and many
turns, every line of every session part and of every stateless block gets the same emphasis from
the marks as :func:`styled_by_prefix` — the prefix test the preview used before, kept here as the
oracle — gives it from the text, and the lines the oracle emphasises are not few.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import msgspec
import pytest
from test_preview_is_sent import demo_db, trajectory_db
from test_request_part_blocks import _turns

from holon_ctx.cli.preview import _MARK_STYLES, TrustOf, _marked_lines
from holon_ctx.cli.preview_cmds import opened, planned, trust_lookup, viewed
from holon_ctx.cli.session_view import part_blocks
from holon_ctx.projection.base.formats import ALERT, FOLD_PREFIX, HEADING, RELATION_PREFIX
from holon_ctx.projection.base.items import Block, BlockKind, Mark
from holon_ctx.projection.base.spans import Span, blocks_of, spans_of
from holon_ctx.projection.provider_formats.native import Part, Role
from holon_ctx.projection.session.session import SessionRequest

__all__ = ["demo_db", "trajectory_db"]

#: The oracle: the preview's emphasis of a structure line by its start, before blocks had marks.
_PREFIX_STYLES = ((HEADING, "bold"), (ALERT, "bold red"), (FOLD_PREFIX, "italic dim"),
                  (RELATION_PREFIX, "bold blue"))


def styled_by_prefix(line: str) -> str:
    return next((s for prefix, s in _PREFIX_STYLES if line.startswith(prefix)), "")


def _check(blocks: tuple[Block, ...], trust_of: TrustOf, seen: dict[str, int]) -> None:
    for block in blocks:
        for kind, mark, line in _marked_lines(block, trust_of):
            if kind != "structure":
                continue
            style = _MARK_STYLES.get(mark, "")
            assert style == styled_by_prefix(line), (line, mark, block.kind)
            if style:
                seen[style] = seen.get(style, 0) + 1


def _compare(db: Path, budgets: tuple[int, ...], every: int) -> dict[str, int]:
    """Every session part's and stateless block's structure lines, marks against prefixes:
    how many lines of each emphasis were compared."""
    args = argparse.Namespace(db=str(db), source=None, session_key=None)
    seen: dict[str, int] = {}
    with opened(args) as (store, projector):
        trust_of = trust_lookup(store)
        for budget in budgets:
            for turn in _turns(db, every):
                request = viewed(store, projector, budget, turn, "session")[2].request
                for _, _, blocks in part_blocks(request):
                    _check(blocks, trust_of, seen)
                # `viewed(..., "stateless")`'s plan without walking to the session request again
                # (the walk above: most of this test's time at 2048).
                plan = planned(store, projector, budget, turn)[1]
                for items in plan.section_items.values():
                    for _, rendered in items:
                        _check(rendered.blocks, trust_of, seen)
    return seen


def test_the_demos_lines_are_emphasised_by_their_marks_as_by_their_starts(demo_db: Path) -> None:
    seen = _compare(demo_db, (2048, 8192), every=40)
    # Each emphasis is met: headings (turns, recalled episodes), alerts, folds, relations.
    assert set(seen) == {"bold", "bold red", "italic dim", "bold blue"}, seen
    assert sum(seen.values()) > 100, seen


@pytest.mark.slow
def test_a_trajectorys_lines_are_emphasised_by_their_marks_as_by_their_starts(
        trajectory_db: Path) -> None:
    seen = _compare(trajectory_db, (4096, 8192, 32768), every=10)
    # 60 styled lines when written (headings, alerts, relation lines: this ledger folds none).
    assert sum(seen.values()) >= 50, seen


def test_the_mark_is_read_not_the_line() -> None:
    """A line that starts like a heading but whose block has no mark is not emphasised, and a
    marked line is, whatever its words: the data decides, not the text."""
    plain = Block(head="### not a heading\n")
    marked = Block(head="a turn\n", kind=BlockKind.HEADING, mark=Mark.HEADING)
    assert [m for _, m, _ in _marked_lines(plain, lambda _r: None)] == [None]
    assert [m for _, m, _ in _marked_lines(marked, lambda _r: None)] == [Mark.HEADING]
    # Only the block's first line carries it (an alert's label, not its fence line).
    alert = Block(head='ALERT x → error\n<data ref="tool:x1" trust="untrusted_external">\n',
                  body="boom\n", tail="</data>\n", refs=("tool:x1",), kind=BlockKind.FENCED,
                  trust="untrusted_external", mark=Mark.ALERT)
    assert [m for _, m, _ in _marked_lines(alert, lambda _r: None)] == [
        Mark.ALERT, None, None, None]


def test_a_parts_spans_carry_the_marks() -> None:
    """A part's spans keep each block's mark, through the epoch's encoding and back to blocks
    (a saved epoch is shown as the request was: EPOCH_FORMAT 3)."""
    blocks = (Block(head="relation: new_task — …\n", mark=Mark.RELATION),
              Block(head="- folded t1–t9: tick×9 (9 low-value turns)\n", mark=Mark.FOLD),
              Block(head="plain\n"))
    text = "".join(b.text for b in blocks)
    part = Part(role=Role.USER, text=text, text_tokens=1, content=text, content_tokens=1,
                spans=spans_of(blocks))
    decoded = msgspec.json.decode(msgspec.json.encode(part), type=Part)
    assert [s.mark for s in decoded.spans] == ["relation", "fold", None]
    back = blocks_of(decoded.content, decoded.spans)
    assert [b.mark for b in back] == [Mark.RELATION, Mark.FOLD, None]
    assert back == blocks
    # A span saved before marks (format 2: six values) would decode as plain: why the format
    # moved to 3, so that such an epoch is re-planned instead.
    assert msgspec.json.decode(b'["label", null, 6, 0, 0, null]', type=Span).mark is None


def _sent(request: object) -> SessionRequest:
    """The session request (messages layout) behind a library request: it says whether it
    re-planned."""
    return request._messages  # type: ignore[attr-defined,no-any-return]


def test_an_epoch_saved_before_marks_is_replanned_not_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An epoch saved at EPOCH_FORMAT 2 (spans without marks) is not found by code at 3: the
    session re-plans instead of showing the old parts' headings plain. The same epoch read
    back at its own format is appended to, not re-planned (the control)."""
    import holon_ctx
    from holon_ctx.projection.session import session_base

    db = tmp_path / "agent.db"
    monkeypatch.setattr(session_base, "EPOCH_FORMAT", 2)
    with holon_ctx.open_session(db, compaction=None) as session:
        session.operator_message("Upgrade the payments service to Python 3.12.")
        assert _sent(session.next_request(budget_tokens=4096)).replanned
    with holon_ctx.open_session(db, compaction=None) as session:
        session.operator_message("Then the billing service.")
        assert not _sent(session.next_request(budget_tokens=4096)).replanned
    monkeypatch.undo()
    with holon_ctx.open_session(db, compaction=None) as session:
        session.operator_message("And the ledger service.")
        request = _sent(session.next_request(budget_tokens=4096))
    assert request.replanned
    assert any(s.mark for part in request.parts for s in part.spans)
