"""Invariants of the projection engine (issue 3), each a Hypothesis property.

Most properties also draw an archive window (``strategies.archive_windows``): the ledger is then
archived into episodes (keeping its newest 2-48 turns) and projected with episode memory, so the
invariants hold where episodes stand for turns, are clipped, or share records with pinned turns.

Ledgers come from two generators: ``strategies.ledgers`` (small, hostile: odd ids, fences,
special-token text, unowned records) and ``projection_builders.random_ledger`` (up to 160 turns of
a realistic mix with runs of retries and ticks; its seed shows in a failure). Budgets range over
64 to 200,000 tokens. A budget that cannot hold the pinned references raises
BudgetTooSmallError, which :func:`_project` turns into ``None`` and the properties skip; the
error itself has its own property.

"More relevant content than fits" (the utilisation invariant) is defined as: projecting the same
ledger at four times the budget uses more tokens than the budget. The larger projection reads a
larger window, so this counts content anywhere the engine could reach, not only what one window
happened to load.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from projection_builders import (
    all_manifest_refs,
    export_bytes,
    folded_refs,
    ledger_specs,
    memory_store,
    selected_refs,
)
from strategies import archive_windows, archived_source, ledgers
from summary import show_at_end
from tiers import sized

from holon_ctx.errors import BudgetTooSmallError
from holon_ctx.ledger.importer import import_jsonl
from holon_ctx.ledger.memory import MemoryStore
from holon_ctx.ledger.records import (
    OPERATOR_TRIGGERS,
    Brief,
    BriefKind,
    ExternalEvent,
    Message,
    MessageRole,
    Origin,
    Outcome,
    Record,
    SideEffect,
    Tool,
    ToolStatus,
    Turn,
)
from holon_ctx.ledger.sqlite import SqliteStore
from holon_ctx.ledger.store import LedgerStore
from holon_ctx.memory.source import StoreEpisodeSource
from holon_ctx.projection.base.formats import QUOTE_END, QUOTE_START, clip_notes
from holon_ctx.projection.base.items import BlockKind
from holon_ctx.projection.base.model import Form, Section
from holon_ctx.projection.planning.projector import SECTION_TITLES, Projection, Projector
from holon_ctx.projection.planning.view import WindowLimits
from holon_ctx.tokens import default_counter

ROOT = Path(__file__).resolve().parent.parent

#: Ledgers: small hostile ones and realistic ones of up to several hundred turns (three in four
#: examples), so that budgets bind and deeper window pages and high-turn lookups are exercised.
LEDGERS = st.one_of(
    ledgers(1, 10),
    ledger_specs(1, 600).map(lambda spec: spec.records),
    ledger_specs(200, 600).map(lambda spec: spec.records),
    ledger_specs(300, 600).map(lambda spec: spec.records),
)
#: What the generated examples exercised (reported at the end of the module, and checked).
_SEEN: dict[str, list[int]] = {"turns": [], "binds": [], "deeper": [], "pages": [],
                                "episodes": []}


def _note(records: list[Record], p: Projection) -> None:
    """Record one projected example: its length, whether the budget bound, whether history past
    window page 0 was read (a second page, or high turns by lookup), and a second page alone."""
    _SEEN["turns"].append(sum(1 for r in records if isinstance(r, Turn)))
    _SEEN["binds"].append(int(any(s.omitted for s in p.manifest.sections)))
    window = p.manifest.window
    pages = int(window.get("pages", 1) >= 2)  # type: ignore[call-overload]
    _SEEN["pages"].append(pages)
    _SEEN["deeper"].append(pages or int(bool(window.get("high_turns_read"))))
    _SEEN["episodes"].append(int(any(e.representation != "omitted"
                                     for e in p.manifest.episodes)))


@pytest.fixture(scope="module", autouse=True)
def _report_shares(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    n = len(_SEEN["turns"])
    if not n:
        return
    turns = sorted(_SEEN["turns"])
    line = (f"projection invariants: {n} projected examples, median ledger {turns[n // 2]} turns, "
            f"budget binds in {sum(_SEEN['binds']) / n:.0%}, history read past window page 0 in "
            f"{sum(_SEEN['deeper']) / n:.0%} (a second page in {sum(_SEEN['pages']) / n:.0%}), "
            f"archived episodes in the prompt in {sum(_SEEN['episodes']) / n:.0%}")
    show_at_end(request.config, line)  # in every run, passing or not, serial or with xdist
#: Budgets over the whole range, weighted towards the small end where every token matters and
#: the middle, where several window pages of a long ledger are read.
BUDGETS = st.one_of(st.integers(64, 1024), st.integers(1024, 16_384), st.integers(6_000, 40_000),
                    st.integers(12_000, 60_000), st.integers(16_384, 200_000))
#: Examples per property: the default run's, then the slow tier's (tests/tiers.py). Each example
#: projects a ledger of up to 600 turns, some archived into episodes first (about a second each on
#: the shared 2-core machine); the shares the examples reach are checked in both tiers.
_FEW = settings(max_examples=sized(8, 20), suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.data_too_large])
_SOME = settings(max_examples=sized(14, 35), suppress_health_check=[HealthCheck.too_slow,
                                                                    HealthCheck.data_too_large])
#: Examples the properties must have projected and noted (_note) for the shares to mean much.
_MIN_NOTED = sized(40, 100)


#: Window page sizes: the default, and a small one so that short ledgers span many pages (tiers).
PAGES = st.sampled_from([WindowLimits(), WindowLimits(page_turns=4, max_turns=64)])


#: Episode memory: none, or an archive of the ledger keeping its newest 2-48 turns.
ARCHIVES = archive_windows()


def _project(store: LedgerStore, budget: int, limits: WindowLimits | None = None,
             episodes: StoreEpisodeSource | None = None) -> Projection | None:
    try:
        return Projector(store, limits=limits, episodes=episodes).project(budget_tokens=budget,
                                                                         verify=True)
    except BudgetTooSmallError:
        return None


@pytest.mark.scaled
@_SOME
@given(LEDGERS, BUDGETS, ARCHIVES)
def test_used_tokens_never_exceed_the_budget_and_equal_the_count_of_the_text(
        records: list[Record], budget: int, recent: int | None) -> None:
    """used_tokens is the counter's count of the final text, and never more than the budget."""
    store = memory_store(records)
    p = _project(store, budget, episodes=archived_source(store, recent))
    assume(p is not None)
    assert p is not None
    _note(records, p)
    recount = default_counter().count(p.text)
    assert recount == p.used_tokens == p.manifest.used_tokens
    assert p.used_tokens <= budget == p.manifest.budget_tokens
    assert sum(s.used_tokens for s in p.manifest.sections) == p.used_tokens
    assert p.manifest.text == p.text
    # The renderer's quote marks (formats.quoted) never reach a label line, whatever the ledger
    # text holds (a record's own text, fenced, is shown as it is); the quoted ledger text a
    # label holds is part of the label.
    blocks = [b for pairs in p.section_items.values() for _, r in pairs for b in r.blocks]
    for b in blocks:
        labels = b.head + b.tail if b.body or b.kind is not BlockKind.TEXT else ""
        assert not {QUOTE_START, QUOTE_END} & set(labels), b
        assert 0 <= b.quoted <= default_counter().count(b.head)


