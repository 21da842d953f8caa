"""The bench charts (agent/cli/bench_charts.py) drawn from real committed bench JSON: a PNG of the set size, each
series' colour present in it (a series not drawn fails the test), only the series the run has, and a clear
error naming what is missing when the JSON is not a bench run's."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from tests.paths import ROOT
from vkocr.agent.cli.bench_charts import COLOURS, RUN_COLOURS, chart_kind, render_chart
from vkocr.agent.cli.errors import ChartError

STREAM = ROOT / "benchmarks" / "2026-12-01-h200-stream-9.json"
AGENT = ROOT / "benchmarks" / "2026-11-30-h200-agent-3.json"


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def pixels_of(png: Path, colour: str) -> int:
    """How many pixels of the PNG have exactly this colour ("#rrggbb")."""
    rgb = np.asarray(Image.open(png).convert("RGB"))
    want = np.array([int(colour[k:k + 2], 16) for k in (1, 3, 5)], np.uint8)
    return int(np.all(rgb == want, axis=-1).sum())


def distinct_colours(png: Path) -> int:
    rgb = np.asarray(Image.open(png).convert("RGB")).reshape(-1, 3)
    return len(np.unique(rgb, axis=0))


def test_the_stream_chart_of_the_h200_run_draws_every_series(tmp_path: Path) -> None:
    png = render_chart(load(STREAM), tmp_path / "stream.png")
    image = Image.open(png)
    assert (image.format, image.size) == ("PNG", (1000, 500))
    assert distinct_colours(png) > 100  # lines, text and their antialiasing: not a blank canvas
    for name, colour in COLOURS.items():
        assert pixels_of(png, colour) > 300, f"{name} ({colour}) is not drawn"


def test_a_one_pass_stream_without_rapidocr_draws_only_pass_1(tmp_path: Path) -> None:
    results = load(STREAM)
    for row in results["per_image"]:
        row["ours_ms"] = row["ours_ms"][:1]
        row["rapidocr_ms"] = None
    png = render_chart(results, tmp_path / "one.png")
    assert pixels_of(png, COLOURS["ours pass 1"]) > 300
    assert pixels_of(png, COLOURS["ours pass 2"]) == 0
    assert pixels_of(png, COLOURS["RapidOCR 1.4.4"]) == 0


def test_the_agent_chart_of_the_h200_run_draws_every_run(tmp_path: Path) -> None:
    results = load(AGENT)
    png = render_chart(results, tmp_path / "agent.png", size_px=(800, 400), dpi=80)
    assert Image.open(png).size == (800, 400)
    assert distinct_colours(png) > 100
    for k, run in enumerate(results["runs"]):
        assert pixels_of(png, RUN_COLOURS[k]) > 100, f"{run['name']} ({RUN_COLOURS[k]}) is not drawn"


def test_the_kind_comes_from_the_keys() -> None:
    assert (chart_kind(load(STREAM)), chart_kind(load(AGENT))) == ("stream", "agent")
    plans = load(ROOT / "benchmarks" / "2026-12-01-h200-plans-7.json")
    with pytest.raises(ChartError, match="no chart for it"):
        chart_kind(plans)


def without(results: dict[str, Any], *path: str | int) -> dict[str, Any]:
    """A deep copy of results with the key at path (keys and list indices) removed."""
    broken = copy.deepcopy(results)
    node: Any = broken
    for step in path[:-1]:
        node = node[step]
    del node[path[-1]]
    return broken


@pytest.mark.parametrize(("source", "path", "message"), [
    (STREAM, ("per_image", 3, "ours_ms"), r"per_image\[3\] has no 'ours_ms'"),
    (STREAM, ("machine", "device"), r"machine has no 'device'"),
    (STREAM, ("date",), r"stream JSON has no 'date'"),
    (AGENT, ("runs", 1, "levels", 2, "p99_ms"), r"runs\[1\]\.levels\[2\] has no 'p99_ms'"),
    (AGENT, ("machine",), r"agent JSON has no 'machine'"),
    (AGENT, ("runs",), r"no runs and clients"),
])
def test_a_json_without_a_needed_key_is_refused_naming_it(source: Path, path: tuple[str | int, ...], message: str,
                                                          tmp_path: Path) -> None:
    with pytest.raises(ChartError, match=message):
        render_chart(without(load(source), *path), tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()


def test_benchmarks_md_embeds_every_committed_chart_and_only_existing_ones() -> None:
    import re

    text = (ROOT / "BENCHMARKS.md").read_text()
    embedded = set(re.findall(r"!\[[^\]]*\]\((benchmarks/charts/[^)]+\.png)\)", text))
    committed = {f"benchmarks/charts/{p.name}" for p in (ROOT / "benchmarks" / "charts").glob("*.png")}
    assert embedded == committed, f"embedded only: {embedded - committed}; committed only: {committed - embedded}"
    for chart in committed:  # each drawn from the committed JSON of the same name
        assert (ROOT / "benchmarks" / f"{Path(chart).stem}.json").is_file(), chart
