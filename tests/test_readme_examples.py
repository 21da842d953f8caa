"""The README's examples run as they stand (issue 41): every ```sh and ```python block of README.md and
docs/engine.md, verbatim and in order, in one bash session per page, in a fresh `git clone` of the checkout.

The session finds `vkocr` and `python` in this interpreter's environment (its bin/ first on PATH), makes its
temporary folders under the test's own (TMPDIR), and finds the agent it starts on a free loopback port
(VKOCR_TARGET; the README's default, 127.0.0.1:50051, may be taken on a shared machine). A block that fails stops
the session and names itself; afterwards the clone must be as cloned (`git status --porcelain --ignored`): the
examples write under a temporary folder, never into the checkout. Slow (an agent, a dozen OCR runs on the CPU
backend: about a minute on 2 cores), in the default run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.agent.agents import free_port
from tests.doc_examples import PYTHON_END, RUN, SHOWN_ONLY_NOTE, Block, blocks, session_script
from tests.paths import ROOT

PAGES = ("README.md", "docs/engine.md")
OTHER_PAGES = ("docs/setup.md", "docs/reading.md", "docs/agent.md")  # no runnable examples: notes only
SESSION_TIMEOUT_S = 400


@pytest.mark.parametrize("page", PAGES + OTHER_PAGES)
def test_every_block_runs_or_says_why_not(page: str) -> None:
    """A block is run (```sh, ```python) or shown only with a note just before it saying why."""
    for block in blocks(ROOT, page):
        if block.runs:
            assert block.note is None or not SHOWN_ONLY_NOTE.fullmatch(block.note), \
                f"{block.where}: a ```{block.language} block is run, but its note says it is not"
            assert PYTHON_END not in block.text, f"{block.where}: holds the session's heredoc delimiter"
        else:
            assert block.note is not None and SHOWN_ONLY_NOTE.fullmatch(block.note), (
                f"{block.where}: a ```{block.language or '(no language)'} block is not run: say why on the line "
                f"before it, <!-- output --> or <!-- not run: REASON --> (or make it ```sh / ```python)")
    if page in OTHER_PAGES:
        assert not any(b.runs for b in blocks(ROOT, page)), f"{page} has examples to run: add it to PAGES"


def test_the_readme_has_examples_of_each_kind() -> None:
    languages = {b.language for b in blocks(ROOT, "README.md") if b.runs}
    assert languages == set(RUN)


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not (ROOT / ".git").exists():
        pytest.skip(f"{ROOT} is not a git checkout: the examples run in a clone of one")
    target = tmp_path_factory.mktemp("readme") / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(target)], check=True, capture_output=True, timeout=120)
    return target


def run_session(page_blocks: list[Block], clone: Path, tmp: Path) -> subprocess.CompletedProcess[str]:
    script = tmp / "session.sh"
    script.write_text(session_script(page_blocks, clone))
    (tmp / "tmp").mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}", TMPDIR=str(tmp / "tmp"),
               VKOCR_TARGET=f"127.0.0.1:{free_port()}")
    # its own process group, so an agent a block started is stopped even when the session fails half-way
    process = subprocess.Popen(["bash", str(script)], cwd=clone, env=env, text=True, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        out, _ = process.communicate(timeout=SESSION_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, _ = process.communicate()
        out += f"\n(the session ran past {SESSION_TIMEOUT_S} s)"
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return subprocess.CompletedProcess(process.args, process.returncode, out, "")


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES)
def test_examples_run_verbatim_in_a_clean_clone(page: str, clone: Path, tmp_path: Path) -> None:
    page_blocks = [b for b in blocks(ROOT, page) if b.runs]
    assert page_blocks, f"{page} has no examples to run"
    done = run_session(page_blocks, clone, tmp_path)
    announced = [line for line in done.stdout.splitlines() if line.startswith("### ")]
    assert done.returncode == 0, (f"{announced[-1] if announced else page}: the example failed "
                                  f"(exit {done.returncode}):\n{done.stdout[-6000:]}")
    assert len(announced) == len(page_blocks)
    left = subprocess.run(["git", "status", "--porcelain", "--ignored"], cwd=clone, capture_output=True,
                          text=True, check=True).stdout
    assert left == "", f"{page}'s examples left files in the checkout:\n{left}"


def test_the_session_stops_at_a_failing_block_and_names_it(tmp_path: Path) -> None:
    """The harness itself can fail: a block that exits non-zero stops the session, and the blocks after it
    never run."""
    (tmp_path / "page.md").write_text("```sh\necho one\n```\n\n```python\nraise SystemExit(3)\n```\n\n"
                                      "<!-- output -->\n```text\nnever run\n```\n\n```sh\necho three\n```\n")
    page_blocks = blocks(tmp_path, "page.md")
    assert [(b.language, b.note) for b in page_blocks] == [("sh", None), ("python", None), ("text", "<!-- output -->"),
                                                           ("sh", None)]
    done = run_session([b for b in page_blocks if b.runs], tmp_path, tmp_path)
    assert done.returncode == 3
    assert [line for line in done.stdout.splitlines() if line.startswith("### ")][-1] == "### page.md:5 (python)"
    assert "three" not in done.stdout