#: Found by the property: at 64 tokens the third turn's line does not fit, and the 7 tokens left
#: cannot hold it clipped with its note.
_TINY = [Turn(id=f"t{i}", origin=Origin.OPERATOR, seq=i - 1, trigger="approval_decision",
              outcome=None if i == 1 else Outcome.RESULT) for i in (1, 2, 3)]


@pytest.mark.scaled
@_SOME
@given(LEDGERS, BUDGETS, PAGES, ARCHIVES)
@example(_TINY, 64, WindowLimits(), None)
def test_utilisation_is_at_least_90_percent_when_more_content_than_fits(
        records: list[Record], budget: int, limits: WindowLimits, recent: int | None) -> None:
    """When the projection at 4x the budget uses more than the budget, at least 90% is used,
    with archived episodes recalled too (an episode upgrade that does not fit is clipped)."""
    store = memory_store(records)
    episodes = archived_source(store, recent)
    big = _project(store, 4 * budget, limits, episodes)
    assume(big is not None and big.used_tokens > budget)
    p = _project(store, budget, limits, episodes)
    assume(p is not None)
    assert p is not None
    if limits == WindowLimits():
        _note(records, p)
    if p.used_tokens < 0.9 * budget:
        # Only at the smallest budgets: a clipped block must end with the note naming its full
        # text, so the room left may be too small for any left-out item's shortest note and its
        # shortest cut line (one token of its own, then "…" and the line's end), and its
        # section's title when nothing else of the section is shown. That is the only excuse
        # for using less.
        room = budget - p.used_tokens
        left_out = [(s, o["ref"]) for s in p.manifest.sections for o in s.omitted if "ref" in o]
        counter = default_counter()
        assert left_out, (p.used_tokens, budget)
        cheapest = min(min(counter.count("\n" + n) for n in clip_notes(ref)) + 1 + counter.count("…\n")
                       + (0 if s.used_tokens else
                          counter.count(SECTION_TITLES[Section(s.name)] + "\n"))
                       for s, ref in left_out)
        assert room < cheapest, (p.used_tokens, budget, room, cheapest)


