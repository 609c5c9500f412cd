"""``holon-ctx inspect-continuity`` and ``holon-ctx eval-continuity``.

``inspect-continuity`` runs the seed's experiment on the built-in support-ticket session (an
in-memory store and a fixed clock, so output is identical everywhere) and prints the decision,
its reason, every finding and the trace event types in order. Exit status, so scripts can act:

    0  reauthorization_required      continuity holds; re-authorise the next action
    3  blocked_on_reconciliation     a side effect may have happened; reconcile, never retry
    4  continuity_validation_failed  the envelope cannot be used; rebuild from full history
    2  bad input (a flag value), as for every holon-ctx command

``eval-continuity`` runs the seed's §6 evaluation (every scenario with full and with compacted
history) and exits 0 when all scenarios pass, 1 when any fails.

Neither command ever prints ``authorized: true``: there is no such outcome.
"""

from __future__ import annotations

import argparse
import json
import sys
from types import MappingProxyType
from typing import Any, Final

from rich.console import Console
from rich.table import Table

from holon_ctx.cli._api import ContinuityHarness
from holon_ctx.cli.terminal import SafeConsole
from holon_ctx.continuity import DecisionKind, SideEffectStatus, id_problem
from holon_ctx.errors import InputError, quote_value

__all__ = ["EVAL_FAILED_STATUS", "EXIT_STATUS", "cmd_eval", "cmd_inspect", "register"]

#: Exit status per decision (2 stays reserved for bad input).
EXIT_STATUS: Final = MappingProxyType(
    {
        DecisionKind.REAUTHORIZATION_REQUIRED: 0,
        DecisionKind.BLOCKED_ON_RECONCILIATION: 3,
        DecisionKind.CONTINUITY_VALIDATION_FAILED: 4,
    }
)
#: Exit status of ``eval-continuity`` when any scenario fails.
EVAL_FAILED_STATUS: Final = 1

