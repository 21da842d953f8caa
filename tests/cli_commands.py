"""Every command of the `vkocr` command line, found by walking the parsers the commands build themselves."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from vkocr.agent.cli.main import REGISTRARS, build_parser


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse keeps no public list of a parser's commands
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def command_parsers() -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """(the words that name it, its parser) for every command and subcommand, each built in full."""
    def walk(parser: argparse.ArgumentParser, path: tuple[str, ...]
             ) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
        yield path, parser
        for name, child in subcommands(parser).items():
            yield from walk(child, (*path, name))

    for names, _, _ in REGISTRARS:
        for name in names:
            yield from walk(subcommands(build_parser(name))[name], (name,))
