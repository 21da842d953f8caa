"""`vkocr bundle keygen|create|sign|verify|inspect` through vkocr.agent.cli.main.main, with exit codes and messages."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from vkocr.agent.cli.main import main
from vkocr.agent.ocr.model_files import DEFAULT_SET, missing_or_bad


def run(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_keygen_create_sign_verify_inspect(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                          models: dict[str, Path], selftest_image: Path) -> None:
    key = tmp_path / "keys" / "release.key"
    code, out, _ = run(capsys, "bundle", "keygen", key)
    assert code == 0 and "fingerprint: " in out
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and key.with_suffix(".pub").is_file()
    code, _, err = run(capsys, "bundle", "keygen", key)
    assert code == 1 and err.strip().startswith("error: ") and "already exists" in err and len(err.splitlines()) == 1

    out_path = tmp_path / "ocr-2.1.vkb"
    code, out, err = run(capsys, "bundle", "create", "--det", models["det"], "--cls", models["cls"],
                         "--rec", models["rec"], "--name", "labels", "--version", "2.1",
                         "--option", "box_thresh=0.6", "--option", "use_dilation=false",
                         "--self-test", f"{selftest_image}=LOT 42", "-o", out_path)
    assert code == 0, err
    assert "labels 2.1, 4 files" in out and "unsigned" in out

    code, _, err = run(capsys, "bundle", "verify", out_path, "--trusted", key.with_suffix(".pub"))
    assert code == 1 and "error: " in err and "is not signed" in err

    code, out, err = run(capsys, "bundle", "sign", out_path, "--key", key)
    assert code == 0, err
    code, out, err = run(capsys, "bundle", "verify", out_path, "--trusted", tmp_path / "keys")
    assert code == 0, err
    assert "ok: labels 2.1" in out and "4 files match the manifest" in out

    code, out, _ = run(capsys, "bundle", "inspect", out_path, "--json")
    report = json.loads(out)
    assert code == 0 and report["version"] == "2.1" and report["signed"] is True
    assert report["postprocess"] == {"box_thresh": 0.6, "procedure": "rapidocr-1.4.4", "use_dilation": False}
    assert report["self_tests"] == [{"image": "selftest/label.png", "expect": "LOT 42"}]
    code, out, _ = run(capsys, "bundle", "inspect", out_path)
    assert code == 0 and "selftest/label.png must read 'LOT 42'" in out and "version:  2.1" in out


def test_verify_with_another_key_fails(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                       models: dict[str, Path]) -> None:
    run(capsys, "bundle", "keygen", tmp_path / "a.key")
    run(capsys, "bundle", "keygen", tmp_path / "b.key")
    out_path = tmp_path / "x.vkb"
    code, _, err = run(capsys, "bundle", "create", "--det", models["det"], "--cls", models["cls"], "--rec",
                       models["rec"], "--name", "x", "--version", "1", "--key", tmp_path / "a.key", "-o", out_path)
    assert code == 0, err
    code, _, err = run(capsys, "bundle", "verify", out_path, "--trusted", tmp_path / "b.pub")
    assert code == 1 and "which is not trusted" in err


@pytest.mark.parametrize("extra, reason", [
    (["--option", "box_tresh=0.6"], "unknown option 'box_tresh'"),
    (["--option", "rec_batch=many"], "cannot read 'many' as int"),
    (["--self-test", "nowhere.png=TEXT"], "nowhere.png does not exist"),
    (["--version", "../1"], "version '../1' must be"),
])
def test_create_refusals_are_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                      models: dict[str, Path], extra: list[str], reason: str) -> None:
    args: list[str | Path] = ["bundle", "create", "--det", models["det"], "--cls", models["cls"],
                              "--rec", models["rec"], "--name", "x", "--version", "1", "-o", tmp_path / "x.vkb"]
    code, _, err = run(capsys, *args, *extra)
    assert code == 1 and len(err.strip().splitlines()) == 1 and err.startswith("error: ")
    assert reason in err
    assert not (tmp_path / "x.vkb").exists()


def test_create_needs_all_three_models(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                       models: dict[str, Path]) -> None:
    code, _, err = run(capsys, "bundle", "create", "--det", models["det"], "--name", "x", "--version", "1",
                       "-o", tmp_path / "x.vkb")
    assert code == 1 and "give --cls --rec (or --models NAME|DIR)" in err


@pytest.mark.skipif(bool(missing_or_bad()), reason="the default models are not in models/ (scripts/fetch_models.py)")
def test_create_from_the_default_models(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "bundle", "create", "--default-models", "--name", "default", "--version", "1",
                       "-o", tmp_path / "d.vkb")
    assert code == 0, err
    report = json.loads(run(capsys, "bundle", "inspect", tmp_path / "d.vkb", "--json")[1])
    assert report["models"]["det"] == DEFAULT_SET.file("det").filename == "PP-OCRv6_det_small.onnx"
    assert report["total_size"] > 30_000_000


def test_bundle_help_names_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["bundle", "--help"])
    out = capsys.readouterr().out
    assert exited.value.code == 0
    for command in ("keygen", "create", "sign", "verify", "inspect"):
        assert command in out
