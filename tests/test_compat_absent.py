"""A user's clone has no workspace beside it: every test that reads RapidOCR's compat images (the workspace's
shared/, tests/paths.py) carries `@pytest.mark.compat` and skips, with its reason, when they are absent.

Two halves keep it so. tests/conftest.py fails any test that reads under shared/ without the mark, in every
run that has the folder (CI's). Here, pytest runs in a subprocess with VKOCR_SHARED naming an empty folder,
over every test file that refers to the shared folder: each file collects (nothing is read at import) and each
marked test skips, none runs, so nothing fails."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.paths import COMPAT_ABSENT, ROOT

REFERS = re.compile(r"\b(COMPAT\w*|SHARED)\b|mark\.compat")  # tests/paths.py's names for the shared folder


def files_that_refer_to_the_shared_folder() -> list[str]:
    tests = sorted((ROOT / "tests").rglob("test_*.py"))
    return [str(p.relative_to(ROOT)) for p in tests if p.name != Path(__file__).name and REFERS.search(p.read_text())]


def test_without_the_shared_folder_every_compat_test_skips_and_nothing_fails(tmp_path: Path) -> None:
    files = files_that_refer_to_the_shared_folder()
    assert "tests/e2e/test_parity.py" in files and "tests/test_images.py" in files
    empty = tmp_path / "shared"
    empty.mkdir()
    env = {**os.environ, "VKOCR_SHARED": str(empty)}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-m", "compat",
                          *files], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    summary = out.strip().splitlines()[-1]
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (\w+)", summary)}
    assert counts.get("skipped", 0) > 0 and set(counts) <= {"skipped", "deselected"}, summary  # none ran
    reasons = re.findall(r"^SKIPPED \[\d+\] [^:]+(?::\d+)?: (.*)$", out, re.MULTILINE)
    absent = COMPAT_ABSENT.partition(" (")[0]  # its folder is the empty one here
    assert reasons and all(r.startswith((absent, "got empty parameter set")) for r in reasons), out


def test_a_test_that_reads_the_shared_folder_without_the_mark_fails(tmp_path: Path) -> None:
    """The other half, on a shared/ folder made here: the unmarked reader errors, naming the file; the marked
    one passes; with no folder there the marked one skips and the unmarked one fails."""
    images = tmp_path / "shared" / "compat" / "rapidocr-1.4.4" / "images"
    images.mkdir(parents=True)
    (images / "a.txt").write_text("a")
    (tmp_path / "test_reads.py").write_text(
        "import pytest\n"
        "from tests.paths import COMPAT_IMAGES\n\n"
        "def test_unmarked():\n    (COMPAT_IMAGES / 'a.txt').read_text()\n\n"
        "@pytest.mark.compat\ndef test_marked():\n    (COMPAT_IMAGES / 'a.txt').read_text()\n")

    def pytest_with(shared: Path) -> str:
        run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
                              "tests.conftest", str(tmp_path / "test_reads.py")], cwd=ROOT, capture_output=True,
                             text=True, env={**os.environ, "VKOCR_SHARED": str(shared)}, timeout=120)
        return run.stdout + run.stderr

    present = pytest_with(tmp_path / "shared")  # the unmarked test passes its call, then errors at teardown
    assert "2 passed, 1 error" in present and "ERROR at teardown of test_unmarked" in present, present
    assert "without @pytest.mark.compat" in present and str(images / "a.txt") in present, present
    assert "1 failed, 1 skipped" in pytest_with(tmp_path / "absent")