@pytest.mark.scaled
@_SOME
@given(LEDGERS, BUDGETS, BUDGETS, PAGES, ARCHIVES)
def test_a_larger_budget_keeps_every_ref_and_every_item_at_least_as_rich(
        records: list[Record], a: int, b: int, limits: WindowLimits, recent: int | None) -> None:
    """Every ref selected at the smaller budget is selected or folded at the larger one."""
    small_budget, large_budget = sorted((a, b))
    store = memory_store(records)
    episodes = archived_source(store, recent)
    small = _project(store, small_budget, limits, episodes)
    large = _project(store, large_budget, limits, episodes)
    assume(small is not None)
    assume(large is not None)
    assert small is not None
    assert large is not None
    if limits == WindowLimits():
        _note(records, small)
    kept = set(selected_refs(large)) | folded_refs(large)
    lost = [ref for ref in selected_refs(small) if ref not in kept]
    assert lost == [], f"selected at {small_budget} but not at {large_budget}: {lost}"
    richer = {d.key: d for d in large.decisions}
    for d in small.decisions:
        if d.form is None:
            continue
        other = richer.get(d.key)
        if other is None:
            # A fold line can be replaced by a longer fold of the same turns at a larger budget.
            assert d.kind == "fold", d.key
            continue
        assert other.form is not None
        assert other.form >= d.form, (d.key, d.form, other.form)
        if other.form == d.form and not d.clipped:
            assert not other.clipped, d.key


def _sweep_ledger() -> list[Record]:
    """A conversation under long environment guidance: many small items, one big stable one."""
    from projection_builders import LedgerBuilder

    b = LedgerBuilder()
    b.environment(guidance="Keep changes small and run the tests before reporting done. " * 12)
    ask = b.operator("Fix the flaky test in the payments suite.")
    for i in range(40):
        b.chat(f"Question {i}: is the refund rounding case covered?",
               f"Answer {i}: yes, test_refund_rounding_{i} covers it.")
    b.busy(6, anchor=ask)
    b.ticks(2)
    return b.records


def test_monotone_at_every_single_token_step() -> None:
    """Budget by budget, one token at a time from 100 to 1,100, no selected ref is ever lost
    (thresholds that admit a whole item at once would show up here)."""
    projector = Projector(memory_store(_sweep_ledger()))
    before: set[str] = set()
    for budget in range(100, 1100):
        try:
            p = projector.project(budget_tokens=budget)
        except BudgetTooSmallError:
            assert not before
            continue
        now = set(selected_refs(p)) | folded_refs(p)
        assert before <= now, (budget, sorted(before - now))
        before = set(selected_refs(p))


