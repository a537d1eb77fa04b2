"""Every flag, positional argument and sub-command of `pyccm` says what it is for in
`--help`: the parser is built exactly as `pyccm` builds it, and walked down every
sub-command, so a flag added without help fails here rather than in front of a user."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from pyccm.cli import build_parser


def commands(
    parser: argparse.ArgumentParser, prog: str = "pyccm"
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """(`pyccm worker`, its parser) for the top level and every sub-command, depth first."""
    yield prog, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from commands(sub, f"{prog} {name}")


def undocumented(parser: argparse.ArgumentParser) -> list[str]:
    """The actions of one parser whose help is missing or blank (-h/--help excepted)."""
    missing = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if not (action.help or "").strip():
            missing.append("/".join(action.option_strings) or str(action.metavar or action.dest))
        if isinstance(action, argparse._SubParsersAction):
            # The one-line summaries `pyccm COMMAND --help` lists for each sub-command.
            missing += [
                f"{parser.prog} {choice.dest}"
                for choice in action._choices_actions
                if not (choice.help or "").strip()
            ]
    return missing


def test_the_walk_reaches_every_long_running_command() -> None:
    found = dict(commands(build_parser()))
    for prog in ("pyccm manager", "pyccm worker", "pyccm sim kube", "pyccm sim openstack"):
        assert prog in found
        assert "--log-format" in found[prog]._option_string_actions


def test_every_action_of_every_command_has_help_text() -> None:
    missing = {
        prog: names for prog, parser in commands(build_parser()) if (names := undocumented(parser))
    }
    assert missing == {}
