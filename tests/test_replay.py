"""The bill (issue 13): the cache cost model, the model calls a replay makes, the approaches it
compares, and ``holon-ctx replay`` in a pipe and as JSON."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest

import holon_ctx
from holon_ctx.cli.main import main
from holon_ctx.cli.replay_cmd import chart_lines, verdict
from holon_ctx.ledger.records import Message, MessageRole
from holon_ctx.ledger.store import LedgerStore
from holon_ctx.projection.base.framing import ANTHROPIC as ANTHROPIC_FRAMING
from holon_ctx.projection.measure.cost import (
    PRICES,
    CostMeter,
    PriceTable,
    RequestCost,
    shared_prefix_tokens,
)
from holon_ctx.projection.measure.replay import (
    APPROACHES,
    MASKED_KEEP,
    ApproachReport,
    TurnRow,
    _History,
    call_points,
    replay,
    request_tokens,
)
from holon_ctx.projection.session.session import Layout, SessionPolicy, SessionProjector
from holon_ctx.tokens import default_counter, store_counter

ANTHROPIC = PRICES["anthropic"]


def _naive_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def test_shared_prefix_is_the_longest_common_prefix() -> None:
    """The bisection agrees with a token-by-token scan on streams that share any length."""
    rng = random.Random(7)
    for _ in range(300):
        a = [rng.randrange(4) for _ in range(rng.randrange(0, 40))]
        cut = rng.randrange(0, len(a) + 1)
        b = a[:cut] + [rng.randrange(4) for _ in range(rng.randrange(0, 40))]
        assert shared_prefix_tokens(a, b) == _naive_prefix(a, b)


def test_billing_reads_writes_and_plain_input() -> None:
    """Shared tokens at the read price, tokens after the last breakpoint at the input price, the
    rest written; the unwritten end never eats into the shared prefix."""
    price = PriceTable("p", cache_read=0.1, cache_write=1.25)
    assert price.billed(100, 60) == pytest.approx(0.1 * 60 + 1.25 * 40)
    assert price.billed(100, 60, 10) == pytest.approx(0.1 * 60 + 1.25 * 30 + 10)
    # More "unwritten" tokens than unshared ones: the shared ones are still read.
    assert price.billed(100, 60, 80) == pytest.approx(0.1 * 60 + 40)


def test_meter_compares_each_request_with_the_one_before() -> None:
    meter = CostMeter(ANTHROPIC)
    first = meter.add([1, 2, 3, 4])
    second = meter.add([1, 2, 3, 4, 5, 6])
    third = meter.add([1, 9, 9])
    assert (first.shared_tokens, second.shared_tokens, third.shared_tokens) == (0, 4, 1)
    assert meter.sent_tokens == 13
    assert meter.shared_tokens == 5
    assert meter.reuse == pytest.approx(5 / 13)
    assert meter.billed == pytest.approx(first.billed + second.billed + third.billed)
    assert meter.billed_share == pytest.approx(meter.billed / 13)


def _small_run() -> LedgerStore:
    session = holon_ctx.open_session(":memory:", compaction=None)
    session.operator_message("Rename the config loader and keep the old name as an alias.")
    call = holon_ctx.ToolCall("c1", "bash", json.dumps({"cmd": "grep -rn load_config"}))
    session.assistant_message("Looking for callers first.", tool_calls=[call])
    session.tool_result("c1", "src/app.py:3: load_config()\n")
    session.assistant_message("One caller; renaming now.")
    session.wake("scheduler_tick", noop=True)
    session.operator_message("Also update the changelog.")
    session.assistant_message("Changelog updated.")
    return session.store


def test_calls_come_before_each_reply_after_a_silent_turn_and_at_the_end() -> None:
    """A request made at a call point holds the records before it and not the reply it asks
    for; a turn with no reply is one call at its end; the ledger's end is the next call."""
    store = _small_run()
    records = list(store.records_between(0, store.end_pos()))
    replies = [s for s in records if isinstance(s.record, Message)
               and s.record.role is MessageRole.ASSISTANT]
    points = call_points(store)
    turns = [t for t, _ in points]
    limits = [limit for _, limit in points]
    assert limits == sorted(limits)
    assert [r.pos for r in replies] == [p for p in limits if p in {r.pos for r in replies}]
    assert len(points) == len(replies) + 1 + 1  # the silent tick, and the end
    assert limits[-1] == store.end_pos()
    # The tick's call ends where the next turn begins: its turn is the tick's.
    tick = turns[2]
    assert tick != turns[0]
    assert tick != turns[-1]
    projector = SessionProjector(store, default_counter(), layout=Layout.TEXT)
    for (_, limit), reply in zip(points, replies, strict=False):
        text = projector.request(budget_tokens=4096, limit_pos=limit).text
        assert isinstance(reply.record, Message)
        assert reply.record.text not in text


