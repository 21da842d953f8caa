"""`vkocr ocr`'s progress bar over many inputs: on stderr when stderr is a terminal (a real pseudo-terminal
here) or with --progress, never otherwise, and never on stdout: --json output stays one JSON object a line."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import struct
import subprocess
import sys
import termios

import pytest

from tests.paths import ROOT
from tests.text_pages import FONT, text_page
from vkocr.agent.cli.main import main

pytestmark = pytest.mark.skipif(not os.path.exists(FONT),
                                reason="fonts-dejavu-core (installed by ./test.sh) renders the test images")

REC_ONLY = ["--no-det", "--no-cls", "--device", "cpu", "--json"]


@pytest.fixture(scope="module")
def words(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    folder = tmp_path_factory.mktemp("words")
    paths = []
    for word in ("LOT0042", "LOT4821"):
        paths.append(str(folder / f"{word}.png"))
        text_page(word, width=200).crop((0, 20, 200, 90)).save(paths[-1])
    return paths


def json_only(out: str, count: int) -> None:
    lines = out.splitlines()
    assert len(lines) == count and all(json.loads(line)["lines"] for line in lines), out


def test_progress_forced_goes_to_stderr_only(words: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ocr", *words, *REC_ONLY, "--progress"]) == 0
    out, err = capsys.readouterr()
    json_only(out, 2)
    assert "2/2" in err and "image" in err


def test_no_bar_when_stderr_is_not_a_terminal(words: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ocr", *words, *REC_ONLY]) == 0
    out, err = capsys.readouterr()
    json_only(out, 2)
    assert "2/2" not in err and "\r" not in err


def test_a_terminal_gets_the_bar_and_stdout_stays_json(words: list[str]) -> None:
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))  # a new one is 0 columns wide
    try:
        child = subprocess.Popen([sys.executable, "-m", "vkocr.agent.cli.main", "ocr", *words, *REC_ONLY],
                                 stdout=subprocess.PIPE, stderr=follower, cwd=ROOT)
        os.close(follower)
        screen = b""
        while True:  # read as it comes, so the terminal's buffer never fills; EIO: the child closed its end
            try:
                chunk = os.read(leader, 4096)
            except OSError:
                break
            if not chunk:
                break
            screen += chunk
        out, _ = child.communicate(timeout=300)
    finally:
        os.close(leader)
    assert child.returncode == 0, screen.decode(errors="replace")
    json_only(out.decode(), 2)
    assert b"2/2" in screen and b"\r" in screen  # drawn and redrawn in place
