"""A session request's parts keep the blocks they were made from (issue 24 item 3, RFC 0028).

Every part of a request is laid out from rendered blocks; it keeps them as spans (kind, trust,
the ref shown, the lengths of head, body and tail: ``projection/base/spans.py``), so the preview and
the session view read what each line is instead of reading the fences back out of the text.

The proof that nothing is lost: on the demo and a shared trajectory, at three budgets and many
turns, every line of every part (and of every block of the stateless plan) gets the same trust
tag from the blocks as :func:`read_tags` — the reader of fences the preview used before, kept
here as the oracle — gives it from the text. Where the two differ, the text reader was wrong:
a session part's vouched runtime text (no fence, a trusted record under its label) was shown as
holon-ctx's own structure, where the stateless preview shows it as a runtime fact.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from pathlib import Path

import msgspec
import pytest
from test_preview_is_sent import demo_db, trajectory_db

import holon_ctx
from holon_ctx.cli.explain import _in_episode_text
from holon_ctx.cli.preview import tag_block_lines
from holon_ctx.cli.preview_cmds import opened, planned, trust_lookup, viewed
from holon_ctx.cli.session_view import part_blocks
from holon_ctx.ledger.epochs import EPOCH_FORMAT
from holon_ctx.projection.base.formats import fence_parts
from holon_ctx.projection.base.items import Block, BlockKind
from holon_ctx.projection.base.model import Section
from holon_ctx.projection.base.spans import Span, blocks_of, spans_of
from holon_ctx.projection.planning.projector import Projection
from holon_ctx.projection.provider_formats.native import Call, Part, Role
from holon_ctx.projection.session.session import SessionRequest

TrustOf = Callable[[str], str | None]


# -- the oracle: how the preview read a part before parts kept their blocks ------------------
def read_tags(block: Block, trust_of: TrustOf) -> Iterator[tuple[str, str]]:
    """The preview's line tags as read from the text: fence lines by their ``trust=``, the
    lines inside a fence at that trust, an unfenced body at its record's trust."""
    head = block.head.splitlines()
    fence: str | None = None
    for line in head:
        parts = fence_parts(line)
        if parts:
            fence = parts[2]
            yield "fence:" + fence, line
        elif fence is not None:
            if line == "</data>":
                yield "fence:" + fence, line
                fence = None
            else:
                yield fence, line
        else:
            yield "structure", line
    if block.body:
        trust = fence or (trust_of(block.refs[0]) if block.refs else None) or "runtime_fact"
        yield from ((trust, line) for line in block.body.splitlines())
    yield from ((("fence:" + fence) if fence else "structure", line)
                for line in block.tail.splitlines())


def read_part(part: Part, trust_of: TrustOf) -> list[tuple[str, str]]:
    """A part's lines tagged from its text alone (the operator's words by their label)."""
    content = part.content
    if part.role is Role.ASSISTANT:
        return [("model_output", line) for line in content.splitlines()]
    first, _, rest = content.partition("\n")
    if (part.refs and first.startswith("operator (trusted) ") and fence_parts(first) is None
            and trust_of(part.refs[0]) == "trusted_operator"):
        return [("structure", first), *(("trusted_operator", line) for line in rest.splitlines())]
    return list(read_tags(Block(head=content, refs=part.refs), trust_of))


# The ledgers are the preview-is-sent module's fixtures (the demo; a shared trajectory imported
# by a library session), imported above: both modules compare the same runtime requests.
__all__ = ["demo_db", "trajectory_db"]



def _turns(db: Path, every: int) -> list[str]:
    with holon_ctx.open_session(db, compaction=None) as session:
        store = session.store
        turns = [s.ref.removeprefix("turn:") for s in store.records_between(0, store.end_pos())
                 if s.ref.startswith("turn:")]
    return [*turns[::every], turns[-1]]


def _vouched_runtime_text(block: Block) -> bool:
    """Unfenced text the runtime vouches for (the text reader's known mistake: see above)."""
    return block.kind is BlockKind.TRUSTED and block.trust is not None


