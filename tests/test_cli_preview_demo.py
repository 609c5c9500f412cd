"""The bundled demo through demo, preview, explain, diff and stats, with asserted content.

The landmarks come from tools/make_demo_ledger.py (KEY_TURNS, KEY_REFS): the last turn t276 is a task
result anchored to the operator's request t214; t215–t275 are 61 low-value turns (ticks, retries,
fallbacks, a restart); external_event:e007 (turn t164) is an injection attempt in a PR comment.
What the engine decides (window start, fold runs, entry budgets) is read from a projection made
in the test, so these tests pin the CLI's account of the engine, not the engine's tuning.
"""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from demo_story import KEY_REFS, KEY_TURNS
from stateless_cli import stateless

from holon_ctx.cli import preview_cmds
from holon_ctx.cli.common import control_source
from holon_ctx.cli.episodes_cmd import open_episode_source
from holon_ctx.cli.epochs_view import EpochView
from holon_ctx.cli.main import main
from holon_ctx.ledger.records import Turn
from holon_ctx.ledger.sqlite import SqliteStore
from holon_ctx.projection.planning.projector import Projection, Projector


def project(db: Path, budget: int, at: str | None = None) -> Projection:
    """The projection the CLI shows: the demo database holds archived episodes, recalled too,
    and a sealed continuity envelope whose governed control state is pinned."""
    store = SqliteStore(db)
    episodes = open_episode_source(store)
    try:
        with control_source(store) as control:
            return Projector(store, episodes=episodes, control=control).project(
                budget_tokens=budget, at=at)
    finally:
        if episodes is not None:
            episodes.close()
        store.close()


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[str, str]:
    code = main(stateless(list(argv)))
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out, out.err


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo database, built once for the module by `holon-ctx demo`."""
    db = tmp_path_factory.mktemp("demo") / "demo.db"
    assert main(["demo", "--db", str(db), "--plain", "--width", "100"]) == 0
    return db


@pytest.fixture(scope="module", autouse=True)
def walked_once(demo_db: Path) -> Iterator[dict[tuple[object, ...], EpochView]]:
    """Each runtime request the CLI walks to on the module's demo database, walked once.

    Every view command (``--mode stateless`` too, for its epoch line) walks the session from the
    demo's saved epoch to the turn asked (cli/epochs_view.py): at 2048 tokens that is about
    7 s of CPU a command, the same walk for the same ledger, budget and turn each time, and this
    module runs it dozens of times (explain asks once per item, diff twice). The walk reads the
    ledger and writes nothing (test_cli_readers_write_nothing.py), so its result is kept by
    everything it depends on: the ledger's file as it is now, budget, turn, policy, counter,
    episode source and control. Other databases (the demo builds of the tests above) walk as
    usual."""
    real = preview_cmds.runtime_request
    walked: dict[tuple[object, ...], EpochView] = {}

    def once(store: Any, projector: Projector, budget: int, at: str | None) -> EpochView:
        if Path(getattr(store, "path", "")) != demo_db:
            return real(store, projector, budget, at)
        stat = demo_db.stat()
        key = (stat.st_mtime_ns, stat.st_size, budget, at, repr(projector.policy),
               type(projector.counter).__name__, type(projector.episodes).__name__,
               projector.control is None)
        if key not in walked:
            walked[key] = real(store, projector, budget, at)
        return walked[key]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(preview_cmds, "runtime_request", once)
        yield walked


@pytest.fixture(scope="module")
def explained() -> dict[tuple[str, ...], dict[str, object]]:
    """``explain --json`` answers already read in this module, by arguments (see explain_json)."""
    return {}


def explain_json(capsys: pytest.CaptureFixture[str], seen: dict[tuple[str, ...], dict[str, object]],
                 *argv: str) -> dict[str, object]:
    """``explain ARGV --json``, run once per module: two tests ask for the same explanations of
    the injection event at t170, each of which searches for the budget at which the record
    enters by projecting the ledger several times."""
    if argv not in seen:
        seen[argv] = json.loads(run(capsys, "explain", *argv, "--json")[0])
    return seen[argv]


def test_demo_builds_once_then_reuses(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The first run builds the database and says so on stderr; the second reuses it untouched."""
    db = tmp_path / "sub" / "demo.db"
    out, err = run(capsys, "demo", "--db", str(db), "--plain", "--width", "100")
    assert "built the demo ledger (656 records, " in err
    assert " episodes archived)" in err
    assert out.startswith("holon-ctx preview of turn:t276 at a budget of 8192 tokens\n")
    stamp = db.with_name("demo.db.sha256")
    assert stamp.exists()
    before = db.stat().st_mtime_ns
    again, err = run(capsys, "demo", "--db", str(db), "--plain", "--width", "100")
    assert err == ""
    assert again == out
    assert db.stat().st_mtime_ns == before
    assert not list(tmp_path.glob("sub/*.tmp*"))


