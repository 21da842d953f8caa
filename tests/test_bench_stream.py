"""`vkocr bench stream` on lavapipe: one small compat image and one rendered image, two passes. Timing is not
checked (lavapipe numbers are no speed claims); what is: the result's keys, pass 1 builds plans, pass 2 finds
the det plans of the same shapes cached, and the share of lines identical to RapidOCR is a fraction.

The det resize target is lowered to 128 (ours and RapidOCR alike): at RapidOCR's 736 one det on lavapipe takes
tens of seconds."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.paths import COMPAT_IMAGES

LAVAPIPE = "llvmpipe"
IMAGE = COMPAT_IMAGES / "text_rec.jpg"  # one line, 362×78
KEYS = {"date", "machine", "backend", "images", "distinct_shapes", "ours_pass1_median_ms", "ours_pass1_p99_ms",
        "ours_pass2_median_ms", "ours_pass2_p99_ms", "rapidocr_median_ms", "rapidocr_p99_ms", "ratio_pass1",
        "ratio_pass2", "new_shape_ms", "plan_memory_mib", "python_outside_waits_median_ms",
        "lines_identical_fraction", "passes", "per_image"}


@pytest.mark.slow  # about a minute and a half on lavapipe: five reads and RapidOCR
@pytest.mark.compat
def test_a_two_pass_stream_on_lavapipe() -> None:
    pytest.importorskip("rapidocr_onnxruntime")
    from vkocr.agent.cli.bench_stream import format_stream_results, run_stream_bench

    # warmed as the agent warms, on one size larger than the stream's: its plans' memory never grows after
    r = run_stream_bench(LAVAPIPE, [str(IMAGE)], rendered=1, passes=2, progress=False, det_limit_side_len=128,
                         warm_sizes=[(800, 800)])
    assert KEYS <= set(r)
    assert r["images"] == 2 and len(r["per_image"]) == 2 and len(r["passes"]) == 2
    assert r["backend"].startswith("vulkan") and "llvmpipe" in r["machine"]["device"]
    first, second = r["passes"]
    assert first["plans_built"]["det"] == 2  # two aspects, new to pass 1
    # the same shapes again: cached (the page orientation model, where fetched, is listed and unused)
    assert {"det", "cls", "rec"} <= set(second["plans_built"]) and not any(second["plans_built"].values())
    stages = second["python_stage_median_ms"]
    assert {"decode", "det", "db", "rec"} <= set(stages) and all(ms >= 0 for ms in stages.values())
    assert r["distinct_shapes"]["det"] == 4  # the warm size's, the warm-up image's and the stream's two
    assert r["warm_up"]["plans_recorded"] > 0
    assert r["new_shape_ms_summary"]["det"]["count"] == 2 and r["new_shape_ms"]["det"] > 0
    assert 0.0 <= r["lines_identical_fraction"] <= 1.0
    assert r["passes_agree"]
    assert r["ratio_pass2"] == pytest.approx(r["rapidocr_median_ms"] / r["ours_pass2_median_ms"])
    table = format_stream_results(r)
    assert "pass 2" in table and "by stage" in table


def test_folders_give_their_images_sorted(tmp_path: Path) -> None:
    from vkocr.agent.cli.bench_stream import stream_paths

    for name in ("b.png", "a.jpg", "c.txt", "d.npy", "e.WEBP", "f.bmp"):
        (tmp_path / name).write_bytes(b"")
    single = tmp_path / "a.jpg"
    assert stream_paths([str(tmp_path), str(single)]) == [str(tmp_path / n) for n in ("a.jpg", "b.png", "e.WEBP",
                                                                                        "f.bmp")] + [str(single)]
    with pytest.raises(FileNotFoundError):
        stream_paths([str(tmp_path / "missing.png")])


def test_lines_pair_by_box_overlap_and_count_equal_texts() -> None:
    from vkocr.agent.cli.bench_stream import identical_lines

    def box(x: float, y: float, w: float = 100, h: float = 20) -> list[list[float]]:
        return [[x, y], [x + w, y], [x + w, y + h], [x, y + h]]

    ours = [(box(0, 0), "LOT 7"), (box(0, 40), "Made in China"), (box(0, 80), "extra")]
    theirs = [(box(2, 41), "Made in China"), (box(1, 1), "LOT 1"), (box(300, 300), "elsewhere")]
    assert identical_lines(ours, theirs) == 1  # LOT 7 ≠ LOT 1; "extra" and "elsewhere" overlap nothing
    assert identical_lines([(box(0, 0), "A")], [(box(60, 0), "A")]) == 0  # IoU 0.25 < 0.5: not a pair
    assert identical_lines([], theirs) == 0
