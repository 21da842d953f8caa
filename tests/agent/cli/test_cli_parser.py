"""The command line's structure: each command's parser built on its own, the OCR flags defined once."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from vkocr.agent.cli.main import REGISTRARS, SUMMARY, build_parser, command_of


def subparser(parser: argparse.ArgumentParser, *path: str) -> argparse.ArgumentParser:
    for name in path:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[name]
    return parser


def flags(parser: argparse.ArgumentParser) -> set[str]:
    return {option for action in parser._actions for option in action.option_strings}


OCR_FLAGS = {"--no-det", "--no-cls", "--no-rec", "--text-score", "--box-thresh", "--unclip-ratio", "--no-exif",
             "--word-boxes", "--plugin", "--no-plugins", "--json"}


def test_local_and_remote_ocr_take_the_same_ocr_flags() -> None:
    local = flags(subparser(build_parser("ocr"), "ocr"))
    remote = flags(subparser(build_parser("client"), "client", "ocr"))
    stream = flags(subparser(build_parser("client"), "client", "stream"))
    assert OCR_FLAGS <= local and OCR_FLAGS <= remote and OCR_FLAGS <= stream
    # local only: drawing, the device and its precision, models, inputs and the options a request does not carry
    from vkocr.agent.cli.ocr_flags import TUNING_FLAGS

    local_only = {name for flag in TUNING_FLAGS if not flag.remote for name in flag.names}
    models = {f"--{role}-model{path}" for role in ("det", "cls", "rec") for path in ("", "-path")}
    assert local - remote == {"--vis", "--vis-scores", "--device", "--precision", "--progress", "--rec-keys",
                              "--rec-keys-path", "--models", *models, *local_only}


def test_the_flags_mean_the_same_options_locally_and_remotely() -> None:
    argv = ["--no-cls", "--text-score", "0.7", "--word-boxes", "--plugin", "merge_lines", "a.png"]
    from vkocr.agent.cli.ocr_flags import option_overrides

    local = option_overrides(build_parser("ocr").parse_args(["ocr", *argv]))
    remote = option_overrides(build_parser("client").parse_args(["client", "ocr", "--target", "h:1", *argv]))
    assert local == remote == {"use_cls": False, "text_score": 0.7, "return_word_box": True,
                               "plugins": ("merge_lines",)}


@pytest.mark.parametrize("argv, command", [
    (["ocr", "x.png"], "ocr"), (["--log-level", "debug", "serve"], "serve"), (["--log-json", "bench", "kernels"],
                                                                                "bench"),
    ([], None), (["--log-level", "info"], None), (["nonsense"], None),
])
def test_the_command_is_found_past_the_top_level_options(argv: list[str], command: str | None) -> None:
    assert command_of(argv) == command


def test_every_command_has_a_registrar_and_a_summary() -> None:
    registered = [name for names, _, _ in REGISTRARS for name in names]
    assert sorted(registered) == sorted(SUMMARY)
    for name in registered:  # each registrar builds its command for real; the others stay one-line entries
        parser = build_parser(name)
        assert len(subparser(parser, name)._actions) > 1  # more than --help
        others = [n for n in registered if n != name and n not in ("infer", "inspect", "debug")]
        assert all(len(subparser(parser, n)._actions) == 1 for n in others)


def test_a_local_ocr_parser_loads_nothing_of_serving_or_bundles() -> None:
    code = ("import sys; from vkocr.agent.cli.main import build_parser; build_parser('ocr'); "
            "print(sorted(m for m in sys.modules if m.startswith(('vkocr.agent.serving', 'vkocr.agent.bundles', "
            "'vkocr.agent.fleet', 'grpc'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]"
