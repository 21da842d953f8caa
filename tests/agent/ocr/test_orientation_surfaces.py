"""The page orientation option and answer on every surface: `vkocr ocr --use-doc-orientation` (its JSON carries
page_angle), the wire (Options.use_doc_orientation and doc_orientation_thresh in, RecognizeResponse.page_angle
out, unset when the stage did not run)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.paths import MODELS
from tests.text_pages import FONT, text_page
from vkocr.agent.cli.main import main
from vkocr.agent.ocr.model_files import ORIENTATION_FILE
from vkocr.agent.serving.wire import options_from_proto, result_from_proto, result_to_proto
from vkocr.postproc.result import OcrLine, OcrResult
from vkocr.v1 import ocr_pb2

WORDS = ("delivery", "address", "invoice", "number")


@pytest.mark.skipif(not (MODELS / ORIENTATION_FILE.filename).is_file() or not Path(FONT).is_file(),
                    reason="the orientation model (scripts/fetch_models.py) or fonts-dejavu-core is absent")
def test_vkocr_ocr_turns_the_page_and_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    page = np.asarray(text_page(*WORDS, width=360))
    path = tmp_path / "turned.png"
    Image.fromarray(np.ascontiguousarray(np.rot90(page, 3))).save(path)  # 90° clockwise
    assert main(["ocr", str(path), "--json", "--device", "cpu", "--use-doc-orientation",
                 "--doc-orientation-thresh", "0.4"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["page_angle"] == 90
    assert [line["text"] for line in answer["lines"]] == list(WORDS)
    assert main(["ocr", str(path), "--json", "--device", "cpu"]) == 0
    assert "page_angle" not in json.loads(capsys.readouterr().out)


def test_the_wire_carries_the_option_and_the_angle() -> None:
    options = options_from_proto(ocr_pb2.Options(use_doc_orientation=True, doc_orientation_thresh=0.7))
    assert options == {"use_doc_orientation": True, "doc_orientation_thresh": 0.7}
    line = OcrLine("total", 0.9, [[1.0, 2.0], [3.0, 2.0], [3.0, 4.0], [1.0, 4.0]])
    for angle in (None, 0, 270):
        resp = result_to_proto(OcrResult([line], page_angle=angle), "r", "v", "cpu", (10, 20))
        assert resp.HasField("page_angle") == (angle is not None)
        assert result_from_proto(resp).page_angle == angle


@pytest.mark.skipif(not (MODELS / ORIENTATION_FILE.filename).is_file() or not Path(FONT).is_file(),
                    reason="the orientation model (scripts/fetch_models.py) or fonts-dejavu-core is absent")
def test_the_agent_turns_a_page_over_grpc() -> None:
    """A real agent (the CPU backend) on a loopback port: the option in, page_angle and input-frame boxes out."""
    import grpc

    from tests.agent.agents import running_agent
    from vkocr.v1 import ocr_pb2_grpc

    page = np.asarray(text_page(*WORDS, width=360))
    turned = np.ascontiguousarray(np.rot90(page, 2))
    raw = ocr_pb2.RawImage(data=turned.tobytes(), height=turned.shape[0], width=turned.shape[1],
                           layout=ocr_pb2.PIXEL_LAYOUT_RGB8)
    with running_agent(**{"device.select": "cpu", "models.set": "ppocrv6-small"}) as agent:
        with grpc.insecure_channel(agent.target) as channel:
            stub = ocr_pb2_grpc.OcrServiceStub(channel)
            on = stub.Recognize(ocr_pb2.RecognizeRequest(raw=raw, options=ocr_pb2.Options(
                use_doc_orientation=True, doc_orientation_thresh=0.4)), timeout=60)
            off = stub.Recognize(ocr_pb2.RecognizeRequest(raw=raw), timeout=60)
    assert on.page_angle == 180 and not off.HasField("page_angle")
    assert [line.text for line in on.lines] == list(WORDS)
    first = on.lines[0].box  # the first word, at the page's top, lies at the bottom of the turned input
    assert min(p.y for p in first) > turned.shape[0] / 2


def test_a_warm_up_with_the_option_prepares_the_classifier_and_turned_pages() -> None:
    from vkocr.agent.ocr.options import OcrOptions
    from vkocr.agent.ocr.plan_shapes import warm_plan_shapes
    from vkocr.agent.ocr.request import RequestGeometry

    off = warm_plan_shapes([(1000, 600)], OcrOptions(), 8)
    on = warm_plan_shapes([(1000, 600)], OcrOptions(use_doc_orientation=True), 8)
    assert not [s for s in off if s[0] == "ori"] and ("ori", (1, 3, 224, 224)) in on
    turned = ("det", (1, 3, *RequestGeometry.of(1000, 600, OcrOptions()).det_size))
    assert turned in on and turned not in off


def test_an_agent_without_the_model_refuses_the_option_naming_it(tmp_path: Path) -> None:
    """A model folder without the orientation model: INVALID_ARGUMENT whose BadRequest names the field."""
    import grpc
    from google.rpc import error_details_pb2, status_pb2
    from grpc_status import rpc_status

    from tests.agent.agents import running_agent
    from vkocr.agent.ocr.model_files import PPOCRV6_SMALL
    from vkocr.v1 import ocr_pb2_grpc

    for model in PPOCRV6_SMALL.files:
        (tmp_path / model.filename).symlink_to(MODELS / model.filename)
    raw = ocr_pb2.RawImage(data=bytes(40 * 40 * 3), height=40, width=40, layout=ocr_pb2.PIXEL_LAYOUT_RGB8)
    with running_agent(**{"device.select": "cpu", "models.set": "", "models.dir": str(tmp_path)}) as agent:
        with grpc.insecure_channel(agent.target) as channel:
            stub = ocr_pb2_grpc.OcrServiceStub(channel)
            with pytest.raises(grpc.RpcError) as caught:
                stub.Recognize(ocr_pb2.RecognizeRequest(raw=raw, options=ocr_pb2.Options(use_doc_orientation=True)),
                               timeout=60)
            assert stub.Recognize(ocr_pb2.RecognizeRequest(raw=raw), timeout=60).lines is not None
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    status = rpc_status.from_call(caught.value)
    assert isinstance(status, status_pb2.Status)
    bad = error_details_pb2.BadRequest()
    assert any(d.Unpack(bad) for d in status.details)
    assert [v.field for v in bad.field_violations] == ["options.use_doc_orientation"]


@pytest.mark.skipif(not (MODELS / ORIENTATION_FILE.filename).is_file(), reason="no orientation model here")
def test_the_benches_reference_takes_the_sets_files_beside_the_orientation_model() -> None:
    """RapidOCR 3.10 (the benches' reference) has no page orientation stage: the set's paths, which name the
    orientation model too, still make one."""
    pytest.importorskip("rapidocr")
    from vkocr.agent.cli.reference_ocr import reference_for
    from vkocr.agent.ocr.model_sets import choose_models

    chosen = choose_models()
    assert "ori" in chosen.paths and set(chosen.required_paths()) == {"det", "cls", "rec"}
    assert reference_for(chosen.procedure, chosen.paths) is not None