def _agent_run(seed: int, steps: int, where: str | Path = ":memory:") -> LedgerStore:
    rng = random.Random(seed)
    session = holon_ctx.open_session(where, compaction=None)
    session.operator_message("Port the importer to the new schema; keep the old CLI flags.")
    for i in range(steps):
        if rng.random() < 0.1:
            session.wake("scheduler_tick", noop=True)
            continue
        calls = [holon_ctx.ToolCall(f"c{i}", "bash", json.dumps({"cmd": f"pytest -k case{i}"}))]
        session.assistant_message(f"Step {i}: " + "checking the importer. " * rng.randint(1, 20),
                                  tool_calls=calls)
        session.tool_result(f"c{i}", f"ran case {i}\n" * rng.randint(1, 80),
                            exit_code=rng.choice([0, 0, 1]))
    return session.store


@pytest.fixture(scope="module")
def reports() -> dict[str, ApproachReport]:
    store = _agent_run(3, 60)
    found = replay(store, 4096, ANTHROPIC, default_counter(),
                   approaches=("session", "stateless", "full", "newest"))
    return {r.name: r for r in found}


def test_every_approach_prices_the_same_calls(reports: dict[str, ApproachReport]) -> None:
    calls = [[row.turn for row in r.rows] for r in reports.values()]
    assert all(c == calls[0] for c in calls)
    for report in reports.values():
        assert report.sent_tokens == sum(row.cost.sent_tokens for row in report.rows)
        assert report.billed == pytest.approx(sum(row.cost.billed for row in report.rows))


def test_budgeted_approaches_hold_the_budget(reports: dict[str, ApproachReport]) -> None:
    """The session, the stateless projection and keep-newest never exceed the budget; the whole
    history outgrows it, and only grows."""
    for name in ("session", "stateless", "newest"):
        assert reports[name].over_budget == 0
        assert all(row.request_tokens <= 4096 for row in reports[name].rows)
    full = [row.request_tokens for row in reports["full"].rows]
    assert full == sorted(full)
    assert reports["full"].over_budget > 0


def test_the_session_is_a_cacheable_prefix(reports: dict[str, ApproachReport]) -> None:
    """Between re-plans each session request begins with the one before; the stateless projection,
    re-planned every call, shares far less."""
    session = reports["session"]
    assert session.replans >= 1
    for before, row in zip(session.rows, session.rows[1:], strict=False):
        if not row.cost.replanned:
            # Everything but the previous request's tail (the current state) is shared.
            assert row.cost.shared_tokens >= before.cost.sent_tokens // 2
    assert session.reuse > reports["stateless"].reuse + 0.3
    assert session.billed < reports["stateless"].billed


def test_the_session_tail_is_never_written_to_the_cache() -> None:
    """With writes dearer than plain input, a session request costs less than if every unshared
    token were written: its current-state tail sits after the last breakpoint."""
    store = _agent_run(5, 20)
    flat = PriceTable("flat", cache_read=0.1, cache_write=1.0, input=1.0)
    dear = PriceTable("dear", cache_read=0.1, cache_write=2.0, input=1.0)

    def planned() -> SessionProjector:
        # Every request with its tail (a whole epoch sends none while the history fits).
        return SessionProjector(store, default_counter(), layout=Layout.MESSAGES,
                                session=SessionPolicy(whole_history=False))
    [a] = replay(store, 4096, flat, default_counter(), session_projector=planned())
    [b] = replay(store, 4096, dear, default_counter(), session_projector=planned())
    cheaper = 0
    for x, y in zip(a.rows, b.rows, strict=True):
        written_all = 0.1 * y.cost.shared_tokens + 2.0 * (y.cost.sent_tokens - y.cost.shared_tokens)
        # (A request with nothing to state has no tail: RFC 0025, decision 4.)
        assert y.cost.billed <= written_all
        cheaper += y.cost.billed < written_all
        assert x.cost.billed == pytest.approx(
            0.1 * x.cost.shared_tokens + (x.cost.sent_tokens - x.cost.shared_tokens))
    assert cheaper


def _db(tmp_path: Path) -> str:
    path = tmp_path / "run.db"
    _agent_run(9, 25, path).close()
    return str(path)


