"""``holon-ctx inspect-continuity`` and ``eval-continuity`` through the real dispatcher."""

from __future__ import annotations

import json

import pytest

from holon_ctx.cli import main as cli_main
from holon_ctx.continuity.evaluation import SCENARIOS

#: Read at import, before the fixture below narrows the list for each test.
REAL_COMMAND_MODULES = cli_main.COMMAND_MODULES


@pytest.fixture(autouse=True)
def only_continuity_commands(monkeypatch: pytest.MonkeyPatch) -> None:
    # Isolate from commands other engineers are still writing; registration is tested below.
    monkeypatch.setattr(cli_main, "COMMAND_MODULES", ("holon_ctx.cli.continuity_cmd",))


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli_main.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_continuity_commands_are_registered_in_the_dispatcher() -> None:
    """The dispatcher's module list names the continuity commands."""
    assert "holon_ctx.cli.continuity_cmd" in REAL_COMMAND_MODULES


def test_normal_path_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    """Normal path: reauthorization_required, authorized false, compaction then rehydration."""
    code, out, err = run(capsys, "inspect-continuity")
    assert code == 0
    assert err == ""
    assert "decision: reauthorization_required" in out
    assert "reason: continuity_validated" in out
    assert "authorized: false" in out
    assert "event_types: context_compaction -> context_rehydration" in out
    assert "\x1b[" not in out  # no colour codes off a terminal


def test_tampered_summary_exits_four(capsys: pytest.CaptureFixture[str]) -> None:
    """A tampered summary fails validation with summary_digest_mismatch."""
    code, out, _ = run(capsys, "inspect-continuity", "--tamper-summary")
    assert code == 4
    assert "decision: continuity_validation_failed" in out
    assert "reason: summary_digest_mismatch" in out
    assert "event_types: context_compaction -> continuity_validation_failed" in out


def test_policy_drift_exits_four(capsys: pytest.CaptureFixture[str]) -> None:
    """Policy drift fails validation with policy_version_changed."""
    code, out, _ = run(capsys, "inspect-continuity", "--current-policy-version", "policy-v5")
    assert code == 4
    assert "reason: policy_version_changed" in out
    assert "policy-v5" in out


def test_unchanged_policy_version_still_passes(capsys: pytest.CaptureFixture[str]) -> None:
    """Naming the policy version already in force is not drift."""
    code, out, _ = run(capsys, "inspect-continuity", "--current-policy-version", "policy-v4")
    assert code == 0
    assert "decision: reauthorization_required" in out


def test_unknown_side_effect_exits_three_without_rehydration(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """An unknown side effect blocks on reconciliation and emits no context_rehydration."""
    code, out, _ = run(capsys, "inspect-continuity", "--side-effect-status", "side_effect_unknown")
    assert code == 3
    assert "decision: blocked_on_reconciliation" in out
    assert "reason: unknown_side_effect" in out
    assert "reconciliation_required: true" in out
    assert "context_rehydration" not in out


def test_json_output(capsys: pytest.CaptureFixture[str]) -> None:
    """--json prints one object with decision, reason, findings, events and authorized false."""
    code, out, _ = run(capsys, "inspect-continuity", "--tamper-summary", "--json")
    data = json.loads(out)
    assert code == data["exit_status"] == 4
    assert data["decision"] == "continuity_validation_failed"
    assert data["reason"] == "summary_digest_mismatch"
    assert data["authorized"] is False
    assert data["event_types"] == ["context_compaction", "continuity_validation_failed"]
    assert [f["code"] for f in data["findings"]] == ["summary_digest_mismatch"]
    assert data["events"][1]["payload"]["compaction_event_seq"] == data["events"][0]["seq"]


@pytest.mark.parametrize(
    "argv",
    [
        (),
        ("--tamper-summary",),
        ("--current-policy-version", "policy-v5"),
        ("--side-effect-status", "side_effect_partial"),
        ("--side-effect-status", "side_effect_unknown", "--tamper-summary"),
    ],
)
def test_never_prints_authorized_true(capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]) -> None:
    """No path prints ``authorized: true`` in text or JSON."""
    for extra in ((), ("--json",)):
        _, out, _ = run(capsys, "inspect-continuity", *argv, *extra)
        assert "authorized: true" not in out
        assert '"authorized": true' not in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--side-effect-status", "maybe"), "unknown side-effect status 'maybe'"),
        (("--current-policy-version", "policy-v5 "), "policy version has surrounding whitespace"),
        (("--current-policy-version", ""), "policy version is empty"),
    ],
)
def test_bad_flag_values_exit_two_with_one_line(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], message: str
) -> None:
    """A bad flag value is one line on stderr, exit 2, no traceback, nothing on stdout."""
    code, out, err = run(capsys, "inspect-continuity", *argv)
    assert code == 2
    assert out == ""
    assert message in err
    assert err.count("\n") == 1
    assert "Traceback" not in err


def test_eval_prints_the_table_and_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    """eval-continuity lists every scenario and passes them all."""
    code, out, _ = run(capsys, "eval-continuity")
    assert code == 0
    for scenario in SCENARIOS:
        assert scenario.name in out
    assert f"{len(SCENARIOS)}/{len(SCENARIOS)} scenarios passed" in out
    assert "FAIL" not in out


def test_eval_json(capsys: pytest.CaptureFixture[str]) -> None:
    """eval-continuity --json reports each path's decision and the verdict."""
    code, out, _ = run(capsys, "eval-continuity", "--json")
    data = json.loads(out)
    assert code == 0
    assert data["failed"] == 0
    assert data["passed"] == len(SCENARIOS)
    unknown = next(s for s in data["scenarios"] if s["scenario"] == "unknown_side_effect")
    assert unknown["compacted"]["decision"] == "blocked_on_reconciliation"
    assert "context_rehydration" not in unknown["compacted"]["event_types"]
    assert all(s["authorized"] is False for s in data["scenarios"])


def test_eval_exits_non_zero_when_a_scenario_fails(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failing scenario makes eval-continuity exit 1 and name the problem."""
    import attrs

    from holon_ctx.continuity.codes import DecisionKind, ReasonCode
    from holon_ctx.continuity.evaluation import run_evaluation
    from holon_ctx.continuity.harness import ContinuityHarness

    wrong = attrs.evolve(
        SCENARIOS[0], expected=(DecisionKind.CONTINUITY_VALIDATION_FAILED, ReasonCode.TENANT_MISMATCH)
    )
    monkeypatch.setattr(ContinuityHarness, "evaluation", staticmethod(lambda: run_evaluation([wrong])))
    code, out, _ = run(capsys, "eval-continuity")
    assert code == 1
    assert "FAIL constraint_kept: expected continuity_validation_failed/tenant_mismatch" in out
    assert "0/1 scenarios passed" in out