@pytest.mark.scaled
@_SOME
@given(LEDGERS, BUDGETS, ARCHIVES)
def test_no_ref_is_selected_or_shown_twice(records: list[Record], budget: int,
                                           recent: int | None) -> None:
    """Each ref appears once in the manifest's selections and opens at most one fence or heading,
    recalled episodes included (an episode never quotes a record a turn in the prompt shows)."""
    store = memory_store(records)
    p = _project(store, budget, episodes=archived_source(store, recent))
    assume(p is not None)
    assert p is not None
    _note(records, p)
    refs = selected_refs(p)
    assert len(refs) == len(set(refs))
    fences = re.findall(r'^<data (\S+) ', p.text, re.MULTILINE)
    assert len(fences) == len(set(fences)), sorted(fences)
    headings = re.findall(r"^### (turn:\S+)", p.text, flags=re.MULTILINE)
    assert len(headings) == len(set(headings))
    # Every clipped item says where its full text is: its first ref, or the ledger for a form
    # that shows no ref (a work-refs list: clipping.py's documented fallback).
    for d in p.decisions:
        if d.clipped:
            text = dict(p.section_items[d.section])[d.key].text
            assert re.search(r"\[clipped[^\]]*; full text: (\S+|the ledger)\]\n$", text), (
                d.key, text)


@pytest.mark.scaled
@_SOME
@given(LEDGERS, BUDGETS, ARCHIVES)
def test_every_ref_in_the_manifest_exists_in_the_ledger(records: list[Record], budget: int,
                                                        recent: int | None) -> None:
    """Selected, omitted, folded, anchor and current refs all resolve with store.get (an
    episode's in the episode store)."""
    store = memory_store(records)
    episodes = archived_source(store, recent)
    p = _project(store, budget, episodes=episodes)
    assume(p is not None)
    assert p is not None
    _note(records, p)
    missing = sorted(ref for ref in all_manifest_refs(p) if store.get(ref) is None and not (
        episodes is not None and ref.startswith("episode:")
        and episodes.episodes.get(ref.removeprefix("episode:")) is not None))
    assert missing == []
    for fold in p.manifest.folded:
        assert fold.count == len(fold.refs) == sum(fold.kinds.values())


@pytest.mark.scaled
@_SOME
@given(LEDGERS, BUDGETS, ARCHIVES)
def test_the_current_turn_and_its_anchor_are_always_selected(
        records: list[Record], budget: int, recent: int | None) -> None:
    """The pinned references (current turn, continuation anchor) survive every budget."""
    store = memory_store(records)
    p = _project(store, budget, episodes=archived_source(store, recent))
    assume(p is not None)
    assert p is not None
    _note(records, p)
    refs = set(selected_refs(p))
    assert p.manifest.current_turn in refs
    if p.manifest.anchor_turn is not None:
        assert p.manifest.anchor_turn in refs


def _state_changes(records: list[Record]) -> dict[str, list[str]]:
    """Turn ref -> what in it is operator input or a state change (independent of retention.py)."""
    found: dict[str, list[str]] = {}
    by_turn: dict[str, str] = {}
    trigger: dict[str, str] = {}
    for rec in records:
        if isinstance(rec, Turn):
            by_turn[rec.id] = f"turn:{rec.id}"
            trigger[rec.id] = rec.trigger
            found[f"turn:{rec.id}"] = ["operator trigger"] if rec.trigger in OPERATOR_TRIGGERS else []
    for rec in records:
        owner = getattr(rec, "turn_id", None)
        if owner is None or owner not in by_turn:
            continue
        why = found[by_turn[owner]]
        match rec:
            case Message(role=MessageRole.OPERATOR):
                why.append("operator message")
            case Message(role=MessageRole.SYSTEM) if trigger[owner] in (
                    "provider_retry", "provider_fallback", "recovery", "restart"):
                # The runtime's note about its own retry or recovery ("provider error, attempt
                # 3/6") describes the diagnostic turn; it is not a state change.
                pass
            case Message():
                why.append("message")
            case Tool():
                if rec.status in (ToolStatus.ERROR, ToolStatus.TIMEOUT) or rec.exit_code not in (
                        None, 0):
                    why.append("failed tool")
                if rec.side_effect not in (None, SideEffect.NONE):
                    why.append("tool side effect")
            case Brief(kind=BriefKind.ACK) | Brief(kind=BriefKind.PROGRESS):
                pass
            case ExternalEvent(wait_id=None):
                pass
            case _:
                why.append(type(rec).__name__)
    return found


