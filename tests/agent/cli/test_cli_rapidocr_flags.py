"""RapidOCR 1.4.4's command-line options on `vkocr ocr`: every one of its options is either here under its
kebab-case name (with RapidOCR's default, setting the OcrOptions field it means) or named below with the reason
it is not; values are checked against OcrOptions' ranges while parsing; a client offers only what a request
carries."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from vkocr.agent.cli.main import build_parser, main
from vkocr.agent.cli.ocr_flags import TUNING_FLAGS, option_overrides
from vkocr.agent.errors import OptionsError
from vkocr.agent.ocr.options import CHOICES, NO_LETTERBOX, RANGES, WIDTH_HEIGHT_RATIO, OcrOptions
from vkocr.agent.serving.wire import options_to_proto

# RapidOCR's option → the OcrOptions field it sets here
RAPIDOCR_FIELDS = {
    "text_score": "text_score", "min_height": "min_height", "width_height_ratio": "width_height_ratio",
    "max_side_len": "max_side_len", "min_side_len": "min_side_len", "det_limit_side_len": "limit_side_len",
    "det_limit_type": "limit_type", "det_thresh": "thresh", "det_box_thresh": "box_thresh",
    "det_unclip_ratio": "unclip_ratio", "det_score_mode": "score_mode", "cls_thresh": "cls_thresh",
    "rec_batch_num": "rec_batch",
}
# RapidOCR's switches → the OcrOptions field they turn off (or, return_word_box, on)
RAPIDOCR_SWITCHES = {"no_det": ("use_det", False), "no_cls": ("use_cls", False), "no_rec": ("use_rec", False),
                     "det_donot_use_dilation": ("use_dilation", False), "return_word_box": ("return_word_box", True)}
RAPIDOCR_FILES = {"det_model_path": "det_model", "cls_model_path": "cls_model", "rec_model_path": "rec_model",
                  "rec_keys_path": "rec_keys"}
NOT_CARRIED = {
    "img_path": "the INPUT arguments",
    "print_cost": "every result has timings_ms",
    "print_verbose": "--log-level",
    "intra_op_num_threads": "the CPU backend's threads are vkocr serve's [device] cpu_threads",
    "inter_op_num_threads": "onnxruntime runs one model at a time here",
    "det_use_cuda": "--device chooses the backend", "det_use_dml": "--device chooses the backend",
    "cls_use_cuda": "--device chooses the backend", "cls_use_dml": "--device chooses the backend",
    "rec_use_cuda": "--device chooses the backend", "rec_use_dml": "--device chooses the backend",
    "cls_image_shape": "type=list in RapidOCR: no value can be given on its command line",
    "rec_img_shape": "type=list in RapidOCR: no value can be given on its command line",
    "cls_label_list": "type=list in RapidOCR: no value can be given on its command line",
    "cls_batch_num": "the classifier takes every crop in as few submissions as it can: batches change nothing",
    "vis_res": "--vis OUT.png", "vis_font_path": "--vis draws with a font of its own",
    "vis_save_path": "--vis OUT.png",
}


def rapidocr_defaults(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """RapidOCR 1.4.4's own parser (the installed package), its defaults read by parsing a bare command line."""
    from rapidocr_onnxruntime.utils.parse_parameters import init_args

    monkeypatch.setattr(sys, "argv", ["rapidocr_onnxruntime", "-img", "x.png"])
    return vars(init_args())


def local(*argv: str) -> argparse.Namespace:
    return build_parser("ocr").parse_args(["ocr", *argv, "x.png"])


def subcommand(command: str, *path: str) -> argparse.ArgumentParser:
    parser = build_parser(command)
    for name in (command, *path):
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[name]
    return parser


def flags_of(command: str, *path: str) -> set[str]:
    return {option for action in subcommand(command, *path)._actions for option in action.option_strings}


def kebab(name: str) -> str:
    return "--" + name.replace("_", "-")


def edge_value(field: str) -> Any:
    """A value the field takes that is not its default: its last choice, its highest value, or no letterbox."""
    if field in CHOICES:
        return CHOICES[field][-1]
    return NO_LETTERBOX if field == "width_height_ratio" else RANGES[field].high


def refused_value(field: str) -> str:
    if field in CHOICES:
        return "sideways"
    return str((WIDTH_HEIGHT_RATIO if field == "width_height_ratio" else RANGES[field]).high * 2 + 1)


