"""Help matches behaviour (issue 16): every subcommand's ``--help`` is walked and believed.

For each command (and each ``episodes`` action) the test reads the usage line that ``--help``
prints, and checks: every option the command accepts is shown there, an option that may be given
twice is shown twice, every option has a line of help, and the command line the usage describes
(each option with a sample value, repeated options repeated) parses. Sample values come from the
metavars, so the test reads the help as a person would.
"""

from __future__ import annotations

import argparse
import re

import pytest

from holon_ctx.cli.main import build_parser

#: A value of the right kind for each metavar the help shows.
SAMPLES = {"N": "5", "M": "7", "W": "80", "PATH": "x.db", "FILE": "x.jsonl", "SOURCE": "x.jsonl",
           "REF": "turn:t1", "TURN_ID": "t1", "A": "t1", "B": "t2", "ID": "id1", "V": "policy-v5",
           "S": "side_effect_unknown", "PREFIX": "p-", "EPISODE": "e1-2"}


def _commands() -> list[tuple[str, argparse.ArgumentParser]]:
    found: list[tuple[str, argparse.ArgumentParser]] = []

    def walk(prefix: str, parser: argparse.ArgumentParser) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    found.append((f"{prefix} {name}".strip(), sub))
                    walk(f"{prefix} {name}", sub)

    walk("", build_parser())
    return found


COMMANDS = _commands()


def _usage(parser: argparse.ArgumentParser) -> str:
    text = parser.format_usage()
    return " ".join(text.removeprefix("usage:").split())


def _options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if a.option_strings and not isinstance(a, argparse._HelpAction)]


def test_every_command_is_walked() -> None:
    """The walk sees every command of ``holon-ctx --help`` and every episodes action."""
    names = {name for name, _ in COMMANDS}
    assert {"import", "export", "stats", "project", "preview", "explain", "diff", "demo",
            "compact", "inspect-continuity", "eval-continuity", "episodes list",
            "episodes show", "episodes archive", "episodes rebuild", "episodes verify"} <= names


@pytest.mark.parametrize(("name", "parser"), COMMANDS, ids=[n for n, _ in COMMANDS])
def test_usage_shows_every_option_and_repeats(name: str, parser: argparse.ArgumentParser) -> None:
    """Each option is in the usage line, twice when it may be given twice, and has help text."""
    usage = _usage(parser)
    for action in _options(parser):
        flag = max(action.option_strings, key=len)
        shown = max(len(re.findall(r"(?<![\w-])" + re.escape(f) + r"\b", usage))
                    for f in action.option_strings)
        assert shown >= (2 if isinstance(action, argparse._AppendAction) else 1), (flag, usage)
        assert action.help, f"{name} {flag} has no help text"


def _usage_command_line(prog: str, usage: str) -> list[str]:
    """The usage line turned into arguments: one branch of each ``(A | B)``, every bracket
    opened, each metavar replaced by a sample value, a choice by its last value."""
    words = usage.removeprefix(prog).split()
    text = " ".join(words)
    text = re.sub(r"\(([^()|]*?)\s*\|[^()]*\)", r"\1", text)  # first branch of (A | B)
    text = text.replace("...", "")
    out: list[str] = []
    for word in re.sub(r"[\[\]()]", " ", text).split():
        if word in ("-h", "--help"):
            continue
        if word.startswith("{"):
            out.append(word.strip("{}").split(",")[-1])
        elif word.startswith("-"):
            out.append(word)
        else:
            out.append(SAMPLES.get(word, word))
    return out


@pytest.mark.parametrize(("name", "parser"), COMMANDS, ids=[n for n, _ in COMMANDS])
def test_the_documented_command_line_parses(name: str, parser: argparse.ArgumentParser) -> None:
    """The usage line, with every option given, is accepted and each option takes effect."""
    if any(isinstance(a, argparse._SubParsersAction) for a in parser._actions):
        pytest.skip("a group of actions: each action is walked on its own")
    argv = _usage_command_line(parser.prog, _usage(parser))
    exclusive = {"--json", "--format"}  # `project`: one output choice at a time, said in the help
    if exclusive <= set(argv):
        i = argv.index("--format")
        del argv[i:i + 2]
    args = build_parser().parse_args([*name.split(), *argv])
    for action in _options(parser):
        flag = next((f for f in action.option_strings if f in argv), None)
        if flag is not None:
            assert getattr(args, action.dest) != action.default, (flag, argv)


def test_inspect_continuity_help_states_its_exit_codes() -> None:
    """``inspect-continuity --help`` lists exit statuses 0, 3, 4 and 2 and what each means."""
    parser = dict(COMMANDS)["inspect-continuity"]
    text = parser.format_help()
    for code, words in (("0", "reauthorization_required"), ("3", "blocked_on_reconciliation"),
                        ("4", "continuity_validation_failed"), ("2", "bad input")):
        assert re.search(rf"^\s+{code}\s+{words}", text, re.MULTILINE), (code, text)


def test_eval_continuity_help_states_its_exit_codes() -> None:
    """``eval-continuity --help`` says when it exits 0, 1 and 2."""
    text = dict(COMMANDS)["eval-continuity"].format_help()
    for code in ("0", "1", "2"):
        assert re.search(rf"^\s+{code}\s+\S", text, re.MULTILINE), (code, text)


def test_a_command_group_names_each_action_in_its_help_line() -> None:
    """``holon-ctx --help`` lists, for ``episodes``, every action it has."""
    top = build_parser()
    group = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    for choice in group._choices_actions:
        sub = group.choices[choice.dest]
        actions = [a for a in sub._actions if isinstance(a, argparse._SubParsersAction)]
        for action in actions:
            for name in action.choices:
                assert name in (choice.help or ""), (choice.dest, name, choice.help)