def test_demo_rebuilds_when_the_stamp_differs(capsys: pytest.CaptureFixture[str],
                                               tmp_path: Path, demo_db: Path) -> None:
    """A database built from another ledger (or another holon-ctx) is rebuilt, not trusted."""
    db = tmp_path / "demo.db"
    # A copy of the module's demo database, built by `holon-ctx demo` (a build of its own costs
    # seconds); it is current, so only the stamp decides.
    shutil.copy(demo_db, db)
    shutil.copy(demo_db.with_name("demo.db.sha256"), db.with_name("demo.db.sha256"))
    assert run(capsys, "demo", "--db", str(db), "--plain")[1] == ""
    db.with_name("demo.db.sha256").write_text("0" * 64 + "\n")
    _, err = run(capsys, "demo", "--db", str(db), "--plain")
    assert "built the demo ledger" in err


def test_demo_default_location_is_under_the_current_directory(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without --db the demo lives in .holon/demo.db of the current directory."""
    monkeypatch.chdir(tmp_path)
    out, _ = run(capsys, "demo", "--budget", "4096", "--plain", "--width", "100")
    assert (tmp_path / ".holon" / "demo.db").exists()
    assert "at a budget of 4096 tokens" in out.splitlines()[0]


def test_demo_preview_shows_what_the_engine_did(capsys: pytest.CaptureFixture[str],
                                                demo_db: Path) -> None:
    """The preview names the turn, relation and anchor, draws bars, and shows trust per line."""
    out, _ = run(capsys, "preview", "--db", str(demo_db), "--budget", "8192", "--plain",
                 "--width", "100")
    lines = out.splitlines()
    assert lines[0] == "holon-ctx preview of turn:t276 at a budget of 8192 tokens"
    assert "relation   task_result_continuation — a task result continuing an earlier request" in out
    assert f"anchor     turn:{KEY_TURNS['e2e_request']} — the earlier turn this input continues, " \
        "shown with it" in lines
    for section in ("environment", "work_item", "work_refs", "episodes", "recent_turns",
                    "current_input"):
        assert any(line.startswith(f"{section:<13} │") for line in lines), section
    for title in ("## Environment", "## Current work item", "## Recent turns",
                  "## Continuation anchor and current input"):
        # Titles of the sections that hold turns go on to say what fenced text is.
        assert any(line == title or line.startswith(title + " (") for line in lines), title
    assert any(line.startswith("op │") for line in lines)
    assert any(line.startswith("mdl│<data ") for line in lines)
    assert any(line.startswith("ext│<data ") for line in lines)
    assert any(line.startswith("rt │") for line in lines)
    p = project(demo_db, 8192)
    for fold in p.folds:
        span = fold.first if fold.first == fold.last else f"{fold.first}–{fold.last}"
        assert re.search(rf"^  {span}\s+{fold.count}  \w", out, re.MULTILINE), span
    assert "left out or shrunk:" in out
    if not p.manifest.window["reached_start"]:
        assert f"turns before {p.manifest.window['first']} are outside the recent window" in out


def test_explain_injection_event_is_untrusted_external(
        capsys: pytest.CaptureFixture[str], demo_db: Path,
        explained: dict[tuple[str, ...], dict[str, object]]) -> None:
    """The injection attempt is untrusted external text; projected soon after it arrived (t170),
    it enters in full with a larger budget, fenced, its forged fence neutralised."""
    ref = KEY_REFS["injection"]
    out, _ = run(capsys, "explain", "--db", str(demo_db), "--budget", "8192", ref, "--plain",
                 "--width", "100")
    assert f"explain {ref} · budget 8192 · as of turn:t276" in out
    assert "record     external_event · origin external · trust untrusted_external" in out
    e = explain_json(capsys, explained, "--db", str(demo_db), "--budget", "4096", "--at", "t170",
                     ref)
    assert e["current_turn"] == "turn:t170"
    assert e["status"] != "in_full"  # 4096 tokens cannot hold the afternoon in full
    assert e["enters_at_budget"] is not None
    assert f"at a budget of ≥ {e['enters_at_budget']} tokens (checked by projecting)" in e[
        "to_get_in"]
    wide = explain_json(capsys, explained, "--db", str(demo_db), "--budget",
                        str(e["enters_at_budget"]), "--at", "t170", ref)
    assert wide["status"] == "in_full"
    assert wide["record"]["trust"] == "untrusted_external"
    assert wide["summary"] == "in the prompt, fenced as untrusted external text"
    shown = str(wide["shown_as"])
    assert shown.startswith(f'inside <data {ref}>')
    assert "fence-like tag(s) in the text neutralised" in shown


def test_explain_entry_budget_is_checked(
        capsys: pytest.CaptureFixture[str], demo_db: Path,
        explained: dict[tuple[str, ...], dict[str, object]]) -> None:
    """The budget explain names is the smallest one at which the injection event shows in full."""
    ref = KEY_REFS["injection"]
    enters = explain_json(capsys, explained, "--db", str(demo_db), "--budget", "4096", "--at",
                          "t170", ref)["enters_at_budget"]
    assert isinstance(enters, int)
    statuses = {}
    for budget in (enters - 1, enters):
        statuses[budget] = explain_json(capsys, explained, "--db", str(demo_db), "--budget",
                                        str(budget), "--at", "t170", ref)["status"]
    # One token less and the record is not whole: its turn is a digest, or clipped.
    assert statuses[enters] == "in_full"
    assert statuses[enters - 1] in ("compacted", "clipped", "clipped_out", "omitted")


def folded_retry_turn(db: Path, p: Projection) -> str:
    """A provider-retry turn of the evening's long wait that ``p`` folds (not the anchor's chain)."""
    store = SqliteStore(db)
    try:
        for seq in range(215, 276):
            stored = store.turn(f"t{seq}")
            assert stored is not None
            assert isinstance(stored.record, Turn)
            if stored.record.trigger == "provider_retry" and not any(
                    stored.ref in d.refs for d in p.decisions):
                return stored.ref
    finally:
        store.close()
    raise AssertionError("no folded provider retry in t215–t275")


def test_explain_folded_retry_turn(capsys: pytest.CaptureFixture[str], demo_db: Path) -> None:
    """A provider retry in the evening's long wait is folded; explain gives the fold's range."""
    ref = folded_retry_turn(demo_db, project(demo_db, 8192))
    e = json.loads(run(capsys, "explain", "--db", str(demo_db), "--budget", "8192", "--json",
                       ref)[0])
    assert e["status"] == "folded"
    assert e["record"]["trigger"] == "provider_retry"
    assert e["record"]["priority"] == "diagnostic"
    fold = e["fold"]
    first, last = (int(r.removeprefix("turn:t")) for r in (fold["first"], fold["last"]))
    assert first <= int(ref.removeprefix("turn:t")) <= last
    assert fold["count"] == sum(fold["kinds"].values()) >= 1
    assert fold["kinds"]["provider_retry"] >= 1
    assert "always fold" in e["to_get_in"]
    text, _ = run(capsys, "explain", "--db", str(demo_db), "--budget", "8192", ref, "--plain",
                  "--width", "100")
    assert "status     folded — folded into a counted line with other low-value turns" in text
    span = fold["first"] if first == last else f"{fold['first']}–{fold['last']}"
    assert f"fold       {span} · {fold['count']} turn" in text


def test_explain_turn_outside_the_window(capsys: pytest.CaptureFixture[str], demo_db: Path) -> None:
    """A morning turn is older than the recent window; the demo archived it into an episode, and
    explain names the episode and where the window starts."""
    first = project(demo_db, 8192).manifest.window["first"]
    ref = f"turn:{KEY_TURNS['ci_8812_wake']}"
    out, _ = run(capsys, "explain", "--db", str(demo_db), "--budget", "8192", ref, "--plain",
                 "--width", "100")
    assert "status     archived — outside the recent window, archived in an episode" in out
    assert f"older than the recent window (first turn in window: {first})" in out
    e = json.loads(run(capsys, "explain", "--db", str(demo_db), "--budget", "8192", ref,
                       "--json")[0])
    lo, hi = (int(c.removeprefix("turn:t")) for c in e["episode"]["covers"])
    assert lo <= int(KEY_TURNS["ci_8812_wake"].removeprefix("t")) <= hi
    assert e["episode"]["covers"][0].startswith("turn:t")
    assert e["enters_at_budget"] is None or e["enters_at_budget"] > 8192


def test_explain_pinned_operator_words(capsys: pytest.CaptureFixture[str], demo_db: Path) -> None:
    """The pinned schema-freeze message is in, as the operator's own words, priority pinned."""
    out, _ = run(capsys, "explain", "--db", str(demo_db), "--budget", "8192",
                 KEY_REFS["pinned_message"], "--json")
    e = json.loads(out)
    assert e["status"] == "in_full"
    assert e["summary"] == "in the prompt, as the operator's own words"
    assert e["item"]["priority"] == "pinned"
    assert "operator_pin" in e["item"]["reasons"]