@pytest.mark.scaled
@_SOME
@given(LEDGERS, BUDGETS)
def test_a_fold_never_hides_operator_input_or_a_state_change(
        records: list[Record], budget: int) -> None:
    """Folded turns hold no operator input, messages, transitions, results or side effects."""
    p = _project(memory_store(records), budget)
    assume(p is not None)
    assert p is not None
    changes = _state_changes(records)
    for fold in p.manifest.folded:
        if "repeated_tool_call" in fold.kinds:
            continue
        for ref in fold.refs:
            assert changes[ref] == [], (ref, changes[ref])
        # The prompt states the fold with its counts.
        assert f"folded {fold.first}" in p.text
        assert f"({fold.count} low-value turns)" in p.text


@pytest.mark.scaled
@_FEW
@given(LEDGERS, st.integers(1, 24))
def test_budget_too_small_names_the_exact_requirement(records: list[Record], budget: int) -> None:
    """The error's required tokens are exactly the smallest budget that projects."""
    store = memory_store(records)
    with pytest.raises(BudgetTooSmallError) as info:
        Projector(store).project(budget_tokens=budget)
    exc = info.value
    assert exc.available_tokens == budget
    assert exc.required_tokens > budget
    assert f"need {exc.required_tokens} tokens" in str(exc)
    assert f"only {budget} available" in str(exc)
    p = Projector(store).project(budget_tokens=exc.required_tokens, verify=True)
    assert p.used_tokens <= exc.required_tokens
    with pytest.raises(BudgetTooSmallError) as again:
        Projector(store).project(budget_tokens=exc.required_tokens - 1)
    assert again.value.required_tokens == exc.required_tokens


def test_budget_too_small_at_one_token() -> None:
    """A one-token budget is refused with the pinned references' requirement stated."""
    from projection_builders import LedgerBuilder

    b = LedgerBuilder()
    b.operator("Summarise the incident report for the on-call channel.")
    with pytest.raises(BudgetTooSmallError) as info:
        b.project(1)
    assert info.value.available_tokens == 1
    assert info.value.required_tokens > 1
    assert "pinned references" in str(info.value)


@pytest.mark.scaled
@_FEW
@given(LEDGERS, BUDGETS)
def test_export_import_project_is_byte_identical_across_stores(
        tmp_path_factory: pytest.TempPathFactory, records: list[Record], budget: int) -> None:
    """Memory store, its export re-imported into memory, and into a reopened SQLite file agree."""
    store = memory_store(records)
    p = _project(store, budget)
    assume(p is not None)
    assert p is not None
    data = export_bytes(store)
    path = tmp_path_factory.mktemp("restart") / "ledger.jsonl"
    path.write_bytes(data)
    again = MemoryStore()
    import_jsonl(path, again)
    db = path.with_suffix(".db")
    sqlite = SqliteStore(db)
    import_jsonl(path, sqlite)
    sqlite.close()
    reopened = SqliteStore(db)
    try:
        for other in (again, reopened):
            q = _project(other, budget)
            assert q is not None
            assert q.manifest_json() == p.manifest_json()
    finally:
        reopened.close()


