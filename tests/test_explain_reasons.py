"""``explain`` has words for every reason code a manifest can give a ref it leaves out or shrinks.

``earlier_record_of_huge_turn`` (RFC 0010, decision 7) had none: explain printed the bare code
under a status that said the record was "folded into a counted line with other low-value turns"
(session mode) or "compacted" (stateless), with a "to get in" about ticks and retries.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_huge_turn import huge_turn

from holon_ctx.cli.explain import REASON_WORDS
from holon_ctx.cli.main import main
from holon_ctx.lowlevel import Omission

ROOT = Path(__file__).resolve().parents[1]
SMALL = ROOT / "tests" / "golden" / "small.jsonl"
DEMO = ROOT / "holon_ctx" / "data" / "demo.jsonl"


@pytest.fixture(scope="module")
def huge(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One turn of more records than a turn shows before folding (Policy.turn_records, 48) and far
    more tokens than the budgets below: the operator's words and 60 runs."""
    path = tmp_path_factory.mktemp("huge") / "huge.db"
    huge_turn(str(path), records=60, words=20, steps=False, seed=3, max_bytes=1500)
    return str(path)


def _manifest(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    assert main(["project", *argv, "--json"]) == 0
    return dict(json.loads(capsys.readouterr().out))


def _omitted(manifest: dict[str, object]) -> dict[str, str]:
    """Reason code → the first ref the manifest gives it."""
    found: dict[str, str] = {}
    for section in manifest["sections"]:  # type: ignore[attr-defined]
        for o in section["omitted"]:
            found.setdefault(o["reason"], o["ref"])
    return found


def test_every_reason_code_has_words() -> None:
    """The engine's reason codes are Omission's values: each has its words, none is blank."""
    assert set(REASON_WORDS) == {o.value for o in Omission}
    assert all(words.strip() for words in REASON_WORDS.values())


def test_what_projections_emit_is_an_omission_and_explain_prints_its_words(
        huge: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Projections of three ledgers, both modes, at budgets that leave things out: every reason
    their manifests give is an Omission value, and explaining a ref of each prints the code with
    its words on the reason line."""
    sources = [([str(SMALL)], b) for b in (300, 500)] + [(["--db", huge], b) for b in (1500,)] \
        + [([str(DEMO)], 2048)]
    asked: dict[str, tuple[list[str], int, str]] = {}
    for source, budget in sources:
        for mode in ("stateless", "session"):
            for reason, ref in _omitted(_manifest(
                    [*source, "--budget", str(budget), "--mode", mode], capsys)).items():
                assert reason in REASON_WORDS, reason
                asked.setdefault(reason, (source, budget, ref))
    assert Omission.EARLIER_IN_TURN.value in asked
    for reason, (source, budget, ref) in asked.items():
        assert main(["explain", *source, "--budget", str(budget), ref, "--mode", "stateless",
                     "--plain", "--width", "400"]) == 0
        out = capsys.readouterr().out
        line = next(x for x in out.splitlines() if x.startswith("reason "))
        assert line.split(None, 1)[1] == f"{reason} — {REASON_WORDS[reason]}", (reason, out)


@pytest.mark.parametrize("mode", ["session", "stateless"])
def test_an_earlier_record_of_a_huge_turn_is_explained_as_such(
        mode: str, huge: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Folded on its turn's line in both modes; not low-value turns, not a digest."""
    ref = _omitted(_manifest(["--db", huge, "--budget", "1500", "--mode", mode],
                             capsys))[Omission.EARLIER_IN_TURN.value]
    assert main(["explain", "--db", huge, "--budget", "1500", ref, "--mode", mode,
                 "--json"]) == 0
    e = json.loads(capsys.readouterr().out)
    assert (e["status"], e["reason"]) == ("folded", Omission.EARLIER_IN_TURN.value)
    assert "huge turn" in e["summary"]
    assert "low-value" not in e["summary"] + e["to_get_in"]
    assert "RFC 0010, decision 7" in e["to_get_in"]