def test_diff_between_budgets_lists_entered_refs(capsys: pytest.CaptureFixture[str],
                                                 demo_db: Path) -> None:
    """2048 → 8192: refs only enter (budget monotonicity), each one selected at 8192 and not at
    2048, and the text lists them and says whether the cacheable prefix survived."""
    d = json.loads(run(capsys, "diff", "--db", str(demo_db), "--budget", "2048", "--budget",
                       "8192", "--json")[0])
    small, large = project(demo_db, 2048), project(demo_db, 8192)
    selected = {budget: {r for s in p.manifest.sections for r in s.selected}
                for budget, p in ((2048, small), (8192, large))}
    assert d["left"] == []
    assert d["entered"]
    assert set(d["entered"]) == selected[8192] - selected[2048]
    assert d["stable_prefix_changed"] == (small.stable_prefix != large.stable_prefix)
    text, _ = run(capsys, "diff", "--db", str(demo_db), "--budget", "2048", "--budget", "8192",
                  "--plain", "--width", "100")
    assert f"entered   {len(d['entered'])} (" in text
    assert d["entered"][0] in text
    assert "left      none" in text
    word = "changed" if d["stable_prefix_changed"] else "unchanged"
    assert f"stable prefix {word} (environment section" in text


def test_diff_of_a_projection_with_itself(capsys: pytest.CaptureFixture[str],
                                          demo_db: Path) -> None:
    """The same budget twice: nothing enters or leaves, and the whole prompt is reusable."""
    out, _ = run(capsys, "diff", "--db", str(demo_db), "--budget", "8192", "--budget", "8192",
                 "--plain", "--width", "100")
    assert "entered   none" in out
    assert "stable prefix unchanged (environment section, " in out
    assert "the prompts are identical" in out