#: What each exit status means, for the commands' own --help (built from the tables above).
_MEANING: Final = MappingProxyType({
    DecisionKind.REAUTHORIZATION_REQUIRED: "continuity holds; re-authorise the next action",
    DecisionKind.BLOCKED_ON_RECONCILIATION: "a side effect may have happened; reconcile, never retry",
    DecisionKind.CONTINUITY_VALIDATION_FAILED: "the envelope cannot be used; rebuild from full "
                                               "history",
})
_INSPECT_EPILOG: Final = "exit status:\n" + "".join(
    f"  {code}  {kind.value:<30}{_MEANING[kind]}\n" for kind, code in EXIT_STATUS.items()
) + f"  2  {'bad input':<30}a flag value, as for every holon-ctx command\n"
_EVAL_EPILOG: Final = ("exit status:\n  0  every scenario passes\n"
                       f"  {EVAL_FAILED_STATUS}  a scenario fails\n"
                       "  2  bad input, as for every holon-ctx command\n")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "inspect-continuity",
        help="run the continuity-envelope experiment (exit 0/3/4 by decision)",
        description="Compact and rehydrate the built-in support session; print the decision.",
        epilog=_INSPECT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--tamper-summary", action="store_true", help="alter the summary after sealing")
    p.add_argument(
        "--current-policy-version",
        metavar="V",
        help="policy version in force at resumption "
        f"(compacted under {ContinuityHarness.SEED_POLICY_VERSION})",
    )
    p.add_argument(
        "--side-effect-status",
        metavar="S",
        help="status of the ticket write at compaction: "
        + ", ".join(status.value for status in SideEffectStatus),
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.set_defaults(func=cmd_inspect)

    p = subparsers.add_parser(
        "eval-continuity",
        help="full-history vs compacted-history evaluation (exit 1 if any scenario fails)",
        description="Run every continuity scenario with full and with compacted history.",
        epilog=_EVAL_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=cmd_eval)


#: Layout width off a terminal: rich would otherwise assume 80 columns and fold scenario names
#: and reason codes mid-word, which breaks grep in CI logs.
_PIPE_WIDTH: Final = 160


def _console() -> Console:
    # force_terminal=None: colour and styles only on a terminal, plain text in pipes and tests.
    width = None if sys.stdout.isatty() else _PIPE_WIDTH
    return SafeConsole(force_terminal=None, highlight=False, width=width)


def _side_effect_status(text: str | None) -> SideEffectStatus:
    if text is None:
        return SideEffectStatus.NONE
    try:
        return SideEffectStatus(text)
    except ValueError:
        choices = ", ".join(status.value for status in SideEffectStatus)
        raise InputError(
            f"unknown side-effect status {quote_value(text)}; expected one of {choices}",
            path="--side-effect-status",
        ) from None


def _policy_version(text: str | None) -> str | None:
    if text is not None:
        problem = id_problem(text)
        if problem:
            raise InputError(f"policy version {problem}", path="--current-policy-version")
    return text


def _inspect_json(args: argparse.Namespace, result: ContinuityHarness.Experiment) -> dict[str, Any]:
    data = result.decision.to_dict()
    data["scenario"] = {
        "tamper_summary": args.tamper_summary,
        "current_policy_version": (args.current_policy_version
                                   or ContinuityHarness.SEED_POLICY_VERSION),
        "side_effect_status": _side_effect_status(args.side_effect_status).value,
    }
    data["event_types"] = list(result.event_types)
    data["events"] = [
        {
            "seq": e.seq,
            "event_type": e.event_type.value,
            "envelope_id": e.envelope_id,
            "payload": e.payload,
        }
        for e in result.events
    ]
    data["exit_status"] = EXIT_STATUS[result.decision.kind]
    return data


def cmd_inspect(args: argparse.Namespace) -> int:
    status = _side_effect_status(args.side_effect_status)
    policy = _policy_version(args.current_policy_version)
    result = ContinuityHarness.experiment(
        tamper_summary=args.tamper_summary,
        current_policy_version=policy,
        side_effect_status=status,
    )
    decision = result.decision
    if args.json:
        sys.stdout.write(json.dumps(_inspect_json(args, result), indent=2) + "\n")
        return EXIT_STATUS[decision.kind]
    out = _console()
    lines = (
        f"envelope: {result.envelope.envelope_id} (session {result.envelope.session_id})",
        f"decision: {decision.kind.value}",
        f"reason: {decision.reason.value}",
        "authorized: false",
        "requires_reauthorization: true",
        f"reconciliation_required: {str(decision.reconciliation_required).lower()}",
    )
    for line in lines:
        out.print(line, markup=False)
    if decision.findings:
        table = Table(title="findings", title_justify="left")
        for column in ("code", "path", "detail"):
            table.add_column(column, overflow="fold")
        for finding in decision.findings:
            table.add_row(finding.code.value, finding.path, finding.detail)
        out.print(table)
    else:
        out.print("findings: none", markup=False)
    events = Table(title="trace events", title_justify="left")
    for column in ("seq", "event_type", "envelope_id", "links compaction"):
        events.add_column(column)
    for event in result.events:
        link = event.payload.get("compaction_event_seq")
        events.add_row(str(event.seq), event.event_type.value, event.envelope_id, str(link or "-"))
    out.print(events)
    out.print("event_types: " + " -> ".join(result.event_types), markup=False)
    return EXIT_STATUS[decision.kind]


def _eval_json(result: ContinuityHarness.Scenario) -> dict[str, Any]:
    full, compacted = result.full.decision, result.compacted.decision
    return {
        "scenario": result.scenario.name,
        "requirement": result.scenario.requirement,
        "full": {
            "decision": full.kind.value,
            "reason": full.reason.value,
            "reconciliation_required": full.reconciliation_required,
        },
        "compacted": {
            "decision": compacted.kind.value,
            "reason": compacted.reason.value,
            "reconciliation_required": compacted.reconciliation_required,
            "event_types": [e.event_type.value for e in result.compacted.events],
        },
        "authorized": False,
        "passed": result.passed,
        "problems": list(result.problems),
    }


def cmd_eval(args: argparse.Namespace) -> int:
    results = ContinuityHarness.evaluation()
    failed = [r for r in results if not r.passed]
    if args.json:
        payload = {
            "scenarios": [_eval_json(r) for r in results],
            "passed": len(results) - len(failed),
            "failed": len(failed),
        }
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
        return EVAL_FAILED_STATUS if failed else 0
    out = _console()
    table = Table(title="continuity evaluation: full vs compacted history", title_justify="left")
    for column in ("scenario", "requirement", "full history", "compacted", "verdict"):
        table.add_column(column, overflow="fold")
    for r in results:
        full, compacted = r.full.decision, r.compacted.decision
        table.add_row(
            r.scenario.name,
            r.scenario.requirement,
            f"{full.kind.value}\n{full.reason.value}",
            f"{compacted.kind.value}\n{compacted.reason.value}",
            "pass" if r.passed else "FAIL",
        )
    out.print(table)
    for r in failed:
        for problem in r.problems:
            out.print(f"FAIL {r.scenario.name}: {problem}", markup=False)
    out.print(f"{len(results) - len(failed)}/{len(results)} scenarios passed", markup=False)
    return EVAL_FAILED_STATUS if failed else 0