def _compare(db: Path, budget: int, every: int) -> tuple[int, int]:
    """(parts, blocks) compared: every session part's and stateless block's tags, blocks
    against text."""
    args = argparse.Namespace(db=str(db), source=None, session_key=None)
    compared = [0, 0]
    with opened(args) as (store, projector):
        trust_of = trust_lookup(store)
        for turn in _turns(db, every):
            _, _, view = viewed(store, projector, budget, turn, "session")
            request: SessionRequest = view.request
            for _, part, blocks in part_blocks(request):
                shown = [t for b in blocks for t in tag_block_lines(b, trust_of)]
                if part.role is Role.ASSISTANT:
                    shown = shown[:len(part.content.splitlines())]
                expected = read_part(part, trust_of)
                if any(_vouched_runtime_text(b) for b in blocks):
                    # Same lines; the vouched body reads as a runtime fact, not as structure.
                    assert [line for _, line in shown] == [line for _, line in expected]
                    assert {t for t, _ in shown} - {t for t, _ in expected} <= {"runtime_fact"}
                else:
                    assert shown == expected, (turn, part.content[:200])
                compared[0] += 1
            # The stateless plan as `viewed(..., "stateless")` gives it, without the session
            # request that call also walks to (the one above: at 2048 the walk is most of this
            # test's time, about 2.7 s of CPU a turn on the demo).
            plan = planned(store, projector, budget, turn)[1]
            for items in plan.section_items.values():
                for _, rendered in items:
                    for block in rendered.blocks:
                        assert list(tag_block_lines(block, trust_of)) == list(
                            read_tags(block, trust_of)), block
                        compared[1] += 1
    return compared[0], compared[1]


@pytest.mark.parametrize("budget", [2048, 4096, 8192])
def test_the_demo_requests_parts_are_tagged_by_their_blocks_as_by_their_fences(
        demo_db: Path, budget: int) -> None:
    parts, blocks = _compare(demo_db, budget, every=40)
    assert parts > 50
    assert blocks > 50


@pytest.mark.slow
@pytest.mark.parametrize("budget", [4096, 8192, 32768])
def test_a_trajectorys_parts_are_tagged_by_their_blocks_as_by_their_fences(
        trajectory_db: Path, budget: int) -> None:
    parts, blocks = _compare(trajectory_db, budget, every=10)
    assert parts > 50
    assert blocks > 50


def test_every_part_of_a_request_is_covered_by_its_spans(demo_db: Path) -> None:
    """A part's spans add up to its text exactly (a reader never falls back to a text block),
    and an episode form kept whole gives its quotes' spans, each with the quote's trust."""
    args = argparse.Namespace(db=str(demo_db), source=None, session_key=None)
    with opened(args) as (store, projector):
        request = viewed(store, projector, 4096, None, "session")[2].request
    assert request.parts
    for part in request.parts:
        assert part.spans, part.text[:80]
        assert sum(s.head + s.body + s.tail for s in part.spans) == len(part.text)
        assert "".join(b.text for b in blocks_of(part.text, part.spans)) == part.text
    quotes = [s for p in request.parts for s in p.spans if s.kind == "text" and s.trust and s.tail]
    assert quotes, "the demo's request recalls an episode that quotes a record"


def no_trust(_ref: str) -> str | None:
    return None


def test_a_whole_form_is_read_through_its_pieces() -> None:
    """A block kept whole (its pieces' counts do not add up) is tagged from its pieces: the
    quote inside it at the quote's trust, never by its fence line."""
    quote = Block(head='results:\n<data ref="brief:b1" origin="assistant" trust="model_output">\n',
                  body="CI is green.\n", tail="</data>\n", kind=BlockKind.TEXT,
                  trust="model_output")
    line = Block(head="artifact trail:\n", kind=BlockKind.TEXT)
    whole = Block(head=quote.text + line.text, kind=BlockKind.TEXT, parts=(quote, line))
    tags = list(tag_block_lines(whole, no_trust))
    assert tags == list(read_tags(Block(head=whole.head), no_trust))
    assert spans_of([whole]) == spans_of([quote, line])
    # The pieces, not the text: the same lines with another trust in the data tag as the data.
    forged = Block(head=whole.head, kind=BlockKind.TEXT,
                   parts=(Block(head=quote.head, body=quote.body, tail=quote.tail,
                                kind=BlockKind.TEXT, trust="untrusted_external"), line))
    assert ("untrusted_external", "CI is green.") in list(tag_block_lines(forged, no_trust))


