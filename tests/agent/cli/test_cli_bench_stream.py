"""`vkocr bench stream`'s command line: its options and defaults, and the usage errors it gives before any
device is opened (bad ranges, missing files, no images at all)."""

from __future__ import annotations

import pytest

from vkocr.agent.cli.main import build_parser, main


@pytest.mark.parametrize("argv", [["--passes", "0"], ["--passes", "11"], ["--passes", "two"], ["--rendered", "-1"],
                                  ["--rendered", "0"], ["/no/such/image.png"]])
def test_bad_ranges_and_no_images_are_usage_errors(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["bench", "stream", *argv])
    assert exc.value.code == 2
    assert "vkocr bench stream: error:" in capsys.readouterr().err


def test_files_folders_and_options() -> None:
    args = build_parser("bench").parse_args(["bench", "stream", "a.png", "dir", "--rendered", "3", "--passes", "10",
                                             "--no-rapidocr", "--json", "out.json", "--device", "1"])
    assert (args.images, args.rendered, args.passes, args.no_rapidocr, str(args.json), args.device) == (
        ["a.png", "dir"], 3, 10, True, "out.json", "1")
    defaults = build_parser("bench").parse_args(["bench", "stream"])
    assert (defaults.images, defaults.rendered, defaults.passes, defaults.no_rapidocr, defaults.json) == (
        [], 24, 2, False, None)


def test_the_help_says_what_the_passes_mean(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["bench", "stream", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "Pass 1 meets every image's shapes for the first time" in text and "Pass 2" in text
