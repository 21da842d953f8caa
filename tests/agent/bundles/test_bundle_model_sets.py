"""`vkocr bundle create --models NAME|DIR`: a bundle carries a model set's files and its procedure, and the store
serves it with that procedure (its installed options)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agent.bundles.conftest import KeyPair
from vkocr.agent.bundles.store import ModelStore
from vkocr.agent.cli.main import main
from vkocr.agent.ocr.model_files import PPOCRV6_SMALL, missing_or_bad, models_dir
from vkocr.agent.ocr.options import OcrOptions


def create(*argv: str | Path) -> int:
    return main(["bundle", "create", *map(str, argv)])


@pytest.mark.skipif(bool(missing_or_bad(models_dir(), PPOCRV6_SMALL.files)),
                    reason="ppocrv6-small is not installed: scripts/fetch_models.py")
def test_a_v6_bundle_is_served_with_rapidocr_310s_procedure(tmp_path: Path, key: KeyPair) -> None:
    bundle = tmp_path / "v6.vkb"
    assert create("--models", "ppocrv6-small", "--name", "ppocrv6-small", "--version", "3.10.0",
                  "--option", "box_thresh=0.6", "--key", key.private_path, "-o", bundle) == 0
    store = ModelStore(tmp_path / "store", key.trusted, keep=3)
    store.add(bundle)
    installed = store.installed("3.10.0", OcrOptions(text_score=0.7), verify=True)
    assert installed.options.procedure == "rapidocr-3.10"
    assert installed.options.box_thresh == 0.6 and installed.options.text_score == 0.7  # over the base
    # the set's three, and the page orientation model beside them when it is fetched (bundles may carry it)
    carried = [m for m in (*PPOCRV6_SMALL.files, *PPOCRV6_SMALL.optional) if (models_dir() / m.filename).is_file()]
    assert sorted(p.name for p in installed.models.values()) == sorted(m.filename for m in carried)
    assert set(installed.models) == {m.role for m in carried}


def test_a_folder_set_brings_its_procedure_and_options(tmp_path: Path, key: KeyPair,
                                                       models: dict[str, Path]) -> None:
    folder = models["det"].parent
    (folder / "modelset.toml").write_text(
        'name = "labels"\nprocedure = "rapidocr-3.10"\n[files]\ndet = "det.onnx"\ncls = "cls.onnx"\n'
        'rec = "rec.onnx"\n[options]\nrec_height = 32\n')
    bundle = tmp_path / "labels.vkb"
    assert create("--models", folder, "--name", "labels", "--version", "1", "--option", "rec_height=40",
                  "--key", key.private_path, "-o", bundle) == 0
    store = ModelStore(tmp_path / "store", key.trusted, keep=3)
    store.add(bundle)
    options = store.installed("1").options
    assert options.procedure == "rapidocr-3.10" and options.rec_height == 40  # --option over the set's


def test_an_unknown_set_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert create("--models", "ppocrv5", "--name", "x", "--version", "1", "-o", tmp_path / "x.vkb") == 1
    assert "neither a model set (ppocrv6-small, ppocrv4) nor a folder" in capsys.readouterr().err