def test_spans_are_persisted_with_the_epoch() -> None:
    """The parts a re-plan froze keep their spans through the epoch's encoding, and the layout
    that keeps them has its own format number (old epochs are re-planned, not misread)."""
    span = Span(kind="fenced", trust="untrusted_external", head=3, body=4, tail=8, ref="tool:x1")
    part = Part(role=Role.USER, text="abcdefghijklmno", text_tokens=1, content="abcdefghijklmno",
                content_tokens=1, spans=(span,))
    decoded = msgspec.json.decode(msgspec.json.encode(part), type=Part)
    assert decoded.spans == (span,)
    assert EPOCH_FORMAT == 3
    frozen = msgspec.json.decode(msgspec.json.encode({"parts": [part]}))
    assert frozen["parts"][0]["spans"] == [["fenced", "untrusted_external", 3, 4, 8, "tool:x1", None]]


def test_a_part_gives_the_blocks_it_sends() -> None:
    """``Part.blocks()``: a user part's blocks are its content read through its spans; the
    model's reply is one model-output block, its calls after the text."""
    span = Span(kind="fenced", trust="untrusted_external", head=3, body=4, tail=8, ref="tool:x1")
    user = Part(role=Role.USER, text="abcdefghijklmno", text_tokens=1, content="abcdefghijklmno",
                content_tokens=1, spans=(span,))
    assert user.blocks() == blocks_of(user.content, user.spans)
    call = Call(call_id="c1", name="bash", arguments={"cmd": "ls"}, arguments_json='{"cmd":"ls"}',
                tokens=5)
    reply = Part(role=Role.ASSISTANT, text="Listing.", text_tokens=2, content="Listing.",
                 content_tokens=2, calls=(call,), refs=("message:m1",))
    [block] = reply.blocks()
    assert (block.body, block.kind, block.trust, block.refs) == (
        "Listing.", BlockKind.TRUSTED, "model_output", ("message:m1",))
    assert block.tail == 'tool call bash {"cmd":"ls"} (id c1)\n'


def find_quote_by_fence(p: Projection, ref: str) -> str | None:
    """The oracle: where a recalled episode quotes ``ref``, found by its fence line in the text
    (how ``explain`` found it before episode blocks named the record they quote)."""
    for key, rendered in p.section_items.get(Section.EPISODES, ()):
        fence = next((line for line in rendered.text.split("\n")
                      if (parts := fence_parts(line)) and parts[0] == ref), None)
        if fence is not None:
            return f"quoted by {key} inside {fence} … </data>"
    return None


def test_explain_finds_an_episodes_quote_by_the_record_it_names(demo_db: Path) -> None:
    """explain says which recalled episode quotes an archived record, and inside which fence,
    from the quote's block (``Block.quote``): the same answer as reading the fences, for every
    record the demo's recalled episodes quote at two budgets."""
    args = argparse.Namespace(db=str(demo_db), source=None, session_key=None)
    checked = 0
    with opened(args) as (store, projector):
        for budget in (4096, 8192):
            _, p, _ = viewed(store, projector, budget, None, "stateless")
            quoted = {q.quote for _, r in p.section_items.get(Section.EPISODES, ())
                      for b in r.blocks for q in (b.parts or (b,)) if q.quote and q.fenced}
            for ref in sorted(quoted):
                expected = find_quote_by_fence(p, ref)
                assert expected is not None
                shown = _in_episode_text(p, ref)
                assert shown is not None
                assert shown.startswith(expected), (ref, shown)
                checked += 1
            assert _in_episode_text(p, "tool:no-such-call") is None
    assert checked > 20
