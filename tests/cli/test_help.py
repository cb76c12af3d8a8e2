"""Every option of every subcommand says what it is, its default and its choices in
``--help`` (issue 39, "Habits of the ecosystem")."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

from schedlab.cli import COMMANDS, build_parser


def _parsers(
    parser: argparse.ArgumentParser, name: str = "schedlab"
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """``parser`` and every subcommand parser under it, by command line."""
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub, child in action.choices.items():
                yield from _parsers(child, f"{name} {sub}")


PARSERS = dict(_parsers(build_parser()))
#: (command, action) of every argument but --help and --version, and the subcommands.
ACTIONS = [
    (command, action)
    for command, parser in PARSERS.items()
    for action in parser._actions
    if not isinstance(
        action, argparse._HelpAction | argparse._VersionAction | argparse._SubParsersAction
    )
]


def _name(action: argparse.Action) -> str:
    return "/".join(action.option_strings) or action.dest


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """The help text as ``--help`` shows it (``%(default)s`` and such filled in), on one
    line."""
    text = parser._get_formatter()._expand_help(action)
    return " ".join(text.split())


def _shown(default: object) -> set[str]:
    """Ways a help text may write ``default``."""
    if isinstance(default, list | tuple):
        return {",".join(map(str, default)), ", ".join(map(str, default))}
    if isinstance(default, bool | str):
        return {str(default)}
    if isinstance(default, int):
        return {str(default), f"{default:,}"}
    if isinstance(default, float):
        return {str(default), f"{default:g}"}
    return {str(default)}


def test_the_walk_finds_every_subcommand():
    names = {command.split()[-1] for command in PARSERS}
    for command in ("solve", "compare", "simulate", "cluster", "calibrate", "replay", "export"):
        assert command in names
    assert "schedlab profile import" in PARSERS
    assert len(ACTIONS) > 150


@pytest.mark.parametrize(
    ("command", "action"), ACTIONS, ids=lambda x: _name(x) if isinstance(x, argparse.Action) else x
)
def test_every_option_says_what_it_is(command, action):
    if action.help == argparse.SUPPRESS:  # a hidden old spelling: a visible one shares its dest
        visible = [
            a
            for a in PARSERS[command]._actions
            if a.dest == action.dest and a.help != argparse.SUPPRESS
        ]
        assert visible, (
            f"{command} {_name(action)} is hidden and no visible option sets {action.dest}"
        )
        return
    assert action.help and len(action.help.split()) >= 2, f"{command} {_name(action)}: no help"


@pytest.mark.parametrize(
    ("command", "action"), ACTIONS, ids=lambda x: _name(x) if isinstance(x, argparse.Action) else x
)
def test_every_default_is_shown(command, action):
    default = action.default
    if default is None or default is False or default == argparse.SUPPRESS:
        return
    if action.help == argparse.SUPPRESS:
        return
    text = _help(PARSERS[command], action)
    assert "default" in text, f"{command} {_name(action)}: default {default!r} not shown"
    assert any(shown in text for shown in _shown(default)), (
        f"{command} {_name(action)}: default {default!r} not in {text!r}"
    )


@pytest.mark.parametrize(
    ("command", "action"), ACTIONS, ids=lambda x: _name(x) if isinstance(x, argparse.Action) else x
)
def test_every_choice_is_listed(command, action):
    if action.choices is None or action.help == argparse.SUPPRESS:
        return
    if action.metavar is None:  # argparse shows {a,b,c} in the usage and the help
        return
    text = _help(PARSERS[command], action)
    missing = [c for c in action.choices if str(c) not in text]
    assert not missing, f"{command} {_name(action)}: choices {missing} not in its help"


def _commands(parser: argparse.ArgumentParser) -> set[str]:
    return {
        name
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
        for name in action.choices
    }


def test_a_command_builds_only_its_module_s_parser():
    # schedlab.cli.COMMANDS names the module of every command, and no other
    assert _commands(build_parser()) == set(COMMANDS)
    for command, module in COMMANDS.items():
        mates = {name for name, part in COMMANDS.items() if part == module}
        assert _commands(build_parser(command)) == mates, command
    assert _commands(build_parser("no-such-command")) == set(COMMANDS)  # its error lists all