def test_diff_between_consecutive_turns(capsys: pytest.CaptureFixture[str],
                                        demo_db: Path) -> None:
    """t275 → t276 at one budget: the environment is byte-identical, so the provider's prompt
    cache can reuse it, and the new turn's refs enter."""
    d = json.loads(run(capsys, "diff", "--db", str(demo_db), "--budget", "8192", "--at", "t275",
                       "--at", "t276", "--json")[0])
    assert d["a"]["current_turn"] == "turn:t275"
    assert d["b"]["current_turn"] == "turn:t276"
    assert "turn:t276" in d["entered"]
    assert d["stable_prefix_changed"] is False
    assert d["identical_sections"][0] == "environment"
    assert d["shared_prefix_tokens"] >= d["stable_prefix_tokens"][0] > 0
    text, _ = run(capsys, "diff", "--db", str(demo_db), "--budget", "8192", "--at", "t275",
                  "--at", "t276", "--plain", "--width", "100")
    assert "stable prefix unchanged (environment section, " in text
    assert "a provider's prompt cache can reuse it" in text


def test_stats_tokens_per_section(capsys: pytest.CaptureFixture[str], demo_db: Path) -> None:
    """`stats --budget` adds a per-section table of a projection of the latest turn."""
    out, _ = run(capsys, "stats", "--db", str(demo_db), "--budget", "8192", "--plain")
    assert "tokens per section at a budget of 8192" in out
    for section in ("environment", "work_item", "recent_turns", "current_input", "total"):
        assert f"│ {section}" in out
    plain, _ = run(capsys, "stats", "--db", str(demo_db), "--plain")
    assert "tokens per section" not in plain