def test_every_rapidocr_option_is_here_or_said_why_not(monkeypatch: pytest.MonkeyPatch) -> None:
    theirs = set(rapidocr_defaults(monkeypatch))
    ours = {*RAPIDOCR_FIELDS, *RAPIDOCR_SWITCHES, *RAPIDOCR_FILES}
    assert theirs == ours | set(NOT_CARRIED)
    flags = flags_of("ocr")
    assert sorted(name for name in ours if kebab(name) not in flags) == []


def test_rapidocr_defaults_are_ours(monkeypatch: pytest.MonkeyPatch) -> None:
    theirs = rapidocr_defaults(monkeypatch)
    defaults = OcrOptions()
    assert {name: getattr(defaults, field) for name, field in RAPIDOCR_FIELDS.items()} == {
        name: theirs[name] for name in RAPIDOCR_FIELDS}


@pytest.mark.parametrize("name, field", RAPIDOCR_FIELDS.items())
def test_each_value_flag_sets_its_field(name: str, field: str) -> None:
    value = edge_value(field)
    overrides = option_overrides(local(kebab(name), str(value)))
    assert overrides == {field: value}
    assert getattr(OcrOptions().replace(**overrides), field) == value


@pytest.mark.parametrize("name, setting", RAPIDOCR_SWITCHES.items())
def test_each_switch_sets_its_field(name: str, setting: tuple[str, bool]) -> None:
    assert option_overrides(local(kebab(name))) == dict([setting])


@pytest.mark.parametrize("flag", TUNING_FLAGS, ids=lambda f: f.names[0])
def test_a_value_out_of_range_is_refused_with_the_flag_named(flag: Any, capsys: pytest.CaptureFixture[str]
                                                             ) -> None:
    with pytest.raises(SystemExit) as stopped:
        local(flag.names[0], refused_value(flag.field))
    err = capsys.readouterr().err
    assert stopped.value.code == 2
    assert f"argument {'/'.join(flag.names)}: {flag.field} must be" in err, err


def test_not_a_number_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    for argv, said in ((["--rec-batch-num", "1.5"], "'1.5' is not an integer"),
                       (["--det-thresh", "nan"], "thresh must be within [0, 1], got nan"),
                       (["--det-thresh", "high"], "'high' is not a number")):
        with pytest.raises(SystemExit):
            local(*argv)
        assert said in capsys.readouterr().err


def test_help_shows_each_range_and_default() -> None:
    helps = {a.option_strings[0]: a.help for a in subcommand("ocr")._actions if a.option_strings}
    assert helps["--det-thresh"] == "detection map probability that counts as text; [0, 1] (default 0.3)"
    assert "(0, 10] (default 1.6)" in str(helps["--unclip-ratio"])
    assert "(0, 1000], or -1: never (default 8.0)" in str(helps["--width-height-ratio"])
    assert "[1, 256] (default 6)" in str(helps["--rec-batch-num"])
    remote = {a.option_strings[0]: a.help for a in subcommand("client", "ocr")._actions if a.option_strings}
    assert str(remote["--det-thresh"]).endswith("[0, 1] (default the agent's)")


def test_a_client_offers_exactly_the_options_a_request_carries() -> None:
    remote = flags_of("client", "ocr")
    for flag in TUNING_FLAGS:
        default = getattr(OcrOptions(), flag.field)
        if flag.remote:
            assert set(flag.names) <= remote
            options_to_proto(**{flag.field: default})  # the wire has the field
        else:
            assert not set(flag.names) & remote, flag.names
            with pytest.raises(OptionsError, match="cannot be set per request"):
                options_to_proto(**{flag.field: default})


def test_the_flags_reach_the_pipeline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.text_pages import text_page

    page = tmp_path / "lot.png"
    text_page("LOT0042", width=200).crop((0, 20, 200, 90)).save(page)
    rec_only = [str(page), "--no-det", "--no-cls", "--device", "cpu", "--json"]
    assert main(["ocr", *rec_only]) == 0
    assert [line["text"] for line in json.loads(capsys.readouterr().out)["lines"]] == ["LOT0042"]
    assert main(["ocr", *rec_only, "--text-score", "1"]) == 0  # no line scores a full 1: all dropped
    assert json.loads(capsys.readouterr().out)["lines"] == []


def test_a_rec_batch_larger_than_the_backend_takes_is_refused(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ocr", str(tmp_path / "never-read.png"), "--device", "cpu", "--rec-batch-num", "100"]) == 2
    assert ("vkocr: error: --rec-batch-num 100: at most 64 lines go in one batch on cpu (onnxruntime"
            in capsys.readouterr().err)