def test_replay_in_a_pipe_is_whole_plain_columns(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Without --width, in a pipe: every row on one line with every column, nothing cut, and the
    totals' "sent" is the sum of the per-call column (the same token stream)."""
    db = _db(tmp_path)
    assert main(["replay", "--db", db, "--budget", "4096", "--baseline",
                 "newest,stateless"]) == 0
    out = capsys.readouterr().out
    assert "…" not in out
    assert "\x1b[" not in out
    lines = out.splitlines()
    header = lines[1].split()
    assert header[:4] == ["call", "turn", "sent", "cached"]
    totals_at = lines.index("totals (billed in uncached input tokens)")
    rows = [line.split() for line in lines[2:totals_at] if line]
    assert rows
    assert all(len(r) == 12 for r in rows)
    sent = sum(int(r[2].replace(",", "")) for r in rows)
    totals = {line.split()[0]: line.split() for line in lines[totals_at + 2:totals_at + 5]}
    assert set(totals) == {"session", "newest", "stateless"}
    assert int(totals["session"][2].replace(",", "")) == sent
    assert int(totals["session"][1]) == len(rows)
    assert lines[-1].startswith("verdict: ")


@pytest.mark.parametrize("width", [40, 60, 80, 120])
def test_replay_at_any_width_cuts_no_figure(width: int, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """At any width every line fits, no cell is cut (no ellipsis), and every figure of every call
    and of the totals is printed whole, the session's as much as the baselines' (the JSON report
    says what they are)."""
    db = _db(tmp_path)
    assert main(["replay", "--db", db, "--budget", "4096", "--baseline", "full,newest",
                 "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert main(["replay", "--db", db, "--budget", "4096", "--baseline", "full,newest",
                 "--width", str(width)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= width
    assert "…" not in out
    words = Counter(out.split())
    for name, body in report["approaches"].items():
        for call in body["calls"]:
            for figure in (call["sent_tokens"], call["shared_tokens"], round(call["billed"])):
                assert words[f"{figure:,}"] > 0, (name, figure)
        totals = body["totals"]
        # The reuse from the calls' own figures: the JSON's is rounded to four places already,
        # and rounding it again to three can differ from the table's (0.8685 -> 0.869 there,
        # 0.86849 -> 0.868 here).
        reuse = sum(c["shared_tokens"] for c in body["calls"]) / totals["sent_tokens"]
        for figure in (f"{totals['sent_tokens']:,}", f"{totals['billed']:,.0f}",
                       f"{reuse:.3f}"):
            assert words[figure] > 0, (name, figure)
    assert words["yes"] == report["approaches"]["session"]["totals"]["replans"]


def test_the_legend_names_every_column_and_approach(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """Each column heading of the per-call table and the totals, and each approach replayed, has
    a line in the legend."""
    db = _db(tmp_path)
    assert main(["replay", "--db", db, "--budget", "4096", "--baseline", "all"]) == 0
    lines = capsys.readouterr().out.splitlines()
    legend = lines[lines.index("legend") + 2:lines.index("legend") + 30]
    explained = {line[2:22].strip() for line in legend if line.startswith("  ") and line[2] != " "}
    columns = {"sent", "cached", "re-plan", "billed", "prefix reuse", "billed share",
               "over budget"}
    assert columns | {"session", "stateless", "full", "newest"} <= explained
    header = lines[1].split()
    assert {h for h in header if h not in ("call", "turn") and h not in APPROACHES} <= explained


def _report(name: str, billed: list[float], *, over: int = 0,
            replans: dict[int, str] | None = None, empty: frozenset[int] = frozenset()
            ) -> ApproachReport:
    rows = tuple(TurnRow(turn=f"turn:t{i}", cost=RequestCost(
        sent_tokens=1000, shared_tokens=500, billed=b, replanned=i in (replans or {})),
        request_tokens=1000, replan_reason=(replans or {}).get(i), empty=i in empty)
        for i, b in enumerate(billed))
    return ApproachReport(name=name, rows=rows, reuse=0.5, billed_share=0.5,
                          sent_tokens=1000 * len(rows), billed=sum(billed),
                          replans=len(replans or {}), over_budget=over)


def test_the_verdict_names_the_cheapest_within_the_budget_and_why() -> None:
    """The cheapest approach that stays within the budget, the difference in percent of the
    dearer one, and — when the session is not the cheapest — what its re-plans cost and what
    caused them; an approach over the budget is never the answer, only mentioned."""
    session = _report("session", [900, 100, 100, 900], replans={0: "work_item_changed",
                                                                3: "work_item_changed"})
    newest = _report("newest", [400, 400, 400, 400])
    full = _report("full", [300, 100, 100, 100], over=2)
    line = verdict([session, newest, full], 4096)
    assert line.startswith("verdict: newest is the cheapest within the budget: 1,600 billed, "
                           "20.0% less than the session (2,000)")
    assert "re-planned on 2 of 4 calls (2 for work-item switches)" in line
    assert "those calls billed 90% of its total" in line
    assert "full bills less (600) but exceeds the 4,096-token budget on 2 of 4 calls" in line
    cheap = _report("session", [300, 300, 300, 300])
    assert verdict([cheap, newest], 4096).startswith(
        "verdict: the session is the cheapest within the budget: 1,200 billed, 25.0% less than "
        "newest (1,600)")
    assert "nothing to compare" in verdict([session], 4096)
    assert "held no message" not in line


def test_the_verdict_says_when_the_cheapest_sent_no_history() -> None:
    """A trim that kept no message of the history bills next to nothing: the verdict says on how
    many calls the cheapest approach's request was the system message alone."""
    session = _report("session", [900, 300, 300, 300], replans={0: "over_budget"})
    newest = _report("newest", [900, 10, 10, 300], empty=frozenset({1, 2}))
    line = verdict([session, newest], 4096)
    assert line.startswith("verdict: newest is the cheapest within the budget: 1,220 billed")
    assert ("newest's request held no message of the history on 2 of 4 calls (the system "
            "message alone)") in line


def test_a_trim_that_keeps_no_message_is_an_empty_call() -> None:
    """Keep-newest must start on a user message: once the only one is older than the budget
    holds, its request is the system message alone — a call marked empty, and counted; the
    session's request at the same calls holds the task and the newest step."""
    session = holon_ctx.open_session(":memory:", compaction=None)
    session.set_environment(guidance="You fix failing tests.", workspace="/repo")
    session.operator_message("Find why the parser test fails and fix it.")
    for i in range(12):
        call = holon_ctx.ToolCall(f"c{i}", "bash", json.dumps({"cmd": f"pytest tests/t{i}.py"}))
        session.assistant_message(f"Step {i}: running the next check.", tool_calls=[call])
        session.tool_result(f"c{i}", "".join(f"line {i}.{j} of the output\n" for j in range(90)),
                            exit_code=1)
    found = {r.name: r for r in replay(session.store, 2048, ANTHROPIC, default_counter(),
                                       approaches=("session", "newest", "masking"))}
    newest = found["newest"]
    assert newest.empty_calls == sum(1 for row in newest.rows if row.empty) > 0
    # An empty call sends the system message alone: the same few tokens every time, fewer than
    # any request that holds a message of the history.
    alone = {row.request_tokens for row in newest.rows if row.empty}
    assert len(alone) == 1
    assert all(row.request_tokens > min(alone) for row in newest.rows if not row.empty)
    assert found["session"].empty_calls == 0
    assert not newest.rows[0].empty  # the first call: the task alone, which fits


def test_the_chart_fits_and_shares_one_scale() -> None:
    """One cell per call while they fit, else the mean of consecutive calls; the dearest cell of
    any approach is the full bar, so heights compare across lines."""
    session = _report("session", [100.0] * 10)
    newest = _report("newest", [100.0] * 9 + [800.0])
    head, one, two, axis = chart_lines([session, newest], 20)
    assert "each cell one call" in head
    assert "█ = 800" in head
    bars_one, bars_two = one.split()[1], two.split()[1]
    assert len(bars_one) == 10
    assert len(set(bars_one)) == 1
    assert bars_one[0] != "█"
    # The same bill draws the same bar on both lines: one scale.
    assert bars_two == bars_one[:9] + "█"
    head, one, _, _ = chart_lines([session, newest], 4)
    assert "each cell the mean of 3 calls" in head
    assert len(one.split()[1]) == 4
    assert axis.split()[-1] == "10"


def test_replay_json_adds_up(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = _db(tmp_path)
    assert main(["replay", "--db", db, "--budget", "4096", "--baseline", "full",
                 "--json", "--price", "openai"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["price"] == {"name": "openai", "cache_read": 0.5, "cache_write": 1.0}
    for body in report["approaches"].values():
        calls = body["calls"]
        assert body["totals"]["calls"] == len(calls)
        assert body["totals"]["sent_tokens"] == sum(c["sent_tokens"] for c in calls)
        assert body["totals"]["billed"] == pytest.approx(sum(c["billed"] for c in calls),
                                                         abs=0.01 * len(calls))
    assert report["approaches"]["session"]["totals"]["over_budget"] == 0


@pytest.mark.parametrize(("args", "needle"), [
    (["--baseline", "newest,nope"], "--baseline"),
    (["--price", "no-such-table"], "--price"),
])
def test_replay_bad_options_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         args: list[str], needle: str) -> None:
    db = _db(tmp_path)
    assert main(["replay", "--db", db, "--budget", "4096", *args]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert needle in err
    assert "Traceback" not in err


def test_a_bad_price_file_names_its_field(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    db = _db(tmp_path)
    table = tmp_path / "prices.json"
    table.write_text('{"cache_read": 0.1, "cache_write": -1}')
    assert main(["replay", "--db", db, "--budget", "4096", "--price", str(table)]) == 2
    err = capsys.readouterr().err.strip()
    assert str(table) in err
    assert "$.cache_write" in err
    assert len(err.splitlines()) == 1


def test_the_cached_counts_are_the_budgets_counts() -> None:
    """A replay counts a request by its messages, each counted once and kept for the next call:
    at every call point that sum is exactly what :func:`measure` counts for the whole history
    and for keep-newest's request (the renderer's blocks are additive), and the token stream is
    the messages' streams end to end."""
    from holon_ctx.projection.measure.replay import _Encoded, _History, _newest
    from holon_ctx.projection.provider_formats.providers import measure

    counter = default_counter()
    store = _agent_run(11, 40)
    history = _History(store, counter)
    encoded = _Encoded(counter)
    for _, limit in call_points(store):
        history.grow(limit)
        whole = history.messages()
        kept = _newest(whole, 2048, encoded)
        assert encoded.sent(whole) == measure(whole, counter)
        assert encoded.sent(kept) == measure(kept, counter) <= 2048
        stream = encoded.tokens(whole)
        assert stream == [t for m in whole for t in request_tokens([m], counter)]


def test_masking_keeps_the_last_ten_tool_outputs_and_names_the_rest() -> None:
    """Observation masking: in every request the newest ten tool outputs are whole and every
    older one is a placeholder saying how many lines it had; each run's line stays."""
    store = _agent_run(6, 30)
    history = _History(store, default_counter())
    for _, limit in call_points(store):
        history.grow(limit)
        messages = history.masked_messages(MASKED_KEEP)
        outputs = [m["content"] for m in messages if m["role"] == "tool"]
        whole = history.messages()
        originals = [m["content"] for m in whole if m["role"] == "tool"]
        assert len(outputs) == len(originals)
        cut = max(0, len(originals) - MASKED_KEEP)
        assert outputs[cut:] == originals[cut:]
        for masked, original in zip(outputs[:cut], originals[:cut], strict=True):
            ref = original.split("<data ", 1)[1].split(">", 1)[0]
            found = store.get(ref)
            assert found is not None
            lines = found.record.output.count("\n")  # type: ignore[union-attr]
            assert f"[older output omitted: {lines} lines]" in masked
            assert masked.split("\n", 1)[0] == original.split("\n", 1)[0]  # the run's line


def test_replay_masking_is_a_baseline_and_the_verdict_names_the_cheapest(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--baseline masking replays observation masking within the budget beside the session, and
    the verdict names whichever approach billed least."""
    db = _db(tmp_path)
    assert main(["replay", "--db", db, "--budget", "4096", "--baseline", "masking,newest",
                 "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    totals = {name: body["totals"] for name, body in report["approaches"].items()}
    assert set(totals) == {"session", "masking", "newest"}
    assert totals["masking"]["over_budget"] == 0
    cheapest = min(totals, key=lambda name: totals[name]["billed"])
    named = "the session" if cheapest == "session" else cheapest
    assert report["verdict"].startswith(f"{named} is the cheapest within the budget")


def test_a_replay_counts_with_the_stores_counter_and_the_framing_given() -> None:
    """Without a counter a replay counts with the store's own; ``framing`` is the session
    approach's (``replay --model``): the same calls as a session projector made with it, and
    other counts than OpenAI's framing, the default, gives."""
    store = _agent_run(7, 12)
    counter = store_counter(store)
    [given] = replay(store, 4096, ANTHROPIC, framing=ANTHROPIC_FRAMING)
    [made] = replay(store, 4096, ANTHROPIC, counter, session_projector=SessionProjector(
        store, counter, layout=Layout.MESSAGES, framing=ANTHROPIC_FRAMING))
    [default] = replay(store, 4096, ANTHROPIC, counter)
    assert [r.request_tokens for r in given.rows] == [r.request_tokens for r in made.rows]
    assert [r.cost for r in given.rows] == [r.cost for r in made.rows]
    assert [r.request_tokens for r in given.rows] != [r.request_tokens for r in default.rows]
