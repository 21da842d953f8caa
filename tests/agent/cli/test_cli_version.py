"""`--version` on every command and every command under it (`vkocr ocr --version`, `vkocr client health
--version`), through the real parsers each command builds; where a command's --version means something else
(`bundle create --version`: the bundle's), its help says how to get vkocr's."""

from __future__ import annotations

import pytest

from tests.cli_commands import command_parsers
from vkocr import __version__
from vkocr.agent.cli.main import main

OWN_VERSION = {("bundle", "create")}  # commands whose --version is an argument of their own


PATHS = [path for path, _ in command_parsers()]


def test_the_walk_finds_the_commands() -> None:
    assert {("ocr",), ("client", "health"), ("fleet", "status"), ("bundle", "verify"), ("bench", "stream"),
            ("debug", "compare")} <= set(PATHS)


@pytest.mark.parametrize("path", [p for p in PATHS if p not in OWN_VERSION], ids=" ".join)
def test_every_command_prints_the_version(path: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main([*path, "--version"])  # before any required argument is missed
    assert stopped.value.code == 0
    assert capsys.readouterr().out == f"vkocr {__version__}\n"


def test_a_command_with_its_own_version_says_where_vkocrs_is(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["bundle", "create", "--help"])
    assert "(vkocr's own version: `vkocr --version`)" in " ".join(capsys.readouterr().out.split())