def test_demo_summary_leads_and_states_the_recall_order(capsys: pytest.CaptureFixture[str],
                                                        demo_db: Path) -> None:
    """At 80 columns the summary (governed state and why, folds, episodes, left out) ends within
    the first 50 lines, before the prompt; the episode table's stated order is the true one."""
    out, _ = run(capsys, "preview", "--db", str(demo_db), "--budget", "8192", "--plain",
                 "--width", "80")
    lines = out.splitlines()
    prompt = lines.index("the prompt, as the model reads it")
    assert prompt < 50
    head = " ".join(" ".join(lines[:prompt]).split())
    p = project(demo_db, 8192)
    controls = [d for d in p.decisions if d.kind == "control"]
    assert {d.key for d in controls} == {"control:blocking", "control:obligations",
                                         "control:constraints"}
    assert "side effect to reconcile" in head
    assert "never from a summary" in head
    assert "Reconcile = find out whether the side effect happened before acting again" in head
    folded = sum(f.count for f in p.folds)
    assert f"folded {len(p.folds)} runs, {folded} low-value turns" in head
    eps = p.manifest.episodes
    assert f"episodes {len(eps)} recalled, ranked episodes holding a pinned open item first, " \
        "then by recall score (highest first)" in head
    omitted = sum(1 for e in eps if e.representation == "omitted")
    assert f"{omitted} left out for budget" in head
    assert re.search(r"left out \d+ items, \d+ of them high priority; by reason "
                     r"budget_exhausted \d+", head)
    # The stated order holds: pinned open items first, then score, highest first (ties: as
    # recall breaks them, newer first, which a stable sort keeps).
    reasons = {d.key: d.reasons for d in p.decisions if d.kind == "episode"}
    stated = sorted(eps, key=lambda e: ("pinned_unresolved" not in reasons[e.ref], -e.score))
    assert [e.ref for e in stated] == [e.ref for e in eps]
    table = lines[lines.index(next(x for x in lines if x.startswith("recalled episodes ("))):]
    ranks = [m.group(2) for line in table if (m := re.match(r"^\s+(\d+)  (episode:\S+)", line))]
    assert ranks == [e.ref for e in eps]


def _left_out_by_the_manifest(manifest: dict[str, Any]) -> dict[str, str]:
    """The items of ``project --json`` that are not in the prompt in full, with the reason code
    the manifest's rule gives them (its ``omitted`` lists apply the same rule to refs)."""
    expected: dict[str, str] = {}
    for section in manifest["sections"]:
        for item in section["items"]:
            form = item["form"]
            if form == "omitted":
                expected[item["key"]] = "budget_exhausted"
            elif form == "clipped" or (form != "full" and item["tokens"] < item["full_tokens"]):
                expected[item["key"]] = (
                    "owned_by_other_work_item" if "owned_by_other_work_item" in item["reasons"]
                    else "clipped_to_fit" if form == "clipped"
                    else "compacted_for_budget" if form == "compact" else "ref_only_for_budget")
    return expected


