"""`vkocr bench startup` with the smallest settings: two real `vkocr serve` processes (empty pipeline cache,
then the one the first left), recognition only, no warm-up. Checks the report's shape, never its speed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.agent.agents import FONT, word_png
from vkocr.agent.cli.bench_startup import format_startup_results, run_startup_bench
from vkocr.agent.cli.errors import StartupBenchError
from vkocr.agent.cli.main import build_parser, main

pytestmark = pytest.mark.skipif(not os.path.exists(FONT),
                                reason="fonts-dejavu-core (installed by ./test.sh) renders the test images")


def test_bench_startup_json_shape(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    image = tmp_path / "word.png"
    image.write_bytes(word_png("LOT0042"))
    config = tmp_path / "agent.toml"  # recognition only: the cheapest first answer on lavapipe
    config.write_text("[models]\nset = \"ppocrv4\"\n[ocr]\nuse_det = false\nuse_cls = false\nrec_batch = 1\n")
    cache = tmp_path / "cache"
    assert main(["bench", "startup", str(image), "--config", str(config), "--cache-dir", str(cache),
                 "--warm-shapes", "", "--device", "llvmpipe", "--json"]) == 0
    out, err = capsys.readouterr()
    r = json.loads(out)
    assert (r["image"], r["config"], r["warm_shapes"], r["cache_dir"]) == (str(image), str(config), "", str(cache))
    cold, cached = r["runs"]
    assert (cold["name"], cached["name"]) == ("cold", "cached")
    for run in (cold, cached):
        assert 0 < run["listening_ms"] <= run["serving_ms"] <= run["first_answer_ms"]
        assert run["first_request_ms"] > 0 and run["second_request_ms"] > 0
        assert run["lines"] == 1 and run["device"] and run["exit_status"] == 0
        assert not [e for e in run["events"] if e["event"] == "plans_warmed"]  # warm_shapes = []
        assert any(e["event"] == "device_opened" for e in run["events"])
        # (and ori, the page orientation model, where it is fetched: loaded, no plans until a request asks)
        assert {"det", "cls", "rec"} <= set(run["plans"]) and run["plans"]["rec"]["plans"] > 0
    assert cold["cache_bytes_before"] == 0 < cold["cache_bytes_after"] == cached["cache_bytes_before"]
    assert "bench startup: cold: starting `vkocr serve`" in err
    table = format_startup_results(r).splitlines()
    assert table[0] == f"image {image}  warm_shapes [] (no warm-up)"
    assert [line.split(":")[0].strip() for line in table[1:]] == ["cold", "cached"]


def test_the_cold_run_needs_an_empty_cache_folder(tmp_path: Path) -> None:
    image = tmp_path / "word.png"
    image.write_bytes(word_png("LOT0042"))
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "pipelines-x.bin").write_bytes(b"old")
    with pytest.raises(StartupBenchError, match="not empty"):
        run_startup_bench(image, cache_dir=tmp_path / "cache", progress=False)
    with pytest.raises(StartupBenchError, match="no image file"):
        run_startup_bench(tmp_path / "missing.png", progress=False)


def test_bench_startup_options() -> None:
    args = build_parser("bench").parse_args(["bench", "startup", "a.png", "--cache-dir", "c", "--warm-shapes",
                                             "640x480", "--timeout", "30", "--device", "1", "--json"])
    assert (str(args.image), str(args.cache_dir), args.warm_shapes, args.timeout, args.device, args.json) == (
        "a.png", "c", "640x480", 30.0, "1", True)
    defaults = build_parser("bench").parse_args(["bench", "startup", "a.png"])
    assert (defaults.cache_dir, defaults.config, defaults.warm_shapes, defaults.timeout) == (None, None, None, 600.0)
