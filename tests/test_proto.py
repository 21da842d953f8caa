"""The generated stubs match the .proto files they come from, and the contract holds the services DESIGN.md
names."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from tests.paths import ROOT

sys.path.insert(0, str(ROOT / "scripts"))

import gen_proto  # noqa: E402  (from scripts/, put on the path just above)


@pytest.mark.skipif(importlib.util.find_spec("grpc_tools") is None, reason="grpcio-tools is a test dependency")
def test_generated_stubs_are_current(tmp_path: Path) -> None:
    gen_proto.generate(tmp_path)
    fresh = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    assert fresh, "protoc wrote nothing"
    stale = [str(rel) for rel in fresh if (tmp_path / rel).read_bytes() != (gen_proto.PROTO_ROOT / rel).read_bytes()]
    assert not stale, f"stale stubs, run `python scripts/gen_proto.py`: {stale}"


def test_services_of_the_contract() -> None:
    from vkocr.v1 import models_pb2, ocr_pb2, status_pb2

    methods = {
        "Ocr": ocr_pb2.DESCRIPTOR.services_by_name["Ocr"],
        "Status": status_pb2.DESCRIPTOR.services_by_name["Status"],
        "Models": models_pb2.DESCRIPTOR.services_by_name["Models"],
    }
    assert set(methods["Ocr"].methods_by_name) == {"Recognize", "RecognizeStream"}
    stream = methods["Ocr"].methods_by_name["RecognizeStream"]
    assert stream.client_streaming and stream.server_streaming
    assert methods["Status"].methods_by_name["Watch"].server_streaming
    assert {"UploadBundle", "Activate", "Rollback", "List", "Delete"} <= set(methods["Models"].methods_by_name)
    assert methods["Models"].methods_by_name["UploadBundle"].client_streaming
    assert ocr_pb2.DESCRIPTOR.package == "vkocr.v1"