@pytest.mark.parametrize("budget", [2048, 8192])
def test_one_count_for_the_items_left_out(budget: int, capsys: pytest.CaptureFixture[str],
                                          demo_db: Path,
                                          explained: dict[tuple[str, ...], dict[str, object]]
                                          ) -> None:
    """The summary, the details and ``explain`` speak of one set, the items left out or shrunk:
    the same count and the same reasons, each item the reason the manifest gives it."""
    db = str(demo_db)
    manifest = json.loads(run(capsys, "project", "--db", db, "--budget", str(budget),
                              "--json")[0])
    expected = _left_out_by_the_manifest(manifest)
    assert expected
    counts = Counter(expected.values())
    by_reason = ", ".join(f"{r} {n}" for r, n in sorted(counts.items(),
                                                        key=lambda rn: (-rn[1], rn[0])))
    out, _ = run(capsys, "preview", "--db", db, "--budget", str(budget), "--plain",
                 "--width", "400")
    lines = out.splitlines()
    summary = next(line for line in lines if line.startswith("left out   "))
    assert f"left out   {len(expected)} items" in summary
    assert f"; by reason {by_reason}" in summary
    details = lines.index(f"left out or shrunk: {len(expected)} items, by reason {by_reason}")
    head = next(i for i in range(details, len(lines)) if lines[i].split()[:2] == ["item", "reason"])
    rows = [line.split()[:2] for line in lines[head + 1:] if line.startswith("  ")
            and not line.startswith("  …")]
    assert len(rows) == min(25, len(expected))
    assert all(expected[key] == reason for key, reason in rows)
    # The refs the manifest lists as omitted that are items themselves: the same reason.
    for section in manifest["sections"]:
        for omitted in section["omitted"]:
            if omitted["ref"] in expected:
                assert omitted["reason"] == expected[omitted["ref"]]
    # explain gives each left-out episode (and a recent turn, when one is) the same reason.
    asked = [k for k in expected if k.startswith("episode:")][:6] + \
        [k for k in expected if k.startswith("turn:")][:1]
    assert asked
    for key in asked:
        answer = explain_json(capsys, explained, "--db", db, "--budget", str(budget), key)
        assert answer["reason"] == expected[key], key


def test_the_preview_reads_the_demo_epoch_and_shows_the_walked_request(
        demo_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo's build saves the epoch of the request a runtime would send at its budget; the
    preview reads it (never writes) instead of walking the demo's re-plans again, and shows the
    same request a walk from the last checkpoint makes (RFC 0024; issue 27's second run)."""
    from holon_ctx.cli.demo import DEMO_BUDGET
    from holon_ctx.cli.epochs_view import epoch_view
    from holon_ctx.projection.session.session import SessionProjector

    replans: list[str] = []
    real = SessionProjector._replan

    def counted(self: SessionProjector, *args: object, **kwargs: object) -> object:
        replans.append(str(kwargs.get("reason")))
        return real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(SessionProjector, "_replan", counted)
    before = demo_db.stat().st_mtime_ns, Path(f"{demo_db}-wal").exists() and Path(
        f"{demo_db}-wal").stat().st_size
    store = SqliteStore(demo_db)
    episodes = open_episode_source(store)
    try:
        with control_source(store) as control:
            projector = Projector(store, episodes=episodes, control=control)
            read = epoch_view(store, projector, DEMO_BUDGET, None).request
            read_replans = len(replans)
            walked = SessionProjector(store, projector.counter, episodes=episodes,
                                      control=control, layout=read.layout).request(
                budget_tokens=DEMO_BUDGET)
    finally:
        if episodes is not None:
            episodes.close()
        store.close()
    # What the read re-plans is the demo's last two turns only (asked one after the other, as
    # a runtime does): t275 lays out an anchor, t276 resolves two items episodes listed as
    # still open (RFC 0023); a walk from the last checkpoint re-plans many times more.
    assert read_replans <= 3 < len(replans) - read_replans, replans
    assert (read.parts, read.request_tokens, read.epoch) == (
        walked.parts, walked.request_tokens, walked.epoch)
    assert read.manifest.sections == walked.manifest.sections
    assert (demo_db.stat().st_mtime_ns, Path(f"{demo_db}-wal").exists() and Path(
        f"{demo_db}-wal").stat().st_size) == before
