"""`vkocr bench agent` with the smallest settings: real in-process agents, rendered words, recognition only, the
clients in their own process. Checks the report's shape and that every answer is checked against its own
image's texts, never the speed."""

from __future__ import annotations

import argparse
import json
import os
import pickle
from pathlib import Path

import pytest

from tests.agent.agents import FONT, lot_number, running_agent, word_pixels, word_png
from vkocr.agent.cli.bench_agent import (
    MISMATCH,
    RUNS,
    UNANSWERED,
    BenchImage,
    measure_level,
    parse_clients,
    parse_modes,
    request_for,
    warm_up,
)
from vkocr.agent.cli.bench_agent_report import format_agent_results
from vkocr.agent.cli.main import main
from vkocr.agent.serving.wire import options_to_proto

pytestmark = pytest.mark.skipif(not os.path.exists(FONT),
                                reason="fonts-dejavu-core (installed by ./test.sh) renders the test images")


def test_bench_agent_json_shape(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    image = tmp_path / "word.png"
    image.write_bytes(word_png("LOT0042"))
    assert main(["bench", "agent", str(image), "--rendered", "0", "--clients", "1", "--no-det", "--no-cls",
                 "--device", "llvmpipe", "--modes", "unary", "--reference", "--json"]) == 0
    out, err = capsys.readouterr()
    r = json.loads(out)

    assert {"cpu", "cores", "device", "backend"} <= set(r["machine"])
    assert r["machine"]["cores"] >= 1 and r["machine"]["device"] and r["machine"]["backend"] == "vulkan"
    assert r["images"] == 1
    assert r["image_list"] == [{"image": "word.png", "size": "143x40", "bytes": image.stat().st_size, "lines": 1}]
    assert r["request_options"] == {"use_det": False, "use_cls": False}
    assert (r["clients"], r["modes"]) == ([1], ["unary"])
    assert [(run["run"], run["mode"]) for run in r["runs"]] == [(run.name, "unary") for run in RUNS]
    assert [run["plugins"] for run in r["runs"]] == [[]] * 4 + [["regex_fields", "merge_lines"]]
    assert [(run["server"]["overlap"], run["server"]["batch_requests"]) for run in r["runs"]] == [
        (True, 8), (True, 1), (False, 8), (True, 8), (True, 8)]
    assert r["sent_as"] == "encoded files (PNG for the rendered)"
    for run in r["runs"]:
        (level,) = run["levels"]
        assert (level["clients"], level["mode"], level["requests"], level["ok"], level["errors"]) == (
            1, run["mode"], 1, 1, {})
        assert level["wall_s"] > 0 and level["images_per_s"] > 0
        assert 0 < level["p50_ms"] <= level["p99_ms"]
        assert 0 < level["gpu_busy_fraction"] <= 1.0, "lavapipe's queue has timestamps: the GPU was busy"
        assert level["agent_cpu_cores"] > 0
        assert level["reads"] >= 1 and level["requests_per_read"] == 1.0 and level["lines_per_read"] == 1.0
        assert {"decode", "batch_wait", "rec", "queue", "plugins", "total"} <= set(level["server_median_ms"])
        if run["plugins"]:
            assert {"plugin.regex_fields", "plugin.merge_lines"} <= set(level["server_median_ms"])
    assert r["levels"] == r["runs"][0]["levels"] and r["gpu_busy_fraction"] == r["levels"][0]["gpu_busy_fraction"]
    for gain in ("batching", "overlap", "decode_processes"):
        assert [(g["mode"], g["clients"]) for g in r[gain]] == [("unary", 1)]
        assert all(g["throughput_ratio"] > 0 for g in r[gain])
    assert "bench agent: default: warm-up 1/1 word.png" in err  # progress goes to stderr
    reference = r["reference"]
    assert reference["label"] == "RapidOCR 3.10.0" and reference["images_per_s"] > 0 and reference["median_ms"] > 0
    for run in r["runs"]:
        level = run["levels"][0]
        assert level["ratio_to_reference"] == pytest.approx(level["images_per_s"] / reference["images_per_s"])

    table = format_agent_results(r).splitlines()
    assert table[0].startswith(f"machine: {r['machine']['cpu']} (")
    assert [line.split("  ")[0] for line in table[3:8]] == [row["name"] for row in r["runs"]]
    assert table[-1].startswith("  unary    1 clients: ") and table[-1].endswith("x")
    assert any(line.startswith("RapidOCR 3.10.0, one process, one image at a time: ") for line in table)


def test_every_answer_is_checked_against_its_own_image(tmp_path: Path) -> None:
    """Four clients, four distinct words, both modes: every answer is its image's; told other texts, the same
    answers count as WRONG_TEXTS, not as answered; a request that got nothing back counts as NO_ANSWER."""
    words = [lot_number(i) for i in (3, 17, 42, 96)]
    images = [BenchImage(f"{w}.png", word_png(w), 0, 0) for w in words]
    options = options_to_proto(use_det=False, use_cls=False)
    requests = tmp_path / "requests.pickle"
    requests.write_bytes(pickle.dumps([request_for(image, str(k), options).SerializeToString()
                                       for k, image in enumerate(images)]))
    with running_agent() as agent:
        expected = warm_up(agent, images, options, "test", progress=False)
        assert expected == [[w] for w in words]
        for mode in ("unary", "stream"):
            level = measure_level(agent, requests, expected, 4, mode)
            assert (level["ok"], level["errors"]) == (4, {}), f"{mode}: {level}"
            shifted = measure_level(agent, requests, expected[1:] + expected[:1], 4, mode)
            assert (shifted["ok"], shifted["errors"]) == (0, {MISMATCH: 4}), f"{mode}: {shifted}"
            # three passes: every image once per pass, each answer checked against its own image
            passes = measure_level(agent, requests, expected, 3, mode, passes=3)
            assert (passes["requests"], passes["ok"], passes["errors"]) == (12, 12, {}), f"{mode}: {passes}"
            shifted = measure_level(agent, requests, expected[1:] + expected[:1], 3, mode, passes=2)
            assert (shifted["ok"], shifted["errors"]) == (0, {MISMATCH: 8}), f"{mode}: {shifted}"
        # a fifth image expected but never sent (the requests file holds four): one request without an answer
        missing = measure_level(agent, requests, [*expected, ["LOT0500"]], 4, "unary")
        assert (missing["ok"], missing["errors"]) == (4, {UNANSWERED: 1}), missing
        # the same images as decoded pixels (--raw), as a camera sends its frames: the same answers
        raw = tmp_path / "raw.pickle"
        raw.write_bytes(pickle.dumps([request_for(BenchImage(i.name, i.data, *pixels.shape[1::-1], pixels.tobytes()),
                                                  str(k), options).SerializeToString()
                                      for k, (i, pixels) in enumerate(zip(images, map(word_pixels, words)))]))
        level = measure_level(agent, raw, expected, 4, "unary")
        assert (level["ok"], level["errors"]) == (4, {}), level


def test_client_counts_and_modes() -> None:
    assert parse_clients("1,4,16,64") == (1, 4, 16, 64)
    assert parse_modes("stream") == ("stream",) and parse_modes("unary, stream") == ("unary", "stream")
    for bad in ("", "0,4", "one", "2000"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_clients(bad)
    for bad in ("", "both", "unary,unary"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_modes(bad)


def test_more_clients_than_images_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    image = tmp_path / "word.png"
    image.write_bytes(word_png("LOT0042"))
    with pytest.raises(SystemExit) as stopped:
        main(["bench", "agent", str(image), "--rendered", "0", "--clients", "1,4"])
    assert stopped.value.code == 2
    assert "4 clients need at least 4 distinct images" in capsys.readouterr().err
