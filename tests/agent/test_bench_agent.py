"""`vkocr bench agent` with the smallest settings: a real in-process agent per configuration, one rendered
word, recognition only, one client level of two calls. Checks the report's shape, never its speed."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pytest

from tests.agent.agents import FONT, word_png
from vkocr.agent.cli.bench_agent import RUNS, format_agent_results, parse_clients
from vkocr.agent.cli.main import main

pytestmark = pytest.mark.skipif(not os.path.exists(FONT),
                                reason="fonts-dejavu-core (installed by ./test.sh) renders the test images")


def test_bench_agent_json_shape(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    image = tmp_path / "word.png"
    image.write_bytes(word_png("LOT0042"))
    assert main(["bench", "agent", str(image), "--clients", "1", "--requests", "2", "--no-det", "--no-cls",
                 "--device", "llvmpipe", "--json"]) == 0
    out, err = capsys.readouterr()
    r = json.loads(out)

    assert {"cpu", "cores", "device", "backend"} <= set(r["machine"])
    assert r["machine"]["cores"] >= 1 and r["machine"]["device"] and r["machine"]["backend"] == "vulkan"
    assert r["images"] == [{"image": "word.png", "size": "143x40", "bytes": image.stat().st_size, "lines": 1}]
    assert r["request_options"] == {"use_det": False, "use_cls": False}
    assert (r["clients"], r["requests_per_level"]) == ([1], 2)
    assert [(run["name"], run["overlap"]) for run in r["runs"]] == [(run.name, run.overlap) for run in RUNS]
    assert [run["plugins"] for run in r["runs"]] == [[], ["regex_fields", "merge_lines"],
                                                     ["regex_fields", "merge_lines"]]
    for run in r["runs"]:
        (level,) = run["levels"]
        assert (level["clients"], level["requests"], level["ok"], level["errors"]) == (1, 2, 2, {})
        assert level["wall_s"] > 0 and level["images_per_s"] > 0
        assert 0 < level["p50_ms"] <= level["p99_ms"]
        assert {"decode", "rec", "queue", "plugins", "total"} <= set(level["server_median_ms"])
        if run["plugins"]:
            assert {"plugin.regex_fields", "plugin.merge_lines"} <= set(level["server_median_ms"])
    (gain,) = r["overlap"]
    assert gain["clients"] == 1 and gain["throughput_ratio"] > 0
    assert gain["on_images_per_s"] == r["runs"][1]["levels"][0]["images_per_s"]
    assert gain["off_images_per_s"] == r["runs"][2]["levels"][0]["images_per_s"]
    assert "bench agent: default: warm-up 1/1 word.png" in err  # progress goes to stderr

    table = format_agent_results(r).splitlines()
    assert table[0].startswith(f"machine: {r['machine']['cpu']} (")
    assert [line.split("  ")[0] for line in table[3:6]] == [run.name for run in RUNS]
    assert table[-1].startswith("    1 clients: ") and table[-1].endswith("x")


def test_client_counts() -> None:
    assert parse_clients("1,4,16") == (1, 4, 16)
    for bad in ("", "0,4", "one"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_clients(bad)
