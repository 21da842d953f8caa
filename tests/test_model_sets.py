"""Choosing models: a set by name, a folder by its modelset.toml or a known set's file names, the errors; and
`vkocr models list`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vkocr.agent.cli.main import main
from vkocr.agent.errors import ModelSetError
from vkocr.agent.ocr.model_files import MODEL_SETS, PPOCRV4, PPOCRV6_SMALL, models_dir
from vkocr.agent.ocr.model_sets import choose_models
from vkocr.agent.serving.config import load_config


def test_names_give_the_set_its_files_and_its_procedure(tmp_path: Path) -> None:
    v6 = choose_models("ppocrv6-small", tmp_path)
    assert v6.procedure == "rapidocr-3.10" and v6.known is PPOCRV6_SMALL
    assert v6.paths == {m.role: tmp_path / m.filename for m in PPOCRV6_SMALL.files}
    default = choose_models()  # the more accurate set (BENCHMARKS.md), with RapidOCR 3.10's procedure
    assert default.known is PPOCRV6_SMALL and default.procedure == "rapidocr-3.10"
    assert default.paths["rec"] == models_dir() / PPOCRV6_SMALL.file("rec").filename
    assert v6.ocr_options({"text_score": 0.7}).procedure == "rapidocr-3.10"
    v4 = choose_models("ppocrv4")  # one flag away
    assert v4.known is PPOCRV4 and v4.procedure == "rapidocr-1.4.4"


def test_a_folder_with_every_set_is_the_default_set_and_an_agent_serves_that(tmp_path: Path) -> None:
    for model_set in MODEL_SETS.values():
        for m in model_set.files:
            (tmp_path / m.filename).write_bytes(b"onnx")
    assert choose_models(None, tmp_path).known is PPOCRV6_SMALL
    config = load_config(None, env={}, overrides={"models.dir": str(tmp_path)})
    assert config.chosen_models().known is PPOCRV6_SMALL and config.served_options().procedure == "rapidocr-3.10"
    pinned = load_config(None, env={}, overrides={"models.dir": str(tmp_path), "models.set": "ppocrv4"})
    assert pinned.chosen_models().known is PPOCRV4 and pinned.served_options().procedure == "rapidocr-1.4.4"


@pytest.mark.parametrize("model_set", list(MODEL_SETS.values()), ids=list(MODEL_SETS))
def test_a_folder_of_a_known_sets_files_is_that_set(tmp_path: Path, model_set: object) -> None:
    for m in model_set.files:  # type: ignore[attr-defined]
        (tmp_path / m.filename).write_bytes(b"onnx")
    assert choose_models(str(tmp_path)).known is model_set


def test_a_modelset_toml_names_files_procedure_and_options(tmp_path: Path) -> None:
    (tmp_path / "modelset.toml").write_text('procedure = "rapidocr-3.10"\n[files]\ndet = "a.onnx"\ncls = "b.onnx"\n'
                                            'rec = "c.onnx"\n[options]\nunclip_ratio = 2.0\n')
    chosen = choose_models(str(tmp_path))
    assert chosen.name == tmp_path.name and chosen.paths["cls"] == tmp_path / "b.onnx"
    assert chosen.ocr_options().unclip_ratio == 2.0 and chosen.procedure == "rapidocr-3.10"
    assert chosen.missing() == [tmp_path / "a.onnx", tmp_path / "b.onnx", tmp_path / "c.onnx"]
    assert chosen.with_files({"det": Path("x.onnx")}).procedure == "rapidocr-3.10"


@pytest.mark.parametrize(("toml", "message"), [
    ('procedure = "rapidocr-2"\n[files]\ndet = "a"\ncls = "b"\nrec = "c"\n', "procedure must be one of"),
    ('procedure = "rapidocr-3.10"\n[files]\ndet = "a"\ncls = "b"\n', "must name det, cls and rec"),
    ('procedure = "rapidocr-3.10"\n[files]\ndet = "../a"\ncls = "b"\nrec = "c"\n', "lies outside the folder"),
    ('procedure = "rapidocr-3.10"\nmodel = 1\n[files]\ndet = "a"\ncls = "b"\nrec = "c"\n', "unknown key(s) model"),
    ('procedure = "rapidocr-3.10"\n[files]\ndet = "a"\ncls = "b"\nrec = "c"\n[options]\nthresh = 7\n',
     "thresh must be within"),
    ("procedure = ", "cannot read it"),
])
def test_a_bad_modelset_toml_is_refused_naming_the_problem(tmp_path: Path, toml: str, message: str) -> None:
    (tmp_path / "modelset.toml").write_text(toml)
    with pytest.raises(ModelSetError, match=message.replace("(", r"\(").replace(")", r"\)")):
        choose_models(str(tmp_path))


def test_a_folder_that_says_nothing_or_an_unknown_name_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ModelSetError, match="no modelset.toml and no known set's files"):
        choose_models(str(tmp_path))
    with pytest.raises(ModelSetError, match="neither a model set"):
        choose_models("ppocrv5")


def test_models_list_shows_each_set_and_the_default(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / PPOCRV6_SMALL.file("det").filename).write_bytes(b"not the model")
    assert main(["models", "list", "--dir", str(tmp_path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    sets = {s["name"]: s for s in report["sets"]}
    assert list(sets) == list(MODEL_SETS) and sets["ppocrv6-small"]["default"] and not sets["ppocrv4"]["default"]
    assert not any(s["installed"] for s in sets.values())
    assert [f["state"] for f in sets["ppocrv6-small"]["files"]] == ["sha256 differs", "missing", "missing"]
    assert sets["ppocrv6-small"]["procedure"] == "rapidocr-3.10"
    assert main(["models", "list", "--dir", str(tmp_path)]) == 0
    assert "ppocrv6-small (default): not installed" in capsys.readouterr().out
