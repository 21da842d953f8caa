"""`--plot PATH.png` on `vkocr bench stream` and `vkocr bench agent`, and scripts/plot_benchmarks.py: without an
importable matplotlib they stop at once, before any bench runs, saying to `pip install 'vkocr[plots]'`. The
failure is real: a subprocess whose PYTHONPATH puts first a folder where `import matplotlib` raises."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from tests.paths import ROOT
from vkocr.agent.cli.main import build_parser, main

BROKEN = "matplotlib broken on purpose by the test"
MAIN = "import sys; from vkocr.agent.cli.main import main; sys.exit(main(sys.argv[1:]))"


def without_matplotlib(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """argv run in a fresh interpreter where `import matplotlib` fails (ImportError from its __init__)."""
    shadow = tmp_path / "shadow" / "matplotlib"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text(f"raise ImportError({BROKEN!r})\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(shadow.parent), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=120)


def test_the_shadow_really_breaks_the_import(tmp_path: Path) -> None:
    done = without_matplotlib(tmp_path, "-c", "import matplotlib")
    assert done.returncode == 1 and BROKEN in done.stderr


@pytest.mark.parametrize("command", [["bench", "stream", "--rendered", "1", "--no-rapidocr"],
                                     ["bench", "agent", "--rendered", "1", "--clients", "1"]], ids=" ".join)
def test_plot_without_matplotlib_stops_before_the_bench_naming_the_extra(command: list[str], tmp_path: Path) -> None:
    done = without_matplotlib(tmp_path, "-c", MAIN, *command, "--plot", str(tmp_path / "chart.png"))
    assert done.returncode == 2, done.stderr
    assert "vkocr: error: charts need matplotlib" in done.stderr
    assert "pip install 'vkocr[plots]'" in done.stderr and BROKEN in done.stderr
    assert "bench stream: pass" not in done.stderr and "starting an agent" not in done.stderr  # nothing ran
    assert not (tmp_path / "chart.png").exists()


def test_the_script_without_matplotlib_names_the_extra(tmp_path: Path) -> None:
    done = without_matplotlib(tmp_path, str(ROOT / "scripts" / "plot_benchmarks.py"),
                              str(ROOT / "benchmarks" / "2026-11-30-h200-agent-3.json"), "-o", str(tmp_path))
    assert done.returncode == 1
    assert "pip install 'vkocr[plots]'" in done.stderr
    assert not list(tmp_path.glob("*.png"))


def test_the_script_draws_each_json_as_its_png(tmp_path: Path) -> None:
    sources = [ROOT / "benchmarks" / f"{name}.json" for name in ("2026-12-01-h200-stream-9", "2026-11-30-h200-agent-3")]
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "plot_benchmarks.py"), *map(str, sources),
                           "-o", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    for source in sources:
        assert Image.open(tmp_path / f"{source.stem}.png").size == (1000, 500)


@pytest.mark.parametrize("command", [["bench", "stream"], ["bench", "agent"]], ids=" ".join)
def test_plot_takes_a_png_path(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert str(build_parser("bench").parse_args([*command, "--plot", "out/run.png"]).plot) == "out/run.png"
    assert build_parser("bench").parse_args(command).plot is None
    with pytest.raises(SystemExit) as stopped:
        main([*command, "--plot", "run.jpg"])
    assert stopped.value.code == 2
    assert "give a path ending in .png" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["bench", "stream"], ["bench", "agent"]], ids=" ".join)
def test_the_help_says_what_the_chart_shows_and_what_it_needs(command: list[str],
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main([*command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--plot PATH.png" in text and "pip install 'vkocr[plots]'" in text