@pytest.mark.scaled
@_FEW
@given(LEDGERS, st.data())
def test_sqlite_open_waits_agree_with_memory_at_every_limit_and_after_appends(
        records: list[Record], data: st.DataObject) -> None:
    """The SQLite store's incrementally kept open-wait set answers like a full recomputation."""
    split = data.draw(st.integers(0, len(records)))
    first, rest = records[:split], records[split:]
    memory = MemoryStore()
    sqlite = SqliteStore(":memory:")
    try:
        for part in (first, rest):
            if part:
                memory.append(part)
                sqlite.append(part)
            end = memory.end_pos()
            limits = {0, end, end + 5, *data.draw(st.lists(st.integers(0, end), max_size=6))}
            for limit in sorted(limits, reverse=data.draw(st.booleans())):
                assert sqlite.open_waits(limit) == memory.open_waits(limit), limit
    finally:
        sqlite.close()


_DETERMINISM_SCRIPT = """
import sys
from holon_ctx.ledger.importer import import_jsonl
from holon_ctx.ledger.memory import MemoryStore
from holon_ctx.projection.planning.projector import Projector
out = open(sys.argv[1], "wb")
for line in sys.stdin.read().split():
    path, budget = line.rsplit(",", 1)
    store = MemoryStore()
    import_jsonl(path, store)
    out.write(Projector(store).project(budget_tokens=int(budget), verify=True).manifest_json())
    out.write(b"\\n")
"""


@pytest.mark.scaled
@settings(max_examples=sized(1, 3), suppress_health_check=[HealthCheck.too_slow,
                                                           HealthCheck.data_too_large])
@given(st.lists(st.tuples(LEDGERS, BUDGETS), min_size=4, max_size=6))
def test_projection_is_byte_identical_across_processes(
        tmp_path_factory: pytest.TempPathFactory, cases: list[tuple[list[Record], int]]) -> None:
    """Two fresh interpreters with different hash seeds produce this process's exact bytes."""
    tmp = tmp_path_factory.mktemp("determinism")
    lines: list[str] = []
    expected: list[bytes] = []
    for i, (records, budget) in enumerate(cases):
        store = memory_store(records)
        p = _project(store, budget)
        if p is None:
            continue
        path = tmp / f"l{i}.jsonl"
        path.write_bytes(export_bytes(store))
        lines.append(f"{path},{budget}")
        expected.append(p.manifest_json())
    assume(expected)
    for seed in ("1", "4242"):
        out = tmp / f"out{seed}.bin"
        env = {**os.environ, "PYTHONHASHSEED": seed}
        subprocess.run([sys.executable, "-c", _DETERMINISM_SCRIPT, str(out)],
                       input="\n".join(lines), text=True, env=env, cwd=ROOT, check=True)
        got = out.read_bytes().split(b"\n")[:-1]
        assert got == expected
        # The manifest JSON carries the text: the bytes compared include the prompt itself.
        assert all(msgspec.json.decode(g)["text"] for g in got)


def test_verify_recounts_the_text() -> None:
    """verify=True compares the planned count with a full recount (and they agree)."""
    from projection_builders import LedgerBuilder

    b = LedgerBuilder()
    b.operator("可以，先部署到预发环境，然后告诉我结果。")
    p = b.project(4096)
    assert default_counter().count(p.text) == p.used_tokens
    assert [d.key for d in p.decisions if d.form is Form.FULL] == [p.manifest.current_turn]


@pytest.mark.scaled
def test_generated_examples_bind_and_reach_deeper_pages() -> None:
    """The properties above are only as good as their examples: the budget binds in at least half
    of them and history past window page 0 is read (a second page, or high turns by lookup) in at
    least a fifth (shares reported at the end of the module). Last in the module: it runs after
    every property that notes its examples (file order)."""
    n = len(_SEEN["turns"])
    assert n >= _MIN_NOTED, f"only {n} examples were projected"
    assert sum(_SEEN["binds"]) / n >= 0.5
    # Episodes archived from the ledger reach the prompt in some of them (about a quarter in
    # the runs here, docs/testing.md): the properties hold with episode memory too.
    assert sum(_SEEN["episodes"]) / n >= 0.1
    # 25-35% in the runs measured (docs/testing.md); 20% leaves room for random draws.
    assert sum(_SEEN["deeper"]) / n >= 0.2
